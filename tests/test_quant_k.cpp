// The k-quant codecs of plugins/quant-k: hand-built blocks decode as the formats define, the quantizer's
// error on Gaussian data and its importance weighting, and its quality against the reference quantizer on
// the reference models.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "q4_k.hpp"
#include "q5_k.hpp"
#include "q6_k.hpp"
#include "strata/half.hpp"
#include "strata/plugin.hpp"
#include "support/reference.hpp"

namespace {

using strata::quant_k::Q4KCodec;
using strata::quant_k::Q5KCodec;
using strata::quant_k::Q6KCodec;
using strata::sdk::fp16_to_fp32;

void put_f16(std::vector<uint8_t>& block, size_t offset, uint16_t bits) {
  block[offset] = static_cast<uint8_t>(bits & 0xff);
  block[offset + 1] = static_cast<uint8_t>(bits >> 8);
}

// Decodes through the plugin ABI's adapter, as the host will.
template <class Codec>
std::vector<float> decode(const std::vector<uint8_t>& blocks) {
  const int64_t n_blocks = static_cast<int64_t>(blocks.size() / Codec::block_bytes);
  std::vector<float> out(n_blocks * Codec::block_elements);
  char message[256] = "";
  strata_error error{message, sizeof(message)};
  EXPECT_EQ(strata::sdk::quant_type_v<Codec>.dequantize(blocks.data(), out.data(), n_blocks, &error), STRATA_OK)
      << message;
  return out;
}

template <class Codec>
std::vector<float> round_trip(const std::vector<float>& x, int64_t n_per_row, const float* importance = nullptr) {
  std::vector<uint8_t> blocks(x.size() / Codec::block_elements * Codec::block_bytes);
  char message[256] = "";
  strata_error error{message, sizeof(message)};
  const int64_t n_rows = static_cast<int64_t>(x.size()) / n_per_row;
  EXPECT_EQ(strata::sdk::quant_type_v<Codec>.quantize(x.data(), blocks.data(), n_rows, n_per_row, importance, &error),
            STRATA_OK)
      << message;
  return decode<Codec>(blocks);
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// Q4_K / Q5_K header: sub-block scale and min codes, with codes >= 16 in sub-blocks 4-7 (whose top bits
// live in bytes 0-7) and 63 in sub-blocks 0-3 (whose spare top bits must not leak into them). The 12 bytes
// were packed by hand from the format: byte j (j < 4) = scale[j] | (scale[j+4] >> 4) << 6, byte j+4 =
// min[j] | (min[j+4] >> 4) << 6, byte j+8 = (scale[j+4] & 15) | (min[j+4] & 15) << 4.
constexpr int kScaleCodes[8] = {1, 2, 3, 63, 17, 33, 48, 62};
constexpr int kMinCodes[8] = {0, 5, 63, 7, 19, 40, 32, 61};
constexpr uint8_t kPackedCodes[12] = {0x41, 0x82, 0xC3, 0xFF, 0x40, 0x85, 0xBF, 0xC7, 0x31, 0x81, 0x00, 0xDE};
constexpr uint16_t kD = 0x1E3B;     // ~0.0061, not a power of two, so the order of float operations shows
constexpr uint16_t kDmin = 0x1A7F;  // ~0.0031

std::vector<uint8_t> scale_min_header(size_t block_bytes) {
  std::vector<uint8_t> block(block_bytes, 0);
  put_f16(block, 0, kD);
  put_f16(block, 2, kDmin);
  std::copy(std::begin(kPackedCodes), std::end(kPackedCodes), block.begin() + 4);
  return block;
}

// The format's value: (d * scale_code) * level - dmin * min_code, for the 32-value sub-block of i.
float scale_min_value(int i, int level) {
  const float d = fp16_to_fp32(kD), dmin = fp16_to_fp32(kDmin);
  return d * static_cast<float>(kScaleCodes[i / 32]) * static_cast<float>(level) -
         dmin * static_cast<float>(kMinCodes[i / 32]);
}

TEST(QuantK, Q4KHandBuiltBlockDecodes) {
  std::vector<uint8_t> block = scale_min_header(Q4KCodec::block_bytes);
  // 4-bit level of value i: byte 16 + 32 * (i / 64) + i % 32, low nibble for the first 32 of each 64.
  auto level = [](int i) { return (7 * i + 3) % 16; };
  for (int i = 0; i < 256; ++i)
    block[16 + 32 * (i / 64) + i % 32] |= static_cast<uint8_t>(level(i) << (4 * ((i % 64) / 32)));
  const std::vector<float> out = decode<Q4KCodec>(block);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(out[i], scale_min_value(i, level(i))) << "value " << i;
}

TEST(QuantK, Q5KHandBuiltBlockDecodes) {
  std::vector<uint8_t> block = scale_min_header(Q5KCodec::block_bytes);
  // Low 4 bits as in Q4_K but from byte 48; the fifth bit of value i is bit 2 * (i / 64) + (i % 64) / 32 of
  // byte 16 + i % 32.
  auto level = [](int i) { return (11 * i + 5) % 32; };
  for (int i = 0; i < 256; ++i) {
    block[48 + 32 * (i / 64) + i % 32] |= static_cast<uint8_t>((level(i) & 15) << (4 * ((i % 64) / 32)));
    block[16 + i % 32] |= static_cast<uint8_t>((level(i) >> 4) << (2 * (i / 64) + (i % 64) / 32));
  }
  const std::vector<float> out = decode<Q5KCodec>(block);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(out[i], scale_min_value(i, level(i))) << "value " << i;
}

TEST(QuantK, Q6KHandBuiltBlockDecodes) {
  constexpr int kScales[16] = {-128, 127, -1, 0, 1, 64, -64, 33, -33, 100, -100, 7, -7, 2, 50, -90};
  constexpr uint16_t kDBits = 0x2C1F;  // ~0.0634
  std::vector<uint8_t> block(Q6KCodec::block_bytes, 0);
  for (int j = 0; j < 16; ++j) block[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(kScales[j]));
  put_f16(block, 208, kDBits);
  // Stored level (0..63, meaning level - 32) of value i = 128h + 32k + l: low 4 bits in byte
  // 64h + 32 * (k % 2) + l (low nibble for k < 2), top 2 bits at bit 2k of byte 128 + 32h + l.
  auto stored = [](int i) { return (13 * i + 7) % 64; };
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    block[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((stored(i) & 15) << (4 * (k / 2)));
    block[128 + 32 * h + l] |= static_cast<uint8_t>((stored(i) >> 4) << (2 * k));
  }
  const std::vector<float> out = decode<Q6KCodec>(block);
  const float d = fp16_to_fp32(kDBits);
  for (int i = 0; i < 256; ++i) {
    const float expected = d * static_cast<float>(kScales[i / 16]) * static_cast<float>(stored(i) - 32);
    ASSERT_EQ(out[i], expected) << "value " << i;
  }
}

TEST(QuantK, ZeroRowsStayZero) {
  const std::vector<float> zeros(512, 0.0f);
  EXPECT_EQ(round_trip<Q4KCodec>(zeros, 512), zeros);
  EXPECT_EQ(round_trip<Q5KCodec>(zeros, 512), zeros);
  EXPECT_EQ(round_trip<Q6KCodec>(zeros, 512), zeros);
}

TEST(QuantK, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> blocks(1024);
  char message[256] = "";
  strata_error error{message, sizeof(message)};
  EXPECT_EQ(strata::sdk::quant_type_v<Q5KCodec>.quantize(x.data(), blocks.data(), 1, 300, nullptr, &error),
            STRATA_E_INVALID_ARGUMENT);
}

constexpr int64_t kRows = 64, kPerRow = 1024;

std::vector<float> gaussian(uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kRows * kPerRow);
  for (float& v : x) v = normal(generator);
  return x;
}

// Naive baselines with unquantized float scales: min/max mapping of each 32 values onto [0, nmax]
// (Q4_K / Q5_K), absmax mapping of each 16 values onto [-31, 31] (Q6_K).
std::vector<float> naive_min_max(const std::vector<float>& x, int nmax) {
  std::vector<float> y(x.size());
  for (size_t start = 0; start < x.size(); start += 32) {
    const auto [lo, hi] = std::minmax_element(x.begin() + start, x.begin() + start + 32);
    const float step = (*hi - *lo) / static_cast<float>(nmax);
    for (size_t i = start; i < start + 32; ++i) y[i] = *lo + step * std::nearbyint((x[i] - *lo) / step);
  }
  return y;
}

std::vector<float> naive_absmax(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t start = 0; start < x.size(); start += 16) {
    float amax = 0.0f;
    for (size_t i = start; i < start + 16; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float step = amax / 31.0f;
    for (size_t i = start; i < start + 16; ++i) y[i] = step * std::nearbyint(x[i] / step);
  }
  return y;
}

// Rounding to a grid of step s leaves an RMS error of s / sqrt(12). 32 standard normal values span about
// 4.1 sigma, so Q4_K's 15 steps give ~0.079 and Q5_K's 31 steps ~0.038; the largest of 16 reaches about
// 2.0 sigma, so Q6_K's 32 steps each side give ~0.018. A quantizer that fits each sub-block must stay below these
// (despite 6/8-bit scales and f16 super-scales) and below the naive float-scale baselines.
TEST(QuantK, GaussianRoundTripBeatsGridNoiseAndNaiveBaseline) {
  const std::vector<float> x = gaussian(1234);
  struct Case {
    const char* name;
    std::vector<float> ours, naive;
    double bound;
  };
  const Case cases[] = {
      {"Q4_K", round_trip<Q4KCodec>(x, kPerRow), naive_min_max(x, 15), 0.079},
      {"Q5_K", round_trip<Q5KCodec>(x, kPerRow), naive_min_max(x, 31), 0.038},
      {"Q6_K", round_trip<Q6KCodec>(x, kPerRow), naive_absmax(x), 0.018},
  };
  for (const Case& c : cases) {
    const double ours = rmse(c.ours, x), naive = rmse(c.naive, x);
    std::printf("%s: RMSE %.5f, naive %.5f, grid-noise bound %.3f\n", c.name, ours, naive, c.bound);
    EXPECT_LT(ours, c.bound) << c.name;
    EXPECT_LT(ours, naive) << c.name;
  }
}

// Columns with 20x importance in every sub-block must come out more accurate than without importance;
// uniform importance must equal no importance (the default weighting).
template <class Codec>
void check_importance(const char* name) {
  const std::vector<float> x = gaussian(99);
  std::vector<float> importance(kPerRow, 1.0f);
  for (int64_t i = 0; i < kPerRow; i += 8) importance[i] = 20.0f;
  const std::vector<float> plain = round_trip<Codec>(x, kPerRow);
  const std::vector<float> weighted = round_trip<Codec>(x, kPerRow, importance.data());
  double plain_error = 0.0, weighted_error = 0.0;
  for (size_t i = 0; i < x.size(); i += 8) {
    plain_error += (plain[i] - x[i]) * (plain[i] - x[i]);
    weighted_error += (weighted[i] - x[i]) * (weighted[i] - x[i]);
  }
  std::printf("%s: error on the important columns %.4g with importance, %.4g without\n", name, weighted_error,
              plain_error);
  EXPECT_LT(weighted_error, 0.8 * plain_error) << name;
  const std::vector<float> ones(kPerRow, 1.0f);
  EXPECT_EQ(round_trip<Codec>(x, kPerRow, ones.data()), plain) << name;
}

TEST(QuantK, ImportanceLowersErrorOnWeightedColumns) {
  check_importance<Q4KCodec>("Q4_K");
  check_importance<Q5KCodec>("Q5_K");
  check_importance<Q6KCodec>("Q6_K");
}

template <class Codec>
void report_speed() {
  const std::vector<float> x = gaussian(7);
  std::vector<uint8_t> blocks(x.size() / 256 * Codec::block_bytes);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t row = 0; row < kRows; ++row)
    Codec::quantize_row(x.data() + row * kPerRow, blocks.data() + row * kPerRow / 256 * Codec::block_bytes, kPerRow,
                        nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s quantize: %.2f M values/s\n", Codec::name, static_cast<double>(x.size()) / seconds / 1e6);
}

TEST(QuantK, QuantizeSpeed) {
  report_speed<Q4KCodec>();
  report_speed<Q5KCodec>();
  report_speed<Q6KCodec>();
}

// Dequantizes a k-quant tensor with our codec; false for other types.
bool decode_k_tensor(const strata::gguf::TensorInfo& tensor, std::vector<float>& out) {
  const auto run = [&]<class Codec>(Codec) {
    out.resize(tensor.bytes / Codec::block_bytes * Codec::block_elements);
    Codec::dequantize(tensor.data, out.data(), static_cast<int64_t>(tensor.bytes / Codec::block_bytes));
    return true;
  };
  switch (tensor.type) {
    case Q4KCodec::type_id:
      return run(Q4KCodec{});
    case Q5KCodec::type_id:
      return run(Q5KCodec{});
    case Q6KCodec::type_id:
      return run(Q6KCodec{});
    default:
      return false;
  }
}

std::vector<float> quantize_and_decode(uint32_t type, const std::vector<float>& x, int64_t n_per_row) {
  switch (type) {
    case Q4KCodec::type_id:
      return round_trip<Q4KCodec>(x, n_per_row);
    case Q5KCodec::type_id:
      return round_trip<Q5KCodec>(x, n_per_row);
    default:
      return round_trip<Q6KCodec>(x, n_per_row);
  }
}

// For every k-quant tensor of a quantized model whose NAME-f16.gguf sibling holds the same weights:
// RMSE of our quantizer against the f16 values, and RMSE of the file's own (reference) quantization; ours
// must be within 10% of the reference. The decoded tensor's first values must also match the reference
// dequantizer's (the full hash check is the repo-wide reference test's job).
TEST(QuantK, QuantizerMatchesReferenceQualityOnModels) {
  const std::filesystem::path models = strata::test::reference_dir() / "models";
  ASSERT_REFERENCE(models);
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    const std::string stem = entry.path().stem().string();
    const size_t dash = stem.rfind('-');
    if (entry.path().extension() != ".gguf" || dash == std::string::npos || stem.substr(dash) == "-f16") continue;
    const std::filesystem::path f16_path = models / (stem.substr(0, dash) + "-f16.gguf");
    if (!std::filesystem::exists(f16_path)) continue;
    const strata::gguf::Model quantized(entry.path());
    const strata::gguf::Model original(f16_path);
    nlohmann::json hashes;
    std::ifstream(strata::test::reference_dir() / "dequant" / (stem + ".json")) >> hashes;

    for (const strata::gguf::TensorInfo& tensor : quantized.tensors()) {
      std::vector<float> reference;
      if (!decode_k_tensor(tensor, reference)) continue;
      const strata::gguf::TensorInfo& source = original.tensor(tensor.name);
      ASSERT_EQ(source.type, 1u) << tensor.name << " in " << f16_path << " is not F16";
      ASSERT_EQ(source.n_elements, reference.size()) << tensor.name;
      std::vector<float> x(source.n_elements);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = fp16_to_fp32(static_cast<uint16_t>(source.data[2 * i] | source.data[2 * i + 1] << 8));

      const auto& first = hashes.at(tensor.name).at("first");
      for (size_t i = 0; i < first.size(); ++i)
        EXPECT_EQ(reference[i], first[i].get<float>()) << tensor.name << " value " << i;

      const double ours = rmse(quantize_and_decode(tensor.type, x, static_cast<int64_t>(tensor.shape[0])), x);
      const double theirs = rmse(reference, x);
      std::printf("%s %s (type %u): RMSE ours %.6g, reference %.6g (ratio %.3f)\n", stem.c_str(), tensor.name.c_str(),
                  tensor.type, ours, theirs, ours / theirs);
      EXPECT_LE(ours, 1.1 * theirs) << stem << " " << tensor.name;
      ++compared;
    }
  }
  EXPECT_GT(compared, 0) << "no k-quant tensor with an f16 original in " << models;
}

}  // namespace
