// `strata inspect` end to end: the JSON layout, --dequant, and malformed files (one-line error, non-zero
// exit, no signal, well within a second).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/gguf/gguf_file.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

using test::run_command;
using test::shell_quote;

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

test::CommandResult inspect(const std::filesystem::path& model, const std::string& extra = "") {
  return run_command(shell_quote(test::strata_executable().string()) + " inspect " + shell_quote(model.string()) + " " +
                     extra);
}

class InspectCli : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = std::filesystem::temp_directory_path() /
              ("strata-inspect-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  std::filesystem::path folder_;
};

TEST_F(InspectCli, JsonListsMetadataAndTensorsAsThePeerDoes) {
  const auto model = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  const auto expected_path = test::reference_dir() / "dequant" / "qwen3moe-tiny-iq3_s.json";
  ASSERT_REFERENCE(model);
  const auto result = inspect(model, "--json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["metadata"]["general.architecture"], "qwen3moe");
  const auto expected = nlohmann::json::parse(std::ifstream(expected_path));
  ASSERT_EQ(json["tensors"].size(), expected.size());
  for (const auto& tensor : json["tensors"]) {
    const auto& want = expected.at(tensor["name"].get<std::string>());
    EXPECT_EQ(tensor["type"], want["type"]) << tensor["name"];
    EXPECT_EQ(tensor["shape"], want["shape"]) << tensor["name"];
    EXPECT_TRUE(tensor["offset"].is_number_unsigned());
    EXPECT_GT(tensor["bytes"].get<uint64_t>(), 0u);
  }
}

TEST_F(InspectCli, DequantWritesFloat32LittleEndian) {
  const auto model = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(model);
  const auto expected =
      nlohmann::json::parse(std::ifstream(test::reference_dir() / "dequant" / "qwen3moe-tiny-iq3_s.json"));
  for (const std::string name : {"token_embd.weight", "output.weight", "blk.0.ffn_down_exps.weight"}) {
    const auto out = folder_ / "t.f32";
    const auto result = inspect(model, "--dequant " + name + " --output " + shell_quote(out.string()));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto bytes = read_bytes(out);
    uint64_t count = 1;
    for (const auto& dim : expected[name]["shape"]) count *= dim.get<uint64_t>();
    ASSERT_EQ(bytes.size(), count * 4) << name;
    const auto first = expected[name]["first"].get<std::vector<float>>();
    for (size_t i = 0; i < first.size(); ++i) {
      float value;
      std::memcpy(&value, bytes.data() + 4 * i, 4);
      EXPECT_EQ(value, first[i]) << name << " value " << i;
    }
  }
  EXPECT_NE(inspect(model, "--dequant no.such.tensor --output " + shell_quote((folder_ / "x").string())).exit_code, 0);
}

// Each damaged file must give exit code 1 and one line on stderr naming the file, fast, without a signal.
void expect_clean_failure(const std::filesystem::path& path, const std::string& label) {
  const auto result = inspect(path);
  EXPECT_EQ(result.signal, 0) << label << " ended by signal " << result.signal;
  EXPECT_EQ(result.exit_code, 1) << label << ": " << result.err;
  EXPECT_LT(result.seconds, 1.0) << label;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << label << ": " << result.err;
  EXPECT_NE(result.err.find(path.filename().string()), std::string::npos) << label << ": " << result.err;
}

std::vector<std::filesystem::path> damage_sources() {
  std::vector<std::filesystem::path> sources = {std::filesystem::path(STRATA_SOURCE_DIR) /
                                                "tests/fuzz/gguf-corpus/all-value-types.gguf"};
  for (const auto& name : test::reference_model_names()) {
    const auto path = test::reference_dir() / "models" / (name + ".gguf");
    if (std::filesystem::exists(path)) sources.push_back(path);
  }
  return sources;
}

template <class T>
void patch(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

TEST_F(InspectCli, TruncatedInflatedAndUnknownFieldsFailCleanly) {
  for (const auto& source : damage_sources()) {
    const auto good = read_bytes(source);
    const auto parsed = gguf::File::parse(good.data(), good.size(), source.string());
    const auto& first_tensor = parsed->tensors().front();
    // The first tensor's info: its name, preceded by the name's length; the shape follows.
    std::string needle(8, '\0');
    const uint64_t name_length = first_tensor.name.size();
    std::memcpy(needle.data(), &name_length, 8);
    needle += first_tensor.name;
    const size_t info =
        static_cast<size_t>(std::find_end(good.begin(), good.end(), needle.begin(), needle.end()) - good.begin());
    const size_t dims = info + needle.size() + 4;
    const size_t type_field = dims + 8 * first_tensor.shape.size();

    std::vector<std::pair<std::string, std::vector<uint8_t>>> variants;
    for (const double fraction : {0.0001, 0.01, 0.3, 0.9, 0.999}) {
      variants.emplace_back(
          "truncated",
          std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() * fraction)));
    }
    auto add = [&](const std::string& label, auto field_offset, auto value) {
      auto bytes = good;
      patch(bytes, field_offset, value);
      variants.emplace_back(label, std::move(bytes));
    };
    add("tensor count", size_t{8}, uint64_t{1} << 58);
    add("metadata count", size_t{16}, uint64_t{1} << 58);
    add("key length", size_t{24}, uint64_t{1} << 40);
    add("name length", info, uint64_t{1} << 40);
    add("dimension count", info + needle.size(), uint32_t{64});
    add("dimension", dims, uint64_t{1} << 61);
    add("type", type_field, uint32_t{1000});
    add("offset", type_field + 4, uint64_t{1} << 50);

    for (size_t i = 0; i < variants.size(); ++i) {
      const auto path = folder_ / ("damaged-" + std::to_string(i) + ".gguf");
      write_bytes(path, variants[i].second);
      expect_clean_failure(path, source.filename().string() + " " + variants[i].first);
    }
  }
}

TEST_F(InspectCli, BitFlipsNeverEndInASignal) {
  std::mt19937 random(99);
  for (const auto& source : damage_sources()) {
    const auto good = read_bytes(source);
    const size_t header = std::min<size_t>(good.size(), 4096);  // flips in the header reach the parser
    for (int trial = 0; trial < 6; ++trial) {
      auto bytes = good;
      for (int flip = 0; flip < 8; ++flip) bytes[random() % header] ^= static_cast<uint8_t>(1u << (random() % 8));
      const auto path = folder_ / "flipped.gguf";
      write_bytes(path, bytes);
      const auto result = inspect(path);
      EXPECT_EQ(result.signal, 0) << source;
      EXPECT_TRUE(result.exit_code == 0 || result.exit_code == 1) << result.err;
      EXPECT_LT(result.seconds, 1.0);
    }
  }
}

}  // namespace
}  // namespace strata
