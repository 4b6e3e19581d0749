#include "iq3_cpu_dot.hpp"

#include <cmath>

#include "iq3_quantizer.hpp"
#include "iq3_s_nibbles.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

// Both formats make a 32-value sub-block from eight 4-byte grid points, 32 sign bits and an odd integer
// scale, so its dot with Q8_K is integer: scale * sum(magnitude * sign * q8); one float multiply per block.
namespace strata::iq3 {
namespace {

using sdk::Q8K;

// IQ3_XXS: d * (2l + 1) / 4 * grid byte, see iq3_xxs.hpp.
struct Xxs {
  static constexpr int kBlockBytes = 98, kIndicesOffset = 2, kSignsAndScalesOffset = 66;
  static constexpr float kScaleFactor = 0.25f;
  // A power of two above the largest grid byte (62): magnitude * sign + kOffset is an unsigned byte.
  static constexpr int kOffsetShift = 6;
  static constexpr const uint32_t* kGrid = kIq3XxsGrid;
  static uint32_t grid_index(const uint8_t* block, int ib, int g) {
    return block[kIndicesOffset + kGroupsPerSubBlock * ib + g];
  }
  static uint32_t sign_bits(const uint8_t* block, int ib) {
    const uint32_t packed = load_u32(block + kSignsAndScalesOffset + 4 * ib);
    uint32_t bits = 0;
    for (int group = 0; group < kSubBlockValues / kSignGroupValues; ++group) {
      bits |= static_cast<uint32_t>(kSignsIq2xs[(packed >> (7 * group)) & 127]) << (8 * group);
    }
    return bits;
  }
  static int32_t scale(const uint8_t* block, int ib) {
    return 2 * static_cast<int32_t>(load_u32(block + kSignsAndScalesOffset + 4 * ib) >> 28) + 1;
  }
#if STRATA_X86
  STRATA_TARGET_AVX2 static __m256i grid_indices_avx2(const uint8_t* block, int ib) {
    return _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kIndicesOffset + kGroupsPerSubBlock * ib)));
  }
  // Sub-blocks 2 * pair and 2 * pair + 1.
  STRATA_TARGET_AVX512 static __m512i grid_indices_avx512(const uint8_t* block, int pair) {
    return _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kIndicesOffset + 2 * kGroupsPerSubBlock * pair)));
  }
  // The eight scales as int16.
  STRATA_TARGET_AVX2 static __m128i scales_avx2(const uint8_t* block) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kSignsAndScalesOffset));
    const __m256i nibbles = _mm256_srli_epi32(packed, 28);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(nibbles), _mm256_extracti128_si256(nibbles, 1));
    return _mm_add_epi16(_mm_add_epi16(words, words), _mm_set1_epi16(1));
  }
#endif
};

#if STRATA_X86
// 2l + 1 for the eight scale nibbles l of a little-endian uint32 (nibble ib for sub-block ib), as int16 lanes.
STRATA_TARGET_AVX2 inline __m128i odd_scales_avx2(const uint8_t* packed) {
  const __m128i bytes = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(static_cast<int32_t>(load_u32(packed))));
  const __m128i nibbles = _mm_unpacklo_epi16(_mm_and_si128(bytes, _mm_set1_epi16(15)), _mm_srli_epi16(bytes, 4));
  return _mm_add_epi16(_mm_add_epi16(nibbles, nibbles), _mm_set1_epi16(1));
}
#endif

// IQ3_S: d * (2l + 1) * grid byte, see iq3_s.hpp.
struct S {
  static constexpr int kBlockBytes = 110, kQsOffset = 2, kQhOffset = 66, kSignsOffset = 74, kScalesOffset = 106;
  static constexpr float kScaleFactor = 1.0f;
  static constexpr int kOffsetShift = 4;  // grid bytes are at most 15
  static constexpr const uint32_t* kGrid = kIq3SGrid;
  static uint32_t grid_index(const uint8_t* block, int ib, int g) {
    return block[kQsOffset + kGroupsPerSubBlock * ib + g] | (((block[kQhOffset + ib] >> g) & 1u) << 8);
  }
  static uint32_t sign_bits(const uint8_t* block, int ib) { return load_u32(block + kSignsOffset + 4 * ib); }
  static int32_t scale(const uint8_t* block, int ib) {
    return 2 * ((block[kScalesOffset + ib / 2] >> (4 * (ib % 2))) & 15) + 1;
  }
#if STRATA_X86
  STRATA_TARGET_AVX2 static __m256i grid_indices_avx2(const uint8_t* block, int ib) {
    const __m256i low = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kQsOffset + kGroupsPerSubBlock * ib)));
    // Bit g of the high-bit byte moved to bit 8 of lane g.
    const __m256i high =
        _mm256_sllv_epi32(_mm256_set1_epi32(block[kQhOffset + ib]), _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1));
    return _mm256_or_si256(low, _mm256_and_si256(high, _mm256_set1_epi32(256)));
  }
  STRATA_TARGET_AVX512 static __m512i grid_indices_avx512(const uint8_t* block, int pair) {
    const __m512i low = _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQsOffset + 2 * kGroupsPerSubBlock * pair)));
    // The two high-bit bytes are one bit per lane.
    const __mmask16 high = static_cast<__mmask16>(load_u16(block + kQhOffset + 2 * pair));
    return _mm512_mask_or_epi32(low, high, low, _mm512_set1_epi32(256));
  }
  STRATA_TARGET_AVX2 static __m128i scales_avx2(const uint8_t* block) { return odd_scales_avx2(block + kScalesOffset); }
#endif
};

// IQ3_S as 4-bit levels (iq3_s_nibbles.hpp): the AVX2 block of S from nibbles instead of gathered grid points, so
// that a block's lanes hold S's integers exactly (the level plus S's offset 16 is 2u + 1, with u = nibble ^ 8).
struct SNibbles {
  using Codec = Iq3SNibblesCodec;
  static constexpr int kBlockBytes = Codec::block_bytes, kScalesOffset = Codec::scales_offset;
  static constexpr int kLevelsOffset = Codec::levels_offset;
  static constexpr float kScaleFactor = S::kScaleFactor;
  static constexpr int kOffsetShift = S::kOffsetShift;
  static int32_t scale(const uint8_t* block, int ib) { return 2 * Codec::scale_nibble(block, ib) + 1; }
  static int8_t level(const uint8_t* block, int ib, int i) { return static_cast<int8_t>(Codec::level(block, ib, i)); }
#if STRATA_X86
  STRATA_TARGET_AVX2 static __m256i weights_avx2(const uint8_t* block, int ib) {
    const __m128i u = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                        block + kLevelsOffset + Codec::level_bytes_per_sub_block * ib)),
                                    _mm_set1_epi8(static_cast<char>(0x88)));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m256i values = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(u, 4), mask), _mm_and_si128(u, mask));
    return _mm256_add_epi8(_mm256_add_epi8(values, values), _mm256_set1_epi8(1));
  }
  STRATA_TARGET_AVX2 static __m128i scales_avx2(const uint8_t* block) { return odd_scales_avx2(block + kScalesOffset); }
#endif
};

// A block's values as signed levels (the grid bytes with their signs, or SNibbles' 2k + 1): times the sub-block's scale
// and the block's float scale, the dequantizer's floats.
template <class Format>
void decode_levels(const uint8_t* block, int8_t* levels) {
  if constexpr (requires { Format::level(block, 0, 0); }) {
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      for (int i = 0; i < kSubBlockValues; ++i) levels[kSubBlockValues * ib + i] = Format::level(block, ib, i);
    }
  } else {
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      const uint32_t sign_bits = Format::sign_bits(block, ib);
      for (int g = 0; g < kGroupsPerSubBlock; ++g) {
        const uint32_t point = Format::kGrid[Format::grid_index(block, ib, g)];
        for (int j = 0; j < kGroupValues; ++j) {
          const int i = kGroupValues * g + j, magnitude = static_cast<int>((point >> (8 * j)) & 0xff);
          levels[kSubBlockValues * ib + i] = static_cast<int8_t>((sign_bits >> i) & 1 ? -magnitude : magnitude);
        }
      }
    }
  }
}

// The scalar kernel: sums[t] = dot(row, token t's activation row), each block decoded once for all tokens.
template <class Format>
void iq3_row_dot_tokens_scalar(int64_t n, const uint8_t* row, const uint8_t* activations, size_t stride, int n_tokens,
                               float* sums) {
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * Format::kBlockBytes;
    int8_t weights[kBlockValues];
    decode_levels<Format>(block, weights);
    int32_t scales[kSubBlocks];
    for (int ib = 0; ib < kSubBlocks; ++ib) scales[ib] = Format::scale(block, ib);
    const float d = Format::kScaleFactor * sdk::fp16_to_fp32(load_u16(block));
    for (int t = 0; t < n_tokens; ++t) {
      const uint8_t* a = activations + t * stride + b * Q8K::kBytes;
      const int8_t* q8 = Q8K::values(a);
      int32_t scaled = 0;
      for (int ib = 0; ib < kSubBlocks; ++ib) {
        int32_t dot = 0;
        for (int i = 0; i < kSubBlockValues; ++i)
          dot += weights[kSubBlockValues * ib + i] * q8[kSubBlockValues * ib + i];
        scaled += scales[ib] * dot;
      }
      sums[t] += d * Q8K::scale(a) * static_cast<float>(scaled);
    }
  }
}

// Rows as int8 levels, integer scales per 32 and float scales per 256 (strata_quant_type::cpu_rows_to_int8): a
// sub-block of both formats is 32 values sharing the odd scale 2l + 1, the block one float d * kScaleFactor; the
// products are the dequantizer's floats exactly (d is a half, the integer product at most 31 * 62). The scales as
// the dot kernels apply them:
template <class Format>
void write_scales(const uint8_t* block, int16_t* group_scales, float* block_scale) {
  for (int ib = 0; ib < kSubBlocks; ++ib) group_scales[ib] = static_cast<int16_t>(Format::scale(block, ib));
  *block_scale = Format::kScaleFactor * sdk::fp16_to_fp32(load_u16(block));
}

template <class Format>
void iq3_rows_to_int8_scalar(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                             int16_t* group_scales, float* block_scales) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n / kBlockValues; ++b, levels += kBlockValues, group_scales += kSubBlocks, ++block_scales) {
      const uint8_t* block = row + b * Format::kBlockBytes;
      decode_levels<Format>(block, levels);
      write_scales<Format>(block, group_scales, block_scales);
    }
  }
}

#if STRATA_X86

// The SIMD kernels multiply unsigned bytes (weight + offset) by the signed Q8_K bytes, which needs no
// negation of q8 (-128 has no int8 negative); the offset's share, offset * sum(scale * q8), comes from the
// per-16 sums Q8_K carries. Grid points are gathered straight into registers.

// 0xff in byte i where bit i of sign_bits is set.
STRATA_TARGET_AVX2 inline __m256i sign_byte_mask(uint32_t sign_bits) {
  const __m256i byte_of_bit = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                               2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit_in_byte = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(sign_bits)), byte_of_bit);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_in_byte), bit_in_byte);
}

// The parts of a decoded block every token needs.
struct BlockCommon {
  __m256i scales16;  // each sub-block's scale twice, to pair with Q8_K's sums of 16 values
  float d;
};

template <class Format>
STRATA_TARGET_AVX2 inline BlockCommon block_common(const uint8_t* block, __m128i scales) {
  return {_mm256_set_m128i(_mm_unpackhi_epi16(scales, scales), _mm_unpacklo_epi16(scales, scales)),
          Format::kScaleFactor * _cvtsh_ss(load_u16(block))};
}

// -offset * sum over sub-blocks of scale * (sum of its q8), in 8 int32 lanes: the start of a token's sum.
template <int OffsetShift>
STRATA_TARGET_AVX2 inline __m256i minus_offset_share(const uint8_t* activation, __m256i scales16) {
  const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(activation + Q8K::kSumsOffset));
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sums, scales16), OffsetShift));
}

template <class Format>
struct BlockAvx2 {
  __m256i weights[kSubBlocks];  // value + offset, unsigned
  __m256i scales[kSubBlocks];   // the sub-block's scale in every int16 lane
  BlockCommon common;

  STRATA_TARGET_AVX2 explicit BlockAvx2(const uint8_t* block) {
    const __m256i offset = _mm256_set1_epi8(1 << Format::kOffsetShift);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      if constexpr (requires { Format::weights_avx2(block, ib); }) {
        weights[ib] = Format::weights_avx2(block, ib);
      } else {
        const __m256i magnitudes = _mm256_i32gather_epi32(reinterpret_cast<const int*>(Format::kGrid),
                                                          Format::grid_indices_avx2(block, ib), 4);
        const __m256i negative = sign_byte_mask(Format::sign_bits(block, ib));
        weights[ib] = _mm256_add_epi8(_mm256_sub_epi8(_mm256_xor_si256(magnitudes, negative), negative), offset);
      }
    }
    const __m128i scale_words = Format::scales_avx2(block);
    alignas(16) int16_t s[kSubBlocks];
    _mm_store_si128(reinterpret_cast<__m128i*>(s), scale_words);
    for (int ib = 0; ib < kSubBlocks; ++ib) scales[ib] = _mm256_set1_epi16(s[ib]);
    common = block_common<Format>(block, scale_words);
  }

  STRATA_TARGET_AVX2 __m256 accumulate(const uint8_t* a, __m256 acc) const {
    const int8_t* q8 = Q8K::values(a);
    __m256i sum = minus_offset_share<Format::kOffsetShift>(a, common.scales16);
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + kSubBlockValues * ib));
      sum = _mm256_add_epi32(sum, sdk::scaled_dot_u8_s8(weights[ib], q, scales[ib]));
    }
    return _mm256_fmadd_ps(_mm256_set1_ps(common.d * Q8K::scale(a)), _mm256_cvtepi32_ps(sum), acc);
  }
};

// As BlockAvx2, two sub-blocks per register and the signs applied under a mask.
template <class Format>
struct BlockAvx512 {
  static constexpr int kPairs = kSubBlocks / 2;
  __m512i weights[kPairs];
  __m512i scales[kPairs];  // sub-block 2p's scale in the low 16 int16 lanes, 2p + 1's in the high 16
  BlockCommon common;

  STRATA_TARGET_AVX512 explicit BlockAvx512(const uint8_t* block) {
    const __m512i offset = _mm512_set1_epi8(1 << Format::kOffsetShift);
    const __m128i scale_words = Format::scales_avx2(block);
    const __m512i high_half = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
    for (int p = 0; p < kPairs; ++p) {
      const __m512i magnitudes = _mm512_i32gather_epi32(Format::grid_indices_avx512(block, p), Format::kGrid, 4);
      const __mmask64 negative =
          Format::sign_bits(block, 2 * p) | static_cast<uint64_t>(Format::sign_bits(block, 2 * p + 1)) << 32;
      weights[p] = _mm512_mask_sub_epi8(_mm512_add_epi8(magnitudes, offset), negative, offset, magnitudes);
      const __m512i which = _mm512_add_epi16(high_half, _mm512_set1_epi16(static_cast<int16_t>(2 * p)));
      scales[p] = _mm512_permutexvar_epi16(which, _mm512_castsi128_si512(scale_words));
    }
    common = block_common<Format>(block, scale_words);
  }

  // sum + the block's product with a token, as cpu_rows_to_int8 promises a backend's int8 kernel may compute it
  // too: the block's exact integer, then one fused multiply-add.
  STRATA_TARGET_AVX512 float accumulate(const uint8_t* a, float sum) const {
    const int8_t* q8 = Q8K::values(a);
    __m512i lanes = _mm512_zextsi256_si512(minus_offset_share<Format::kOffsetShift>(a, common.scales16));
    for (int p = 0; p < kPairs; ++p) {
      const __m512i q = _mm512_loadu_si512(q8 + 2 * kSubBlockValues * p);
      lanes = _mm512_add_epi32(lanes, _mm512_madd_epi16(_mm512_maddubs_epi16(weights[p], q), scales[p]));
    }
    return std::fma(common.d * Q8K::scale(a), static_cast<float>(_mm512_reduce_add_epi32(lanes)), sum);
  }
};

// The SIMD row kernels: each block decoded once, then met by every token.
template <class Format>
STRATA_TARGET_AVX2 void iq3_row_dot_tokens_avx2(int64_t n, const uint8_t* row, const uint8_t* activations,
                                                size_t stride, int n_tokens, float* sums) {
  __m256 acc[sdk::kDotTokens];
  for (int t = 0; t < n_tokens; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    sdk::prefetch_ahead<Format::kBlockBytes>(row + b * Format::kBlockBytes);
    const BlockAvx2<Format> block(row + b * Format::kBlockBytes);
    for (int t = 0; t < n_tokens; ++t) acc[t] = block.accumulate(activations + t * stride + b * Q8K::kBytes, acc[t]);
  }
  for (int t = 0; t < n_tokens; ++t) sums[t] = sdk::hsum_f32(acc[t]);
}

template <class Format>
STRATA_TARGET_AVX512 void iq3_row_dot_tokens_avx512(int64_t n, const uint8_t* row, const uint8_t* activations,
                                                    size_t stride, int n_tokens, float* sums) {
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    sdk::prefetch_ahead<Format::kBlockBytes>(row + b * Format::kBlockBytes);
    const BlockAvx512<Format> block(row + b * Format::kBlockBytes);
    for (int t = 0; t < n_tokens; ++t) sums[t] = block.accumulate(activations + t * stride + b * Q8K::kBytes, sums[t]);
  }
}

// As iq3_rows_to_int8_scalar, two sub-blocks per gather and the signs applied under a mask.
template <class Format>
STRATA_TARGET_AVX512 void iq3_rows_to_int8_avx512(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                                  int8_t* levels, int16_t* group_scales, float* block_scales) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n / kBlockValues; ++b, levels += kBlockValues, group_scales += kSubBlocks, ++block_scales) {
      const uint8_t* block = row + b * Format::kBlockBytes;
      for (int p = 0; p < kSubBlocks / 2; ++p) {
        const __m512i magnitudes = _mm512_i32gather_epi32(Format::grid_indices_avx512(block, p), Format::kGrid, 4);
        const __mmask64 negative =
            Format::sign_bits(block, 2 * p) | static_cast<uint64_t>(Format::sign_bits(block, 2 * p + 1)) << 32;
        _mm512_storeu_si512(levels + 2 * kSubBlockValues * p,
                            _mm512_mask_sub_epi8(magnitudes, negative, _mm512_setzero_si512(), magnitudes));
      }
      write_scales<Format>(block, group_scales, block_scales);
    }
  }
}

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

// SNibbles' dot kernel at the avx512 level: a value is d (1 + 2l)(2u - 15) with u = nibble ^ 8, so a sub-block's
// dot with Q8_K bytes q is 2 sum(u q) - 15 sum(q): vpdpbusd on the nibbles and Q8_K's sums of 16, the block's exact
// integer (IQ3_S's) and IQ3_S's fused multiply-add.
// A block's eight odd scales 1 + 2l as they meet the products: for vpmaddwd, each sub-block's scale in the low half
// of its four int32 lanes (a lane's sum of 8 products u * q is below 2^15 in magnitude, so it is its own low int16;
// the high half 0), sub-blocks 0-3 in by_lane[0] and 4-7 in by_lane[1]; and each scale twice as int16, to meet
// Q8_K's sums of 16. Built in registers: the scalar form stored 48 scales a block and cost more than its products.
struct NibbleScales512 {
  __m512i by_lane[2];
  __m256i by_sum16;
  STRATA_TARGET_AVX512 explicit NibbleScales512(const uint8_t* block) {
    const __m128i scales = SNibbles::scales_avx2(block);  // 8 x int16, sub-block order
    const __m512i as_int32 = _mm512_zextsi256_si512(_mm256_cvtepu16_epi32(scales));
    by_lane[0] = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), as_int32);
    by_lane[1] = _mm512_permutexvar_epi32(_mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7), as_int32);
    by_sum16 = _mm256_set_m128i(_mm_unpackhi_epi16(scales, scales), _mm_unpacklo_epi16(scales, scales));
  }
};

STRATA_TARGET_AVX512 void nibbles_row_dot_tokens_avx512(int64_t n, const uint8_t* row, const uint8_t* activations,
                                                        size_t stride, int n_tokens, float* sums) {
  // Q8_K values of four sub-blocks (128 bytes in two registers) split as the nibbles are: 16 bytes of each.
  const __m512i first_halves = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i second_halves = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * SNibbles::kBlockBytes;
    sdk::prefetch_ahead<SNibbles::kBlockBytes>(block);
    const Nibbles512 nibbles[2] = {Nibbles512(block + SNibbles::kLevelsOffset),
                                   Nibbles512(block + SNibbles::kLevelsOffset + 64)};
    const NibbleScales512 scales(block);
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
        lanes = _mm512_add_epi32(lanes, _mm512_madd_epi16(dot, scales.by_lane[half]));
      }
      // 2 * sum(scale * u * q) - 15 * sum(scale * q), the block's exact integer.
      const __m256i q_sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Q8K::kSumsOffset));
      const __m256i scaled_sums = _mm256_madd_epi16(q_sums, scales.by_sum16);
      const __m256i offset_share = _mm256_sub_epi32(_mm256_slli_epi32(scaled_sums, 4), scaled_sums);  // times 15
      lanes = _mm512_sub_epi32(_mm512_slli_epi32(lanes, 1), _mm512_zextsi256_si512(offset_share));
      sums[t] = std::fma(d * Q8K::scale(a), static_cast<float>(_mm512_reduce_add_epi32(lanes)), sums[t]);
    }
  }
}

// IQ3_S as 4-bit levels (SNibbles) as int8: levels 2u - 15 in value order: per sub-block its low nibbles' 16 bytes,
// then its high nibbles'.
STRATA_TARGET_AVX512 void nibbles_rows_to_int8_avx512(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                                      int8_t* levels, int16_t* group_scales, float* block_scales) {
  const __m512i first_pairs = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_pairs = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  const __m512i fifteen = _mm512_set1_epi8(15);
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n / kBlockValues; ++b, levels += kBlockValues, group_scales += kSubBlocks, ++block_scales) {
      const uint8_t* block = row + b * SNibbles::kBlockBytes;
      for (int half = 0; half < 2; ++half) {
        const Nibbles512 u(block + SNibbles::kLevelsOffset + 64 * half);
        const __m512i low = _mm512_sub_epi8(_mm512_add_epi8(u.low, u.low), fifteen);
        const __m512i high = _mm512_sub_epi8(_mm512_add_epi8(u.high, u.high), fifteen);
        _mm512_storeu_si512(levels + 128 * half, _mm512_permutex2var_epi64(low, first_pairs, high));
        _mm512_storeu_si512(levels + 128 * half + 64, _mm512_permutex2var_epi64(low, second_pairs, high));
      }
      write_scales<SNibbles>(block, group_scales, block_scales);
    }
  }
}

template <class Format>
constexpr sdk::CpuDotKernel kAvx2 = sdk::kTokensDotKernel<iq3_row_dot_tokens_avx2<Format>>;
template <class Format>
constexpr sdk::CpuDotKernel kAvx512 = sdk::kTokensDotKernel<iq3_row_dot_tokens_avx512<Format>>;
template <class Format>
constexpr sdk::CpuRowsToInt8Fn kToInt8Avx512 = iq3_rows_to_int8_avx512<Format>;
constexpr sdk::CpuDotKernel kNibblesAvx512 = sdk::kTokensDotKernel<nibbles_row_dot_tokens_avx512>;
constexpr sdk::CpuRowsToInt8Fn kNibblesToInt8Avx512 = nibbles_rows_to_int8_avx512;

#else

template <class Format>
constexpr sdk::CpuDotKernel kAvx2 = {};
template <class Format>
constexpr sdk::CpuDotKernel kAvx512 = {};
template <class Format>
constexpr sdk::CpuRowsToInt8Fn kToInt8Avx512 = nullptr;
constexpr sdk::CpuDotKernel kNibblesAvx512 = {};
constexpr sdk::CpuRowsToInt8Fn kNibblesToInt8Avx512 = nullptr;

#endif

template <class Format>
constexpr sdk::CpuDotKernel kScalar = sdk::kTokensDotKernel<iq3_row_dot_tokens_scalar<Format>>;

}  // namespace

const sdk::CpuDotVariants kIq3XxsDot{kScalar<Xxs>, kAvx2<Xxs>, kAvx512<Xxs>};
const sdk::CpuDotVariants kIq3SDot{kScalar<S>, kAvx2<S>, kAvx512<S>};
const sdk::CpuRowsToInt8Variants kIq3XxsToInt8{iq3_rows_to_int8_scalar<Xxs>, kToInt8Avx512<Xxs>};
const sdk::CpuRowsToInt8Variants kIq3SToInt8{iq3_rows_to_int8_scalar<S>, kToInt8Avx512<S>};
const sdk::CpuDotVariants kIq3SNibblesDot{kScalar<SNibbles>, kAvx2<SNibbles>, kNibblesAvx512};
const sdk::CpuRowsToInt8Variants kIq3SNibblesToInt8{iq3_rows_to_int8_scalar<SNibbles>, kNibblesToInt8Avx512};

}  // namespace strata::iq3
