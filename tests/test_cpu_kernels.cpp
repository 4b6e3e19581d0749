// The CPU dot kernels (strata_quant_type::cpu_dot_rows) of every weight type: on random data quantized with
// the type's own quantizer, a kernel returns the dot of the dequantized weight and activation rows (the
// same numbers summed in another order), every SIMD level this CPU has agrees with the scalar one, and
// STRATA_CPU_ISA picks the level as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/quant/base_cpu_kernels.hpp"
#include "core/quant/quant_registry.hpp"
#include "iq3_s.hpp"
#include "iq3_s_nibbles.hpp"
#include "iq3_xxs.hpp"
#include "q4_k.hpp"
#include "q5_k.hpp"
#include "q6_k.hpp"
#include "strata/cpu_dot.hpp"
#include "strata/cpu_isa.hpp"
#include "strata/plugin.hpp"

namespace {

using strata::sdk::CpuDotVariants;
using strata::sdk::CpuIsa;

const strata_quant_type& base_type(uint32_t type_id) {
  const strata_quant_table& table = strata::base_quant_table();
  for (uint32_t i = 0; i < table.type_count; ++i) {
    if (table.types[i]->type_id == type_id) return *table.types[i];
  }
  throw std::runtime_error("no base type " + std::to_string(type_id));
}

struct KernelCase {
  std::string name;
  const strata_quant_type* weight_type;
  uint32_t activation_type_id;
  const CpuDotVariants* variants;
};

void PrintTo(const KernelCase& c, std::ostream* os) { *os << c.name; }

std::string case_name(const testing::TestParamInfo<KernelCase>& info) { return info.param.name; }

std::vector<float> gaussian(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

void check(strata_status status, const char* message) { ASSERT_EQ(status, STRATA_OK) << message; }

// Rows of n values, quantized, each starting row_bytes after the previous (the gap filled with junk, which
// a kernel must not read), with their dequantized values; and one quantized activation row.
struct Problem {
  int64_t n = 0, n_rows = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> weight;
  std::vector<float> weight_values;
  std::vector<uint8_t> activation;  // n_tokens rows, activation_stride bytes apart
  std::vector<float> activation_values;
  int64_t n_tokens = 1;
  size_t activation_stride = 0;
};

Problem make_problem(const KernelCase& c, int64_t blocks_per_row, int64_t n_rows, size_t gap, uint32_t seed,
                     int64_t n_tokens = 1) {
  const strata_quant_type& w = *c.weight_type;
  const strata_quant_type& a = base_type(c.activation_type_id);
  Problem p;
  p.n = blocks_per_row * w.block_elements;
  p.n_rows = n_rows;
  const size_t packed_row = static_cast<size_t>(blocks_per_row) * w.block_bytes;
  p.row_bytes = packed_row + gap;
  p.weight.assign(p.row_bytes * n_rows, 0xa5);
  p.weight_values.resize(p.n * n_rows);
  char message[256] = "";
  strata_error error{message, sizeof message};
  const std::vector<float> x = gaussian(p.n * n_rows, seed);
  for (int64_t r = 0; r < n_rows; ++r) {
    uint8_t* row = p.weight.data() + r * p.row_bytes;
    check(w.quantize(x.data() + r * p.n, row, 1, p.n, nullptr, &error), message);
    check(w.dequantize(row, p.weight_values.data() + r * p.n, blocks_per_row, &error), message);
  }
  // Activations with a few outliers, as hidden states have; rows apart by more than their bytes, too.
  std::vector<float> y = gaussian(p.n * n_tokens, seed + 1);
  for (int64_t i = 0; i < p.n * n_tokens; i += 97) y[i] *= 8.0f;
  const int64_t activation_blocks = p.n / a.block_elements;
  p.n_tokens = n_tokens;
  p.activation_stride = static_cast<size_t>(activation_blocks) * a.block_bytes + (n_tokens > 1 ? gap : 0);
  p.activation.assign(p.activation_stride * n_tokens, 0x5a);
  p.activation_values.resize(p.n * n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    uint8_t* row = p.activation.data() + t * p.activation_stride;
    check(a.quantize(y.data() + t * p.n, row, 1, p.n, nullptr, &error), message);
    check(a.dequantize(row, p.activation_values.data() + t * p.n, activation_blocks, &error), message);
  }
  return p;
}

std::vector<float> run(const Problem& p, strata::sdk::CpuDotRowsFn dot_rows) {
  std::vector<float> out(p.n_rows, std::nanf(""));
  dot_rows(p.n, p.n_rows, p.weight.data(), p.row_bytes, p.activation.data(), out.data());
  return out;
}

// |kernel - exact| within a relative tolerance of the sum of |products|: only the summation order may
// differ, so cancellation must not loosen the check.
void expect_close(const Problem& p, const std::vector<float>& got, const std::vector<double>& exact,
                  const std::vector<double>& magnitude, const std::string& what) {
  for (int64_t r = 0; r < p.n_rows; ++r) {
    EXPECT_NEAR(got[r], exact[r], 2e-6 * magnitude[r] + 1e-30) << what << ", row " << r << " of " << p.n_rows;
  }
}

struct Exact {
  std::vector<double> dot, magnitude;
};
Exact exact_dots(const Problem& p) {
  Exact e{std::vector<double>(p.n_rows), std::vector<double>(p.n_rows)};
  for (int64_t r = 0; r < p.n_rows; ++r) {
    for (int64_t i = 0; i < p.n; ++i) {
      const double product = static_cast<double>(p.weight_values[r * p.n + i]) * p.activation_values[i];
      e.dot[r] += product;
      e.magnitude[r] += std::fabs(product);
    }
  }
  return e;
}

class CpuKernel : public testing::TestWithParam<KernelCase> {
 protected:
  // Several blocks per row (3 super-blocks, 37 Q8_0 blocks, 1037 floats: a SIMD remainder), an odd row
  // count, and rows further apart than their bytes.
  Problem problem(uint32_t seed) const {
    const KernelCase& c = GetParam();
    const int64_t blocks = c.weight_type->block_elements >= 256 ? 3 : c.weight_type->block_elements >= 32 ? 37 : 1037;
    return make_problem(c, blocks, 7, 40, seed);
  }
};

TEST_P(CpuKernel, DeclaresItsActivationType) {
  EXPECT_EQ(GetParam().weight_type->cpu_activation_type, GetParam().activation_type_id);
  ASSERT_NE(GetParam().weight_type->cpu_dot_rows, nullptr);
}

TEST_P(CpuKernel, MatchesDotOfDequantizedRows) {
  ASSERT_NE(GetParam().weight_type->cpu_dot_rows, nullptr);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Problem p = problem(seed);
    const Exact exact = exact_dots(p);
    expect_close(p, run(p, GetParam().weight_type->cpu_dot_rows), exact.dot, exact.magnitude,
                 "dispatched kernel, seed " + std::to_string(seed));
  }
}

TEST_P(CpuKernel, EverySimdLevelOfThisCpuMatchesScalar) {
  const Problem p = problem(11);
  const Exact exact = exact_dots(p);
  const std::vector<float> scalar = run(p, GetParam().variants->pick(CpuIsa::scalar));
  expect_close(p, scalar, exact.dot, exact.magnitude, "scalar");
  for (CpuIsa isa : strata::sdk::kAllCpuIsas) {
    if (isa == CpuIsa::scalar || isa > strata::sdk::detect_cpu_isa()) continue;
    const std::vector<double> scalar_result(scalar.begin(), scalar.end());
    expect_close(p, run(p, GetParam().variants->pick(isa)), scalar_result, exact.magnitude,
                 std::string(strata::sdk::cpu_isa_name(isa)) + " against scalar");
  }
}

// Tokens across more than one of the kernels' token chunks, output rows further apart than n_rows: each
// token's results are what the one-token kernel of the same level gives.
TEST_P(CpuKernel, MultiTokenKernelMatchesOneTokenAtEveryLevel) {
  const KernelCase& c = GetParam();
  const Problem p = make_problem(c, 2, 5, 40, 21, 2 * strata::sdk::kDotTokens + 3);
  const size_t out_stride = static_cast<size_t>(p.n_rows) + 3;
  for (CpuIsa isa : strata::sdk::kAllCpuIsas) {
    if (isa > strata::sdk::detect_cpu_isa()) continue;
    const strata::sdk::CpuDotKernel& kernel = c.variants->pick_kernel(isa);
    if (kernel.rows_multi == nullptr) continue;
    std::vector<float> multi(out_stride * p.n_tokens, std::nanf(""));
    kernel.rows_multi(p.n, p.n_rows, p.weight.data(), p.row_bytes, p.activation.data(), p.activation_stride, p.n_tokens,
                      multi.data(), out_stride);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      std::vector<float> one(p.n_rows, std::nanf(""));
      kernel.rows(p.n, p.n_rows, p.weight.data(), p.row_bytes, p.activation.data() + t * p.activation_stride,
                  one.data());
      for (int64_t r = 0; r < p.n_rows; ++r) {
        EXPECT_EQ(multi[t * out_stride + r], one[r])
            << strata::sdk::cpu_isa_name(isa) << ", token " << t << ", row " << r;
      }
    }
  }
}

// The types whose kernels have a multi-token form at some level export it (a level without one runs its one-token
// kernel token by token).
TEST_P(CpuKernel, ExportsItsMultiTokenKernel) {
  const KernelCase& c = GetParam();
  const strata::sdk::CpuDotVariants& v = *c.variants;
  const bool some_level =
      v.scalar.rows_multi != nullptr || v.avx2.rows_multi != nullptr || v.avx512.rows_multi != nullptr;
  EXPECT_EQ(c.weight_type->cpu_dot_rows_multi != nullptr, some_level);
}

// Most kernels read activations rounded to 8 bits (Q8_0, Q8_K): a NaN or infinity among them must make every
// dot that reads it non-finite, as a float dot is, instead of being rounded to a level of 0 and going unseen.
TEST_P(CpuKernel, ANonFiniteActivationMakesEveryDotNonFinite) {
  const strata_quant_type& a = base_type(GetParam().activation_type_id);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Problem p = problem(13);
    std::vector<float> y = p.activation_values;
    y[p.n / 2] = bad;
    char message[256] = "";
    strata_error error{message, sizeof message};
    check(a.quantize(y.data(), p.activation.data(), 1, p.n, nullptr, &error), message);
    const std::vector<float> dots = run(p, GetParam().weight_type->cpu_dot_rows);
    for (int64_t r = 0; r < p.n_rows; ++r) EXPECT_FALSE(std::isfinite(dots[r])) << "row " << r << ", input " << bad;
  }
}

TEST_P(CpuKernel, ZeroRowsWritesNothing) {
  const Problem p = problem(5);
  float untouched = 42.0f;
  GetParam().weight_type->cpu_dot_rows(p.n, 0, p.weight.data(), p.row_bytes, p.activation.data(), &untouched);
  EXPECT_EQ(untouched, 42.0f);
}

using strata::iq3::Iq3SCodec;
using strata::iq3::Iq3SNibblesCodec;
using strata::iq3::Iq3XxsCodec;
using strata::quant_k::Q4KCodec;
using strata::quant_k::Q5KCodec;
using strata::quant_k::Q6KCodec;
using strata::sdk::quant_type_v;
namespace kernels = strata::cpu_kernels;

INSTANTIATE_TEST_SUITE_P(
    Types, CpuKernel,
    testing::Values(KernelCase{"F32", &base_type(0), 0, &kernels::kF32Dot},
                    KernelCase{"F16", &base_type(1), 0, &kernels::kF16Dot},
                    KernelCase{"BF16", &base_type(30), 0, &kernels::kBF16Dot},
                    KernelCase{"Q8_0", &base_type(8), 8, &kernels::kQ8_0Dot},
                    KernelCase{"Q4_K", &quant_type_v<Q4KCodec>, 15, &strata::quant_k::kQ4KDot},
                    KernelCase{"Q5_K", &quant_type_v<Q5KCodec>, 15, &strata::quant_k::kQ5KDot},
                    KernelCase{"Q6_K", &quant_type_v<Q6KCodec>, 15, &strata::quant_k::kQ6KDot},
                    KernelCase{"IQ3_XXS", &quant_type_v<Iq3XxsCodec>, 15, &strata::iq3::kIq3XxsDot},
                    KernelCase{"IQ3_S", &quant_type_v<Iq3SCodec>, 15, &strata::iq3::kIq3SDot},
                    KernelCase{"IQ3_S_nibbles", &quant_type_v<Iq3SNibblesCodec>, 15, &strata::iq3::kIq3SNibblesDot}),
    case_name);

// cpu_rows_to_int8 (the CPU backend's int8 matrix kernel reads it): block scale * (group scale * level) is the
// dequantizer's float exactly, at every level this CPU has, for rows further apart than their bytes. Types whose
// values carry offsets (cpu_rows_int8_offsets: Q4_K's and Q5_K's mins) add block offset scale * group offset, which
// the dequantizer rounds once more: there the sum in doubles is within that rounding of its float.
struct Int8Case {
  std::string name;
  const strata_quant_type* type;
  const strata::sdk::CpuRowsToInt8Variants* variants;
};
void PrintTo(const Int8Case& c, std::ostream* os) { *os << c.name; }

class CpuRowsToInt8 : public testing::TestWithParam<Int8Case> {};

TEST_P(CpuRowsToInt8, GivesTheDequantizedFloatsExactlyAtEveryLevel) {
  const Int8Case& c = GetParam();
  ASSERT_EQ(c.type->cpu_rows_to_int8 != nullptr, true);
  const Problem p = make_problem({c.name, c.type, 15, nullptr}, 3, 7, 40, 80);
  const int64_t n_groups = p.n * p.n_rows / STRATA_CPU_INT8_GROUP, n_blocks = p.n * p.n_rows / STRATA_CPU_INT8_BLOCK;
  std::vector<int16_t> group_offsets(n_groups, 0);
  std::vector<float> block_offset_scales(n_blocks, 0.0f);
  const auto offsets = c.type->cpu_rows_int8_offsets;
  if (offsets != nullptr) {
    offsets(p.n, p.n_rows, p.weight.data(), p.row_bytes, group_offsets.data(), block_offset_scales.data());
  }
  for (CpuIsa isa : strata::sdk::kAllCpuIsas) {
    if (isa > strata::sdk::detect_cpu_isa()) continue;
    std::vector<int8_t> levels(p.n * p.n_rows);
    std::vector<int16_t> group_scales(n_groups, -1);
    std::vector<float> block_scales(n_blocks, std::nanf(""));
    c.variants->pick(isa)(p.n, p.n_rows, p.weight.data(), p.row_bytes, levels.data(), group_scales.data(),
                          block_scales.data());
    for (int64_t i = 0; i < p.n * p.n_rows; ++i) {
      const int64_t group = i / STRATA_CPU_INT8_GROUP, block = i / STRATA_CPU_INT8_BLOCK;
      const int32_t integer = group_scales[group] * levels[i];
      const std::string where =
          c.name + " at " + std::string(strata::sdk::cpu_isa_name(isa)) + ", value " + std::to_string(i);
      if (offsets == nullptr) {
        ASSERT_EQ(block_scales[block] * static_cast<float>(integer), p.weight_values[i]) << where;
        continue;
      }
      const double scaled = static_cast<double>(block_scales[block]) * integer;
      const double offset = static_cast<double>(block_offset_scales[block]) * group_offsets[group];
      ASSERT_NEAR(scaled + offset, p.weight_values[i], 0x1p-23 * (std::fabs(scaled) + std::fabs(offset))) << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuRowsToInt8,
                         testing::Values(Int8Case{"IQ3_XXS", &quant_type_v<Iq3XxsCodec>, &strata::iq3::kIq3XxsToInt8},
                                         Int8Case{"IQ3_S", &quant_type_v<Iq3SCodec>, &strata::iq3::kIq3SToInt8},
                                         Int8Case{"IQ3_S_nibbles", &quant_type_v<Iq3SNibblesCodec>,
                                                  &strata::iq3::kIq3SNibblesToInt8},
                                         Int8Case{"Q4_K", &quant_type_v<Q4KCodec>, &strata::quant_k::kQ4KToInt8},
                                         Int8Case{"Q5_K", &quant_type_v<Q5KCodec>, &strata::quant_k::kQ5KToInt8}),
                         [](const testing::TestParamInfo<Int8Case>& info) { return info.param.name; });

// IQ3_S kept in its CPU layout (cpu_repacked, 4-bit levels) gives the file layout's products to the bit, for one
// token and for several (a backend may repack some weights and not others), at every level this CPU has.
TEST(CpuRepackedLayout, Iq3SAsNibblesGivesTheSameFloatsAsIq3S) {
  const strata_quant_type& iq3_s = quant_type_v<Iq3SCodec>;
  ASSERT_NE(iq3_s.cpu_repacked, nullptr);
  ASSERT_NE(iq3_s.cpu_repack, nullptr);
  const strata_quant_type& nibbles = *iq3_s.cpu_repacked;
  const Problem p = make_problem({"IQ3_S", &iq3_s, 15, nullptr}, 4, 9, 0, 90, 5);
  const int64_t blocks = p.n / iq3_s.block_elements * p.n_rows;
  std::vector<uint8_t> repacked(static_cast<size_t>(blocks) * nibbles.block_bytes);
  char message[256] = "";
  strata_error error{message, sizeof message};
  ASSERT_EQ(iq3_s.cpu_repack(p.weight.data(), repacked.data(), blocks, &error), STRATA_OK) << message;
  const size_t repacked_row = repacked.size() / p.n_rows;
  for (CpuIsa isa : strata::sdk::kAllCpuIsas) {
    if (isa > strata::sdk::detect_cpu_isa()) continue;
    const auto& file_kernel = strata::iq3::kIq3SDot.pick_kernel(isa);
    const auto& repacked_kernel = strata::iq3::kIq3SNibblesDot.pick_kernel(isa);
    std::vector<float> expected(p.n_rows), got(p.n_rows, std::nanf(""));
    file_kernel.rows(p.n, p.n_rows, p.weight.data(), p.row_bytes, p.activation.data(), expected.data());
    repacked_kernel.rows(p.n, p.n_rows, repacked.data(), repacked_row, p.activation.data(), got.data());
    EXPECT_EQ(got, expected) << "one token at " << strata::sdk::cpu_isa_name(isa);
    std::vector<float> expected_all(p.n_rows * p.n_tokens), got_all(p.n_rows * p.n_tokens, std::nanf(""));
    file_kernel.rows_multi(p.n, p.n_rows, p.weight.data(), p.row_bytes, p.activation.data(), p.activation_stride,
                           p.n_tokens, expected_all.data(), p.n_rows);
    repacked_kernel.rows_multi(p.n, p.n_rows, repacked.data(), repacked_row, p.activation.data(), p.activation_stride,
                               p.n_tokens, got_all.data(), p.n_rows);
    EXPECT_EQ(got_all, expected_all) << p.n_tokens << " tokens at " << strata::sdk::cpu_isa_name(isa);
  }
}

// The AVX-512 Q8_K quantizer writes the scalar one's bytes: random rows, rows whose products fall on halves (lround
// rounds them away from zero), the largest magnitude twice with both signs (the first one's sign wins), zeros,
// tiny values and a non-finite value.
TEST(Q8KQuantizer, Avx512WritesTheScalarBytes) {
  if (strata::sdk::detect_cpu_isa() < CpuIsa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  constexpr int64_t kBlocks = 8, n = 256 * kBlocks;
  std::mt19937 rng(81);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < 20; ++r) {
    std::vector<float> row(n);
    for (float& v : row) v = normal(rng);
    rows.push_back(row);
  }
  std::vector<float> halves(n);
  for (int64_t i = 0; i < n; ++i) halves[i] = static_cast<float>(i % 257 - 128) * 0.5f;  // max -64: q = 2 x
  for (int64_t b = 0; b < kBlocks; ++b) halves[b * 256 + 7] = -64.0f;
  rows.push_back(halves);
  std::vector<float> special(n, 0.0f);                  // block 0: all zero
  special[256 + 3] = 5.0f, special[256 + 200] = -5.0f;  // block 1: the largest twice, + first
  special[512 + 9] = -5.0f, special[512 + 10] = 5.0f;   // block 2: - first
  for (int i = 0; i < 256; ++i) special[768 + i] = 1e-38f * static_cast<float>(i - 100);  // block 3: tiny
  special[1024 + 17] = std::numeric_limits<float>::infinity();                            // block 4
  special[1280 + 30] = std::numeric_limits<float>::quiet_NaN();                           // block 5
  for (int i = 0; i < 256; ++i) special[1536 + i] = static_cast<float>(i % 3) - 1.0f;     // block 6: -1, 0, 1
  rows.push_back(special);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<uint8_t> scalar(strata::sdk::Q8K::kBytes * kBlocks, 0xAB);
    std::vector<uint8_t> avx512(scalar.size(), 0xCD);
    strata::cpu_kernels::quantize_q8_k_scalar(rows[r].data(), scalar.data(), n);
    strata::cpu_kernels::quantize_q8_k_avx512(rows[r].data(), avx512.data(), n);
    for (size_t i = 0; i < scalar.size(); ++i) {
      // A NaN scale is the same NaN either way; compare the other bytes as they are.
      ASSERT_EQ(scalar[i], avx512[i]) << "row " << r << ", block " << i / strata::sdk::Q8K::kBytes << ", byte "
                                      << i % strata::sdk::Q8K::kBytes;
    }
  }
}

TEST(CpuIsaChoice, AutoOrUnsetTakesTheBestLevel) {
  EXPECT_EQ(strata::sdk::choose_cpu_isa(nullptr, CpuIsa::avx512).isa, CpuIsa::avx512);
  EXPECT_EQ(strata::sdk::choose_cpu_isa("auto", CpuIsa::avx2).isa, CpuIsa::avx2);
  EXPECT_TRUE(strata::sdk::choose_cpu_isa("", CpuIsa::avx2).warning.empty());
}

TEST(CpuIsaChoice, LowerLevelsAreHonoured) {
  EXPECT_EQ(strata::sdk::choose_cpu_isa("scalar", CpuIsa::avx512).isa, CpuIsa::scalar);
  EXPECT_EQ(strata::sdk::choose_cpu_isa("avx2", CpuIsa::avx512).isa, CpuIsa::avx2);
  EXPECT_TRUE(strata::sdk::choose_cpu_isa("avx2", CpuIsa::avx512).warning.empty());
}

TEST(CpuIsaChoice, MissingOrUnknownLevelFallsBackWithWarning) {
  const auto missing = strata::sdk::choose_cpu_isa("avx512", CpuIsa::avx2);
  EXPECT_EQ(missing.isa, CpuIsa::avx2);
  EXPECT_NE(missing.warning.find("lacks"), std::string::npos) << missing.warning;
  const auto unknown = strata::sdk::choose_cpu_isa("sse9", CpuIsa::avx2);
  EXPECT_EQ(unknown.isa, CpuIsa::avx2);
  EXPECT_NE(unknown.warning.find("sse9"), std::string::npos) << unknown.warning;
}

TEST(CpuIsaChoice, VariantsFallToTheBestLevelBelow) {
  const auto scalar = +[](int64_t, int64_t, const void*, size_t, const void*, float*) {};
  const auto avx2 = +[](int64_t, int64_t, const void*, size_t, const void*, float*) {};
  const CpuDotVariants variants{{scalar}, {avx2}};
  EXPECT_EQ(variants.pick(CpuIsa::avx512), avx2);
  EXPECT_EQ(variants.pick(CpuIsa::avx2), avx2);
  EXPECT_EQ(variants.pick(CpuIsa::scalar), scalar);
}

}  // namespace
