// See int8_gemm.hpp for the layouts. The loops over the register block are unrolled (GCC 12 otherwise keeps
// the accumulator arrays on the stack and loads and stores them around every vpdpbusd). Register blocking: 4
// weight rows x 2 token groups (32 tokens) per pass over a row; each vpdpbusd reads its row's 4 levels as a
// broadcast memory operand, each activation vector serves 4 rows. A 32-value group's integer dot is multiplied
// by its integer scale and summed over the 256-value block in integers, exactly; the block's sum is then scaled
// by one fused multiply-add per row and group of tokens, block after block: the float operations the type's dot
// kernels do (strata_quant_type::cpu_rows_to_int8), so a product is the same float whatever kernel, blocking or
// thread count computed it.
#include "int8_gemm.hpp"

#include <algorithm>
#include <cstring>

namespace strata::cpu::int8 {
namespace {

using sdk::Q8K;

constexpr int64_t kScaleGroup = STRATA_CPU_INT8_GROUP;
constexpr int64_t kScaleBlock = STRATA_CPU_INT8_BLOCK;
constexpr int64_t kGroupsPerBlock = kScaleBlock / kScaleGroup;
static_assert(kScaleBlock == sdk::Q8K::kValues, "a weight block's float scale meets one activation block's");
constexpr int64_t kStepValues = 4;  // bytes one int32 lane of vpdpbusd multiplies
constexpr int64_t kStepsPerGroup = kScaleGroup / kStepValues;
constexpr int64_t kStepBytes = kStepValues * kGroupTokens;  // one activation vector
constexpr int kOffset = 128;                                // q8 + kOffset is an unsigned byte
constexpr int kRows = 4, kGroups = 2;                       // the register block (an odd count's last pass: 3)

constexpr int64_t kSumPairValues = 2 * kScaleGroup;  // the values of one vector of int16 sum pairs

// A token group's interleaved activations: levels, then the Q8_K scales, then the sums of each 32 values.
size_t levels_bytes(int64_t n) { return static_cast<size_t>(n) * kGroupTokens; }
size_t scales_bytes(int64_t n) { return static_cast<size_t>(n / Q8K::kValues * kGroupTokens) * sizeof(float); }
size_t sums_bytes(int64_t n) { return static_cast<size_t>(n / kSumPairValues) * kStepBytes; }
size_t group_bytes(int64_t n) { return levels_bytes(n) + scales_bytes(n) + sums_bytes(n); }

// A tile's decoded rows in the worker's scratch: levels [rows][n]; per 32 values the integer scale and
// -kOffset * (sum of the levels), the start of each integer dot; per 256 values the float scale. With offsets, per
// 32 values the integer offset and per 256 its float scale (group_offsets null without).
struct DecodedRows {
  const int8_t* levels;
  const int16_t* group_scales;
  const int32_t* corrections;
  const float* block_scales;
  const int16_t* group_offsets;
  const float* block_offset_scales;
  int64_t n;
};

// The scratch's parts for n_rows rows of n values, in floats (each part starts at a whole float).
struct ScratchParts {
  int64_t levels, group_scales, corrections, block_scales, group_offsets, block_offset_scales;
  ScratchParts(int64_t n, int64_t n_rows)
      : levels(n_rows * n / static_cast<int64_t>(sizeof(float))),
        group_scales((n_rows * n / kScaleGroup + 1) / 2),
        corrections(n_rows * n / kScaleGroup),
        block_scales(n_rows * n / kScaleBlock),
        group_offsets(group_scales),
        block_offset_scales(block_scales) {}
  int64_t total() const {
    return levels + group_scales + corrections + block_scales + group_offsets + block_offset_scales;
  }
};

}  // namespace

size_t activation_bytes(int64_t n, int64_t n_tokens) {
  return static_cast<size_t>((n_tokens + kGroupTokens - 1) / kGroupTokens) * group_bytes(n);
}

size_t tile_scratch_floats(int64_t n, int64_t n_rows) { return static_cast<size_t>(ScratchParts(n, n_rows).total()); }

#if STRATA_X86

namespace {

template <int Rows, int Groups>
STRATA_TARGET_AVX512 void multiply_block(const DecodedRows& w, int64_t row0, const std::byte* interleaved,
                                         int64_t group0, int64_t n_tokens, float* out, size_t out_stride) {
  const int64_t n = w.n, n_scale_groups = n / kScaleGroup, n_blocks = n / kScaleBlock;
  const int8_t* levels[Rows];
  const int16_t* group_scales[Rows];
  const int32_t* corrections[Rows];
  const float* block_scales[Rows];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    levels[r] = w.levels + (row0 + r) * n;
    group_scales[r] = w.group_scales + (row0 + r) * n_scale_groups;
    corrections[r] = w.corrections + (row0 + r) * n_scale_groups;
    block_scales[r] = w.block_scales + (row0 + r) * n_blocks;
  }
  const uint8_t* x[Groups];
  const float* x_scales[Groups];
  const uint8_t* x_sums[Groups];
#pragma GCC unroll 8
  for (int g = 0; g < Groups; ++g) {
    x[g] = reinterpret_cast<const uint8_t*>(interleaved + (group0 + g) * group_bytes(n));
    x_scales[g] = reinterpret_cast<const float*>(x[g] + levels_bytes(n));
    x_sums[g] = x[g] + levels_bytes(n) + scales_bytes(n);
  }
  // The float sums stay in memory (touched once per 256 values), so the registers hold the integer sums of more
  // rows: each activation vector loaded then serves Rows rows.
  alignas(64) float acc[Rows][Groups][kGroupTokens] = {};
  for (int64_t block = 0; block < n_blocks; ++block) {
    __m512i block_sum[Rows][Groups];
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 8
      for (int g = 0; g < Groups; ++g) block_sum[r][g] = _mm512_setzero_si512();
    }
    for (int64_t b = block * kGroupsPerBlock; b < (block + 1) * kGroupsPerBlock; ++b) {
      __m512i dot[Rows][Groups];
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const __m512i start = _mm512_set1_epi32(corrections[r][b]);
#pragma GCC unroll 8
        for (int g = 0; g < Groups; ++g) dot[r][g] = start;
      }
#pragma GCC unroll 8
      for (int64_t s = 0; s < kStepsPerGroup; ++s) {
        const int64_t step = b * kStepsPerGroup + s;
        __m512i xv[Groups];
#pragma GCC unroll 8
        for (int g = 0; g < Groups; ++g) xv[g] = _mm512_load_si512(x[g] + step * kStepBytes);
#pragma GCC unroll 8
        for (int r = 0; r < Rows; ++r) {
          int32_t four;
          std::memcpy(&four, levels[r] + step * kStepValues, sizeof four);
          const __m512i wv = _mm512_set1_epi32(four);
#pragma GCC unroll 8
          for (int g = 0; g < Groups; ++g) dot[r][g] = _mm512_dpbusd_epi32(dot[r][g], xv[g], wv);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const __m512i scale = _mm512_set1_epi32(group_scales[r][b]);
#pragma GCC unroll 8
        for (int g = 0; g < Groups; ++g) {
          block_sum[r][g] = _mm512_add_epi32(block_sum[r][g], _mm512_mullo_epi32(dot[r][g], scale));
        }
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < Groups; ++g) {
      const __m512 x_scale = _mm512_load_ps(x_scales[g] + block * kGroupTokens);
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) {
        const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(block_scales[r][block]), x_scale);
        __m512 sum = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(block_sum[r][g]), _mm512_load_ps(acc[r][g]));
        if (w.group_offsets != nullptr) {
          // The block's offsets times its tokens' sums of 32 q8, two groups a vpmaddwd, exactly; then its scale.
          __m512i offsets = _mm512_setzero_si512();
          for (int64_t pair = 0; pair < kGroupsPerBlock / 2; ++pair) {
            int32_t two;
            std::memcpy(&two, w.group_offsets + (row0 + r) * n_scale_groups + block * kGroupsPerBlock + 2 * pair,
                        sizeof two);
            const __m512i sums = _mm512_load_si512(x_sums[g] + (block * kGroupsPerBlock / 2 + pair) * kStepBytes);
            offsets = _mm512_add_epi32(offsets, _mm512_madd_epi16(sums, _mm512_set1_epi32(two)));
          }
          const __m512 offset_scale =
              _mm512_mul_ps(_mm512_set1_ps(w.block_offset_scales[(row0 + r) * n_blocks + block]), x_scale);
          sum = _mm512_fmadd_ps(offset_scale, _mm512_cvtepi32_ps(offsets), sum);
        }
        _mm512_store_ps(acc[r][g], sum);
      }
    }
  }
  // Lane i is token 16 * group + i: a column of out. A token's Rows results are adjacent in out, so they are
  // stored token by token (a scatter of 16 lanes costs more than the 16 short stores).
#pragma GCC unroll 8
  for (int g = 0; g < Groups; ++g) {
    const int64_t token0 = (group0 + g) * kGroupTokens;
    const int64_t count = std::min(kGroupTokens, n_tokens - token0);
    for (int64_t i = 0; i < count; ++i) {
      float* row = out + static_cast<size_t>(token0 + i) * out_stride + row0;
#pragma GCC unroll 8
      for (int r = 0; r < Rows; ++r) row[r] = acc[r][g][i];
    }
  }
}

// multiply_block over the first n_rows rows (a multiple of kRows), token groups group0 .. group0 + Groups - 1.
template <int Groups>
void multiply_row_blocks(const DecodedRows& w, int64_t n_rows, const std::byte* interleaved, int64_t group0,
                         int64_t n_tokens, float* out, size_t out_stride) {
  for (int64_t r = 0; r < n_rows; r += kRows) {
    multiply_block<kRows, Groups>(w, r, interleaved, group0, n_tokens, out, out_stride);
  }
}

// Two groups' levels + 128 summed in 8 dwords: the first group's four partial sums, then the second's.
STRATA_TARGET_AVX512 inline __m256i biased_sums_of_two_groups(const int8_t* two) {
  const __m512i biased = _mm512_xor_si512(_mm512_loadu_si512(two), _mm512_set1_epi8(static_cast<char>(0x80)));
  return _mm512_cvtepi64_epi32(_mm512_sad_epu8(biased, _mm512_setzero_si512()));
}

// -kOffset * the sum of each 32 levels: a sum of bytes of levels + 128 (vpsadbw) less 32 * 128. Eight groups a
// pass: vpsadbw leaves four partial sums a group, which two horizontal adds and a permute bring to one lane each.
STRATA_TARGET_AVX512 void write_corrections(const int8_t* levels, int64_t n_scale_groups, int32_t* corrections) {
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i bias = _mm256_set1_epi32(kOffset * kScaleGroup);
  static_assert(kRowMultiple % (8 * kScaleGroup) == 0, "rows are whole passes of eight groups");
  for (int64_t b = 0; b < n_scale_groups; b += 8) {
    const int8_t* eight = levels + b * kScaleGroup;
    // Per 128-bit half, groups (0, 2, 4, 6) then (1, 3, 5, 7): each hadd halves the partial sums.
    const __m256i low =
        _mm256_hadd_epi32(biased_sums_of_two_groups(eight), biased_sums_of_two_groups(eight + 2 * kScaleGroup));
    const __m256i high = _mm256_hadd_epi32(biased_sums_of_two_groups(eight + 4 * kScaleGroup),
                                           biased_sums_of_two_groups(eight + 6 * kScaleGroup));
    const __m256i biased = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(low, high), in_order);
    const __m256i unbiased = _mm256_sub_epi32(biased, bias);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(corrections + b),
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(unbiased, 7)));
  }
}

STRATA_TARGET_AVX512 void interleave_group_avx512(int64_t n, const std::byte* q8k_rows, size_t stride,
                                                  const int32_t* rows, int64_t n_tokens, int64_t group,
                                                  std::byte* interleaved) {
  auto* levels = reinterpret_cast<uint8_t*>(interleaved + group * group_bytes(n));
  auto* scales = reinterpret_cast<float*>(levels + levels_bytes(n));
  uint8_t* sums = levels + levels_bytes(n) + scales_bytes(n);
  const int64_t token0 = group * kGroupTokens;
  const int64_t count = std::min(kGroupTokens, n_tokens - token0);
  const auto present = static_cast<__mmask16>((1u << count) - 1);
  // Each lane's row from first: lane (first at the group's first row), or rows[token0 + lane] (first at row 0; the
  // caller keeps those offsets within int32). Lanes past the tokens read nothing.
  const __m512i row_numbers = rows != nullptr ? _mm512_maskz_loadu_epi32(present, rows + token0)
                                              : _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i row_offsets = _mm512_mullo_epi32(row_numbers, _mm512_set1_epi32(static_cast<int32_t>(stride)));
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const std::byte* first = rows != nullptr ? q8k_rows : q8k_rows + static_cast<size_t>(token0) * stride;
  constexpr int64_t kStepsPerBlock = Q8K::kValues / kStepValues;
  for (int64_t kb = 0; kb < n / Q8K::kValues; ++kb) {
    const std::byte* block = first + kb * Q8K::kBytes;
    for (int64_t s = 0; s < kStepsPerBlock; ++s) {
      const __m512i q = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, row_offsets,
                                                    block + Q8K::kValuesOffset + kStepValues * s, 1);
      _mm512_store_si512(levels + (kb * kStepsPerBlock + s) * kStepBytes, _mm512_xor_si512(q, flip));
    }
    _mm512_store_ps(scales + kb * kGroupTokens,
                    _mm512_mask_i32gather_ps(_mm512_setzero_ps(), present, row_offsets, block, 1));
    // Each 32 values' sum of q8 from Q8_K's two sums of 16 (an int32 lane holds both: vpmaddwd by ones adds them),
    // two groups' sums as an int16 pair per token.
    const __m512i ones = _mm512_set1_epi16(1), low_half = _mm512_set1_epi32(0xffff);
    for (int64_t pair = 0; pair < Q8K::kValues / kSumPairValues; ++pair) {
      const std::byte* sixteens = block + Q8K::kSumsOffset + pair * 4 * sizeof(int16_t);
      const __m512i first = _mm512_madd_epi16(
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, row_offsets, sixteens, 1), ones);
      const __m512i second = _mm512_madd_epi16(
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, row_offsets, sixteens + 2 * sizeof(int16_t), 1),
          ones);
      _mm512_store_si512(sums + (kb * Q8K::kValues / kSumPairValues + pair) * kStepBytes,
                         _mm512_or_si512(_mm512_and_si512(first, low_half), _mm512_slli_epi32(second, 16)));
    }
  }
}

}  // namespace

bool available(CpuIsa isa) { return isa >= CpuIsa::avx512; }

void interleave_group(int64_t n, const std::byte* q8k_rows, size_t stride, const int32_t* rows, int64_t n_tokens,
                      int64_t group, std::byte* interleaved) {
  interleave_group_avx512(n, q8k_rows, stride, rows, n_tokens, group, interleaved);
}

void multiply_tile(const RowDecoders& decoders, int64_t n, int64_t n_rows, const std::byte* rows, size_t row_bytes,
                   const std::byte* interleaved, int64_t n_tokens, float* out, size_t out_stride, float* scratch) {
  const ScratchParts parts(n, n_rows);
  auto* levels = reinterpret_cast<int8_t*>(scratch);
  auto* group_scales = reinterpret_cast<int16_t*>(scratch + parts.levels);
  auto* corrections = reinterpret_cast<int32_t*>(scratch + parts.levels + parts.group_scales);
  float* block_scales = scratch + parts.levels + parts.group_scales + parts.corrections;
  auto* group_offsets = reinterpret_cast<int16_t*>(block_scales + parts.block_scales);
  float* block_offset_scales = block_scales + parts.block_scales + parts.group_offsets;
  decoders.to_int8(n, n_rows, rows, row_bytes, levels, group_scales, block_scales);
  write_corrections(levels, n_rows * (n / kScaleGroup), corrections);
  const bool has_offsets = decoders.offsets != nullptr;
  if (has_offsets) decoders.offsets(n, n_rows, rows, row_bytes, group_offsets, block_offset_scales);
  const DecodedRows w{levels,
                      group_scales,
                      corrections,
                      block_scales,
                      has_offsets ? group_offsets : nullptr,
                      has_offsets ? block_offset_scales : nullptr,
                      n};
  const int64_t n_groups = (n_tokens + kGroupTokens - 1) / kGroupTokens;
  // Token groups outer: a pass's activations stay in L1 for every row block of the tile. An odd count ends with
  // three groups in one pass rather than one alone (a pass of one group loads more than it multiplies).
  const int64_t whole_rows = n_rows / kRows * kRows;
  const int64_t paired = n_groups % 2 == 1 && n_groups >= 3 ? n_groups - 3 : n_groups / 2 * 2;
  for (int64_t g = 0; g < paired; g += 2) {
    multiply_row_blocks<kGroups>(w, whole_rows, interleaved, g, n_tokens, out, out_stride);
  }
  if (n_groups - paired == 3) multiply_row_blocks<3>(w, whole_rows, interleaved, paired, n_tokens, out, out_stride);
  if (n_groups - paired == 1) multiply_row_blocks<1>(w, whole_rows, interleaved, paired, n_tokens, out, out_stride);
  for (int64_t r = whole_rows; r < n_rows; ++r) {
    for (int64_t group = 0; group < n_groups; ++group) {
      multiply_block<1, 1>(w, r, interleaved, group, n_tokens, out, out_stride);
    }
  }
}

#else

bool available(CpuIsa) { return false; }

// Never called where available() is false.
void interleave_group(int64_t, const std::byte*, size_t, const int32_t*, int64_t, int64_t, std::byte*) {}
void multiply_tile(const RowDecoders&, int64_t, int64_t, const std::byte*, size_t, const std::byte*, int64_t, float*,
                   size_t, float*) {}

#endif

}  // namespace strata::cpu::int8
