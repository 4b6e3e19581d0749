// The GGUF reader: every value type, versions, alignment, split models, and malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/gguf/gguf_writer.hpp"
#include "core/util/error.hpp"

namespace strata::gguf {
namespace {

Value make(auto v) { return Value{v}; }

Array make_array(ValueType type, std::vector<Value> items) { return Array{type, std::move(items)}; }

// A small file with every metadata type, a nested array and two tensors.
Writer sample_writer(uint64_t alignment = 32) {
  Writer writer(alignment);
  writer.set("general.architecture", make(std::string("qwen3moe")));
  writer.set("t.u8", make(uint8_t{200}));
  writer.set("t.i8", make(int8_t{-5}));
  writer.set("t.u16", make(uint16_t{65000}));
  writer.set("t.i16", make(int16_t{-30000}));
  writer.set("t.u32", make(uint32_t{4000000000u}));
  writer.set("t.i32", make(int32_t{-2000000000}));
  writer.set("t.f32", make(1.5f));
  writer.set("t.bool", make(true));
  writer.set("t.u64", make(uint64_t{1} << 40));
  writer.set("t.i64", make(int64_t{-1} << 40));
  writer.set("t.f64", make(0.125));
  writer.set("t.strings", Value{make_array(ValueType::STRING, {make(std::string("a")), make(std::string("bc"))})});
  writer.set("t.nested", Value{make_array(ValueType::ARRAY,
                                          {Value{make_array(ValueType::I32, {make(int32_t{1}), make(int32_t{2})})},
                                           Value{make_array(ValueType::I32, {})}})});
  writer.add_tensor("a", type_id::F32, {4, 2});
  writer.add_tensor("b", type_id::Q8_0, {64});
  return writer;
}

std::vector<std::vector<uint8_t>> sample_data() {
  std::vector<uint8_t> a(32);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i);
  return {a, std::vector<uint8_t>(68, 7)};
}

std::vector<uint8_t> sample_bytes() { return sample_writer().to_bytes(sample_data()); }

std::shared_ptr<const File> parse(const std::vector<uint8_t>& bytes) {
  return File::parse(bytes.data(), bytes.size(), "test.gguf");
}

// Offset of the first occurrence of needle in bytes (to patch a field).
size_t find_bytes(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const auto hit = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(hit, bytes.end()) << needle;
  return static_cast<size_t>(hit - bytes.begin());
}

size_t find_last_bytes(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const auto hit = std::find_end(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(hit, bytes.end()) << needle;
  return static_cast<size_t>(hit - bytes.begin());
}

template <class T>
void patch(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gguf, ReadsEveryValueTypeAndTensor) {
  const auto bytes = sample_bytes();
  const auto file = parse(bytes);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(*file->find("general.architecture")->as_string(), "qwen3moe");
  EXPECT_EQ(file->find("t.u8")->as_uint(), 200u);
  EXPECT_EQ(file->find("t.i8")->as_int(), -5);
  EXPECT_EQ(file->find("t.u16")->as_uint(), 65000u);
  EXPECT_EQ(file->find("t.i16")->as_int(), -30000);
  EXPECT_EQ(file->find("t.u32")->as_uint(), 4000000000u);
  EXPECT_EQ(file->find("t.i32")->as_int(), -2000000000);
  EXPECT_EQ(file->find("t.f32")->as_float(), 1.5);
  EXPECT_EQ(std::get<bool>(file->find("t.bool")->data), true);
  EXPECT_EQ(file->find("t.u64")->as_uint(), uint64_t{1} << 40);
  EXPECT_EQ(file->find("t.i64")->as_int(), int64_t{-1} << 40);
  EXPECT_EQ(file->find("t.f64")->as_float(), 0.125);
  EXPECT_FALSE(file->find("t.i8")->as_uint().has_value()) << "a negative value is no unsigned integer";
  const Array* strings = file->find("t.strings")->as_array();
  ASSERT_NE(strings, nullptr);
  ASSERT_EQ(strings->items.size(), 2u);
  EXPECT_EQ(*strings->items[1].as_string(), "bc");
  const Array* nested = file->find("t.nested")->as_array();
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->items[0].as_array()->items[1].as_int(), 2);
  EXPECT_TRUE(nested->items[1].as_array()->items.empty());

  ASSERT_EQ(file->tensors().size(), 2u);
  const TensorInfo& a = file->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(a.bytes, 32u);
  EXPECT_EQ(a.data[5], 5);
  const TensorInfo& b = file->tensors()[1];
  EXPECT_EQ(b.type, type_id::Q8_0);
  EXPECT_EQ(b.bytes, 68u);
  EXPECT_EQ(b.offset % 32, 0u);
  EXPECT_EQ(b.data[0], 7);
}

TEST(Gguf, ReadsVersion2) {
  auto bytes = sample_bytes();
  patch<uint32_t>(bytes, 4, 2);
  EXPECT_EQ(parse(bytes)->version(), 2u);
}

TEST(Gguf, HonoursAlignment) {
  const auto bytes = sample_writer(256).to_bytes(sample_data());
  const auto file = parse(bytes);
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->data_offset() % 256, 0u);
  EXPECT_EQ(file->tensors()[1].offset, 256u);
  EXPECT_EQ(file->tensors()[1].data[0], 7);
}

TEST(Gguf, RejectsBadAlignment) {
  auto bytes = sample_writer(64).to_bytes(sample_data());
  patch<uint32_t>(bytes, find_bytes(bytes, "general.alignment") + 17 + 4, 48);
  EXPECT_NE(parse_error(bytes).find("not a power of two"), std::string::npos);
}

TEST(Gguf, RejectsEachKindOfDamageWithANamedError) {
  const auto good = sample_bytes();
  struct Case {
    const char* label;
    std::function<void(std::vector<uint8_t>&)> damage;
    const char* expected;
  };
  // Tensor infos follow the metadata, so the last match is the tensor's (the metadata holds a string "a").
  const size_t tensor_a = find_last_bytes(good, std::string("\x01\0\0\0\0\0\0\0a", 9));
  const size_t dims_a = tensor_a + 9 + 4;
  const std::vector<Case> cases = {
      {"magic", [](auto& b) { b[0] = 'X'; }, "bad magic"},
      {"version 1", [](auto& b) { patch<uint32_t>(b, 4, 1); }, "version 1"},
      {"version 9", [](auto& b) { patch<uint32_t>(b, 4, 9); }, "unsupported GGUF version 9"},
      {"tensor count", [](auto& b) { patch<uint64_t>(b, 8, uint64_t{1} << 60); }, "tensor count"},
      {"metadata count", [](auto& b) { patch<uint64_t>(b, 16, uint64_t{1} << 62); }, "metadata count"},
      {"key length", [](auto& b) { patch<uint64_t>(b, 24, uint64_t{1} << 50); }, "claims"},
      {"value type", [&](auto& b) { patch<uint32_t>(b, find_bytes(good, "t.u8") + 4, 77); }, "unknown value type 77"},
      {"array length",
       [&](auto& b) { patch<uint64_t>(b, find_bytes(good, "t.strings") + 9 + 4 + 4, uint64_t{1} << 40); },
       "array count"},
      {"dimension count", [&](auto& b) { patch<uint32_t>(b, tensor_a + 9, 9); }, "9 dimensions"},
      {"huge dimension", [&](auto& b) { patch<uint64_t>(b, dims_a, uint64_t{1} << 62); }, "implausibly large"},
      {"zero dimension", [&](auto& b) { patch<uint64_t>(b, dims_a, 0); }, "zero dimension"},
      {"row not whole blocks", [&](auto& b) { patch<uint32_t>(b, dims_a + 16, type_id::Q8_0); }, "whole Q8_0 blocks"},
      {"unknown tensor type", [&](auto& b) { patch<uint32_t>(b, dims_a + 16, 200); }, "unknown type id 200"},
      {"offset out of order", [&](auto& b) { patch<uint64_t>(b, dims_a + 20, uint64_t{1} << 40); }, "expected 0"},
      {"data cut short", [&](auto& b) { b.resize(b.size() - 40); }, "past the end"},
      {"damaged key", [&](auto& b) { b[find_bytes(good, "t.u8")] = '\x01'; }, "not printable ASCII"},
      {"long tensor name", [&](auto& b) { patch<uint64_t>(b, tensor_a, 64); }, "name of 64 bytes"},
      {"unaligned offset", [&](auto& b) { patch<uint64_t>(b, dims_a + 20, 3); }, "not aligned"},
      {"duplicate tensor", [&](auto& b) { b[find_last_bytes(good, std::string("\x01\0\0\0\0\0\0\0b", 9)) + 8] = 'a'; },
       "appears twice"},
  };
  for (const auto& test_case : cases) {
    auto bytes = good;
    test_case.damage(bytes);
    const std::string message = parse_error(bytes);
    EXPECT_NE(message.find("test.gguf: "), std::string::npos) << test_case.label << ": " << message;
    EXPECT_NE(message.find(test_case.expected), std::string::npos) << test_case.label << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

TEST(Gguf, EveryTruncationIsAnError) {
  const auto good = sample_bytes();
  const auto file = parse(good);
  const TensorInfo& last = file->tensors().back();
  const size_t data_end = file->data_offset() + last.offset + last.bytes;  // only padding follows
  for (size_t length = 0; length < data_end; ++length) {
    std::vector<uint8_t> bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length));
    EXPECT_FALSE(parse_error(bytes).empty()) << "truncated to " << length << " bytes";
  }
}

TEST(Gguf, RandomBitFlipsNeverCrash) {
  const auto good = sample_bytes();
  std::mt19937 random(1234);
  int rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    auto bytes = good;
    const int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f) bytes[random() % bytes.size()] ^= static_cast<uint8_t>(1u << (random() % 8));
    rejected += parse_error(bytes).empty() ? 0 : 1;
  }
  EXPECT_GT(rejected, 0);
}

TEST(Gguf, NestingDepthIsBounded) {
  // An array of arrays of arrays ... 1000 deep, each with one element.
  std::vector<uint8_t> bytes;
  auto put = [&](auto v) {
    const auto* raw = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), raw, raw + sizeof(v));
  };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{0});
  put(uint64_t{1});
  put(uint64_t{1});
  bytes.push_back('k');
  put(uint32_t{9});
  for (int depth = 0; depth < 1000; ++depth) {
    put(uint32_t{9});
    put(uint64_t{1});
  }
  EXPECT_NE(parse_error(bytes).find("nested deeper"), std::string::npos);
}

class GgufFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("strata-gguf-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::filesystem::path write_part(const std::string& name, int index, int count, const std::string& tensor) {
    Writer writer;
    writer.set("split.no", make(uint16_t(index - 1)));
    writer.set("split.count", make(uint16_t(count)));
    writer.set("split.tensors.count", make(int32_t(count)));
    writer.add_tensor(tensor, type_id::F32, {8});
    const auto path = folder_ / name;
    const std::vector<float> values(8, static_cast<float>(index));
    writer.open(path);
    writer.write_tensor(values.data(), values.size() * sizeof(float));
    writer.finish();
    return path;
  }

  std::filesystem::path folder_;
};

TEST_F(GgufFiles, OpensAFileFromDisk) {
  const auto path = folder_ / "one.gguf";
  const auto bytes = sample_bytes();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  const Model model(path);
  EXPECT_EQ(model.tensors().size(), 2u);
  EXPECT_EQ(model.tensor("a").data[31], 31);
  EXPECT_THROW(model.tensor("missing"), Error);
}

TEST_F(GgufFiles, SplitModelOpensEveryPartFromAnyPart) {
  write_part("m-00001-of-00003.gguf", 1, 3, "t1");
  write_part("m-00002-of-00003.gguf", 2, 3, "t2");
  const auto third = write_part("m-00003-of-00003.gguf", 3, 3, "t3");
  const Model model(third);
  ASSERT_EQ(model.files().size(), 3u);
  ASSERT_EQ(model.tensors().size(), 3u);
  const TensorInfo& t2 = model.tensor("t2");
  EXPECT_EQ(t2.file_index, 1u);
  float value;
  std::memcpy(&value, t2.data, sizeof value);
  EXPECT_EQ(value, 2.0f);
}

TEST_F(GgufFiles, SplitModelWithAMissingPartNamesIt) {
  const auto first = write_part("m-00001-of-00002.gguf", 1, 2, "t1");
  try {
    Model model(first);
    FAIL() << "a missing part must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m-00002-of-00002.gguf"), std::string::npos) << e.what();
  }
}

TEST_F(GgufFiles, MissingAndEmptyFilesAreErrors) {
  EXPECT_THROW(Model(folder_ / "absent.gguf"), Error);
  std::ofstream(folder_ / "empty.gguf").close();
  EXPECT_THROW(Model(folder_ / "empty.gguf"), Error);
  EXPECT_THROW(Model{folder_}, Error);
}

}  // namespace
}  // namespace strata::gguf
