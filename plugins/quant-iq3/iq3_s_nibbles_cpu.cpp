#include "iq3_s_nibbles_cpu.hpp"

#include <cmath>

#include "iq3_cpu_dot.hpp"
#include "iq3_quantizer.hpp"
#include "strata/half.hpp"

// A block (iq3_s_nibbles.hpp): f16 d, 2 bytes, the 8 scale nibbles l as a uint32, then 16 bytes per sub-block,
// byte j holding value j's k in its low nibble and value j + 16's in its high one; a value is d * (1 + 2l) * (2k + 1).
// With u = k + 8 = nibble ^ 8 (0..15, unsigned), 2k + 1 = 2u - 15, so a sub-block's dot with Q8_K bytes q is
// 2 * sum(u * q) - 15 * sum(q): unsigned-by-signed byte products (vpdpbusd) and Q8_K's sums of 16 q.
namespace strata::iq3 {
namespace {

using sdk::Q8K;

constexpr int kBlockBytes = 136, kScalesOffset = 4, kLevelsOffset = 8, kBytesPerSubBlock = kSubBlockValues / 2;

int32_t sub_block_scale(uint32_t scales, int ib) { return 1 + 2 * static_cast<int32_t>((scales >> (4 * ib)) & 0xf); }

int8_t level_of(const uint8_t* block, int ib, int i) {
  const int nibble = (block[kLevelsOffset + kBytesPerSubBlock * ib + i % 16] >> (4 * (i / 16))) & 0xf;
  return static_cast<int8_t>(2 * ((nibble ^ 8) - 8) + 1);
}

void write_scales(const uint8_t* block, int16_t* group_scales, float* block_scale) {
  const uint32_t scales = load_u32(block + kScalesOffset);
  for (int ib = 0; ib < kSubBlocks; ++ib) group_scales[ib] = static_cast<int16_t>(sub_block_scale(scales, ib));
  *block_scale = sdk::fp16_to_fp32(load_u16(block));
}

// As IQ3_S's scalar kernel, to the float: per token and block the integer sum of scale * level * q8, then the
// block's float product added.
void row_dot_tokens_scalar(int64_t n, const uint8_t* row, const uint8_t* activations, size_t stride, int n_tokens,
                           float* sums) {
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    int8_t levels[kBlockValues];
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      for (int i = 0; i < kSubBlockValues; ++i) levels[kSubBlockValues * ib + i] = level_of(block, ib, i);
    }
    const uint32_t scales = load_u32(block + kScalesOffset);
    const float d = sdk::fp16_to_fp32(load_u16(block));
    for (int t = 0; t < n_tokens; ++t) {
      const uint8_t* a = activations + t * stride + b * Q8K::kBytes;
      const int8_t* q8 = Q8K::values(a);
      int32_t scaled = 0;
      for (int ib = 0; ib < kSubBlocks; ++ib) {
        int32_t dot = 0;
        for (int i = 0; i < kSubBlockValues; ++i)
          dot += levels[kSubBlockValues * ib + i] * q8[kSubBlockValues * ib + i];
        scaled += sub_block_scale(scales, ib) * dot;
      }
      sums[t] += d * Q8K::scale(a) * static_cast<float>(scaled);
    }
  }
}

void rows_to_int8_scalar(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                         int16_t* group_scales, float* block_scales) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n / kBlockValues; ++b, levels += kBlockValues, group_scales += kSubBlocks, ++block_scales) {
      const uint8_t* block = row + b * kBlockBytes;
      for (int ib = 0; ib < kSubBlocks; ++ib) {
        for (int i = 0; i < kSubBlockValues; ++i) levels[kSubBlockValues * ib + i] = level_of(block, ib, i);
      }
      write_scales(block, group_scales, block_scales);
    }
  }
}

#if STRATA_X86

// Four sub-blocks' u = nibble ^ 8 (as bytes 0..15): low holds values 0..15 of each sub-block (one per 128-bit lane),
// high values 16..31.
struct Nibbles512 {
  __m512i low, high;
  STRATA_TARGET_AVX512 explicit Nibbles512(const uint8_t* bytes) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(bytes), _mm512_set1_epi8(static_cast<char>(0x88)));
    low = _mm512_and_si512(u, mask);
    high = _mm512_and_si512(_mm512_srli_epi16(u, 4), mask);
  }
};

// Each sub-block's scale in the low half of its four int32 lanes (and 0 in the high half), for vpmaddwd: a lane's
// sum of 8 products u * q is below 2^15 in magnitude, so it is its own low int16.
STRATA_TARGET_AVX512 __m512i lane_scales(uint32_t scales, int first_sub_block) {
  alignas(64) int32_t lanes[16];
  for (int lane = 0; lane < 16; ++lane) lanes[lane] = sub_block_scale(scales, first_sub_block + lane / 4);
  return _mm512_load_si512(lanes);
}

STRATA_TARGET_AVX512 void row_dot_tokens_avx512(int64_t n, const uint8_t* row, const uint8_t* activations,
                                                size_t stride, int n_tokens, float* sums) {
  // Q8_K values of four sub-blocks (128 bytes in two registers) split as the nibbles are: 16 bytes of each.
  const __m512i first_halves = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i second_halves = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    const Nibbles512 nibbles[2] = {Nibbles512(block + kLevelsOffset), Nibbles512(block + kLevelsOffset + 64)};
    const uint32_t scale_bits = load_u32(block + kScalesOffset);
    const __m512i scales[2] = {lane_scales(scale_bits, 0), lane_scales(scale_bits, 4)};
    // Each scale twice, to meet Q8_K's sums of 16.
    alignas(32) int16_t pair_scales[16];
    for (int i = 0; i < 16; ++i) pair_scales[i] = static_cast<int16_t>(sub_block_scale(scale_bits, i / 2));
    const __m256i scales16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(pair_scales));
    const float d = _cvtsh_ss(load_u16(block));
    for (int t = 0; t < n_tokens; ++t) {
      const uint8_t* a = activations + t * stride + b * Q8K::kBytes;
      const int8_t* q8 = Q8K::values(a);
      __m512i lanes = _mm512_setzero_si512();
      for (int half = 0; half < 2; ++half) {
        const __m512i q_first = _mm512_loadu_si512(q8 + 128 * half),
                      q_second = _mm512_loadu_si512(q8 + 128 * half + 64);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles[half].low,
                                          _mm512_permutex2var_epi64(q_first, first_halves, q_second));
        dot = _mm512_dpbusd_epi32(dot, nibbles[half].high, _mm512_permutex2var_epi64(q_first, second_halves, q_second));
        lanes = _mm512_add_epi32(lanes, _mm512_madd_epi16(dot, scales[half]));
      }
      // 2 * sum(scale * u * q) - 15 * sum(scale * q), the block's exact integer.
      const __m256i q_sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Q8K::kSumsOffset));
      const __m256i offset_share = _mm256_mullo_epi32(_mm256_madd_epi16(q_sums, scales16), _mm256_set1_epi32(15));
      lanes = _mm512_sub_epi32(_mm512_slli_epi32(lanes, 1), _mm512_zextsi256_si512(offset_share));
      sums[t] = std::fma(d * Q8K::scale(a), static_cast<float>(_mm512_reduce_add_epi32(lanes)), sums[t]);
    }
  }
}

// Levels 2u - 15 in value order: per sub-block its low nibbles' 16 bytes, then its high nibbles'.
STRATA_TARGET_AVX512 void rows_to_int8_avx512(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                              int8_t* levels, int16_t* group_scales, float* block_scales) {
  const __m512i first_pairs = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_pairs = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i fifteen = _mm512_set1_epi8(15);
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n / kBlockValues; ++b, levels += kBlockValues, group_scales += kSubBlocks, ++block_scales) {
      const uint8_t* block = row + b * kBlockBytes;
      for (int half = 0; half < 2; ++half) {
        const Nibbles512 u(block + kLevelsOffset + 64 * half);
        const __m512i low = _mm512_sub_epi8(_mm512_add_epi8(u.low, u.low), fifteen);
        const __m512i high = _mm512_sub_epi8(_mm512_add_epi8(u.high, u.high), fifteen);
        _mm512_storeu_si512(levels + 128 * half, _mm512_permutex2var_epi64(low, first_pairs, high));
        _mm512_storeu_si512(levels + 128 * half + 64, _mm512_permutex2var_epi64(low, second_pairs, high));
      }
      write_scales(block, group_scales, block_scales);
    }
  }
}

constexpr sdk::CpuDotKernel kAvx512 = sdk::kTokensDotKernel<row_dot_tokens_avx512>;
constexpr sdk::CpuRowsToInt8Fn kToInt8Avx512 = rows_to_int8_avx512;

#else

constexpr sdk::CpuDotKernel kAvx512 = {};
constexpr sdk::CpuRowsToInt8Fn kToInt8Avx512 = nullptr;

#endif

}  // namespace

// The AVX2 level's kernel is IQ3_S's AVX2 block code over nibbles (iq3_cpu_dot.cpp), for IQ3_S's lane sums.
const sdk::CpuDotVariants kIq3SNibblesDot{sdk::kTokensDotKernel<row_dot_tokens_scalar>, kIq3SNibblesAvx2, kAvx512};
const sdk::CpuRowsToInt8Variants kIq3SNibblesToInt8{rows_to_int8_scalar, kToInt8Avx512};

}  // namespace strata::iq3
