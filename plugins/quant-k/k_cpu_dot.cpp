#include "k_cpu_dot.hpp"

#include <cmath>

#include "k_common.hpp"
#include "strata/half.hpp"

// Each super-block's dot is integer up to its scales: with weight value d*s_j*q - dmin*m_j (Q4_K, Q5_K) or
// d*s_j*(q - 32) (Q6_K) and activation d8*q8, it is d8*d * sum_j s_j * (q . q8)_j minus a per-sub-block
// constant times the sub-block's sum of q8, which Q8_K carries precomputed.
namespace strata::quant_k {
namespace {

using sdk::dot_rows;
using sdk::Q8K;

constexpr int kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;
constexpr int kQ5KHighBitsOffset = kScaleMinHeaderBytes, kQ5KLowBitsOffset = kQ5KHighBitsOffset + 32;
constexpr int kQ6KHighBitsOffset = 128, kQ6KScalesOffset = 192, kQ6KDOffset = 208;
constexpr int kQ6KBias = 32;

template <bool HasHighBits>
constexpr int scale_min_block_bytes() {
  return HasHighBits ? kQ5KBytes : kQ4KBytes;
}
template <bool HasHighBits>
constexpr int scale_min_low_bits_offset() {
  return HasHighBits ? kQ5KLowBitsOffset : kScaleMinHeaderBytes;
}

int32_t dot_levels(const uint8_t* levels, const int8_t* q8, int count) {
  int32_t sum = 0;
  for (int i = 0; i < count; ++i) sum += levels[i] * q8[i];
  return sum;
}

// ---- scalar ----

// Q4_K / Q5_K: a block's 256 levels unpacked as encode_scale_min_block packs them.
template <bool HasHighBits, class Level>
void unpack_scale_min_levels(const uint8_t* block, Level* levels) {
  const uint8_t* qs = block + scale_min_low_bits_offset<HasHighBits>();
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t packed = qs[32 * chunk + l];
      const int high_low = HasHighBits ? ((block[kQ5KHighBitsOffset + l] >> (2 * chunk)) & 1) << 4 : 0;
      const int high_high = HasHighBits ? ((block[kQ5KHighBitsOffset + l] >> (2 * chunk + 1)) & 1) << 4 : 0;
      levels[64 * chunk + l] = static_cast<Level>((packed & 15) | high_low);
      levels[64 * chunk + 32 + l] = static_cast<Level>((packed >> 4) | high_high);
    }
  }
}

template <bool HasHighBits>
float scale_min_row_dot_scalar(int64_t n, const uint8_t* row, const void* activation) {
  constexpr int kBlockBytes = scale_min_block_bytes<HasHighBits>();
  const auto* act = static_cast<const uint8_t*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    const uint8_t* a = act + b * Q8K::kBytes;
    uint8_t levels[kSuperBlock];
    unpack_scale_min_levels<HasHighBits>(block, levels);
    const ScaleMinCodes codes = unpack_scale_min_codes(block + 4);
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < kScaleMinSubBlocks; ++j) {
      scaled += codes.scale[j] * dot_levels(levels + 32 * j, Q8K::values(a) + 32 * j, 32);
      mins += codes.min[j] * (Q8K::sum16(a, 2 * j) + Q8K::sum16(a, 2 * j + 1));
    }
    const float d8 = Q8K::scale(a);
    sum += d8 * sdk::fp16_to_fp32(load_u16(block)) * static_cast<float>(scaled);
    sum -= d8 * sdk::fp16_to_fp32(load_u16(block + 2)) * static_cast<float>(mins);
  }
  return sum;
}

// fn(block, index) for each Q4_K / Q5_K block of n_rows rows of n values (row_bytes apart), index counting the
// blocks row after row.
template <bool HasHighBits, class Fn>
void for_each_scale_min_block(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, Fn fn) {
  constexpr int kBlockBytes = scale_min_block_bytes<HasHighBits>();
  const int64_t n_blocks = n / kSuperBlock;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* row = static_cast<const uint8_t*>(weight) + static_cast<size_t>(r) * row_bytes;
    for (int64_t b = 0; b < n_blocks; ++b) fn(row + b * kBlockBytes, r * n_blocks + b);
  }
}

// Q4_K / Q5_K rows for the int8 kernels (strata_quant_type::cpu_rows_to_int8): the levels (0..15, 0..31), the
// scale codes as the integer scales per 32 and d per 256; the offsets (cpu_rows_int8_offsets) are the min codes
// per 32 with -dmin per 256: value = d * scale * level + (-dmin) * min.
template <bool HasHighBits>
void scale_min_rows_to_int8_scalar(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                                   int16_t* group_scales, float* block_scales) {
  for_each_scale_min_block<HasHighBits>(n, n_rows, weight, row_bytes, [&](const uint8_t* block, int64_t index) {
    unpack_scale_min_levels<HasHighBits>(block, levels + index * kSuperBlock);
    const ScaleMinCodes codes = unpack_scale_min_codes(block + 4);
    for (int j = 0; j < kScaleMinSubBlocks; ++j) group_scales[index * kScaleMinSubBlocks + j] = codes.scale[j];
    block_scales[index] = sdk::fp16_to_fp32(load_u16(block));
  });
}

template <bool HasHighBits>
void scale_min_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                 int16_t* group_offsets, float* block_offset_scales) {
  for_each_scale_min_block<HasHighBits>(n, n_rows, weight, row_bytes, [&](const uint8_t* block, int64_t index) {
    const ScaleMinCodes codes = unpack_scale_min_codes(block + 4);
    for (int j = 0; j < kScaleMinSubBlocks; ++j) group_offsets[index * kScaleMinSubBlocks + j] = codes.min[j];
    block_offset_scales[index] = -sdk::fp16_to_fp32(load_u16(block + 2));
  });
}

// Q6_K: levels 0..63 unpacked as q6_k.cpp packs them; the bias of 32 leaves through the Q8_K sums.
float q6_k_row_dot_scalar(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kQ6KBytes;
    const uint8_t* a = act + b * Q8K::kBytes;
    uint8_t levels[kSuperBlock];
    for (int half = 0; half < 2; ++half) {
      const uint8_t* low_bits = block + 64 * half;
      const uint8_t* high_bits = block + kQ6KHighBitsOffset + 32 * half;
      for (int l = 0; l < 32; ++l) {
        for (int k = 0; k < 4; ++k) {
          const int low = (low_bits[l + 32 * (k & 1)] >> (4 * (k >> 1))) & 15;
          levels[128 * half + 32 * k + l] = static_cast<uint8_t>(low | (((high_bits[l] >> (2 * k)) & 3) << 4));
        }
      }
    }
    const auto* scales = reinterpret_cast<const int8_t*>(block + kQ6KScalesOffset);
    int32_t scaled = 0;
    for (int j = 0; j < 16; ++j) {
      const int32_t biased = dot_levels(levels + 16 * j, Q8K::values(a) + 16 * j, 16);
      scaled += scales[j] * (biased - kQ6KBias * Q8K::sum16(a, j));
    }
    sum += Q8K::scale(a) * sdk::fp16_to_fp32(load_u16(block + kQ6KDOffset)) * static_cast<float>(scaled);
  }
  return sum;
}

#if STRATA_X86

// ---- AVX2 ----

// The eight 6-bit scale and min codes of a Q4_K / Q5_K header, four per 32-bit word at once (the same
// layout unpack_scale_min_codes reads one code at a time).
struct PackedCodes {
  uint32_t scales[2];
  uint32_t mins[2];
};
inline PackedCodes unpack_codes_wordwise(const uint8_t* packed) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof word);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  return {{word[0] & kLow6, (word[2] & kLow4) | (((word[0] >> 6) & kLow2) << 4)},
          {word[1] & kLow6, ((word[2] >> 4) & kLow4) | (((word[1] >> 6) & kLow2) << 4)}};
}

// Values 64c .. 64c + 31 (first) and 64c + 32 .. 64c + 63 (second) of a chunk c.
struct ChunkLevels {
  __m256i first, second;
};

// A Q4_K / Q5_K block's levels, 64 values (a chunk: its 32 low nibbles, then its 32 high nibbles, with Q5_K's fifth
// bits) at a time, in value order.
template <bool HasHighBits>
class ScaleMinLevels {
 public:
  // Inlined into each kernel (AVX2's and AVX-512's), whose registers the levels stay in.
  [[gnu::always_inline]] STRATA_TARGET_AVX2 explicit ScaleMinLevels(const uint8_t* block)
      : qs_(block + scale_min_low_bits_offset<HasHighBits>()),
        high_bits_(HasHighBits ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ5KHighBitsOffset))
                               : _mm256_setzero_si256()) {}

  [[gnu::always_inline]] STRATA_TARGET_AVX2 ChunkLevels next_chunk() {
    const __m256i low_nibble = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs_));
    qs_ += 32;
    __m256i first = _mm256_and_si256(packed, low_nibble);
    __m256i second = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
    if constexpr (HasHighBits) {
      first = _mm256_or_si256(first, _mm256_slli_epi16(_mm256_and_si256(high_bits_, one), 4));
      second = _mm256_or_si256(second, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits_, 1), one), 4));
      high_bits_ = _mm256_srli_epi16(high_bits_, 2);
    }
    return {first, second};
  }

 private:
  const uint8_t* qs_;
  __m256i high_bits_;
};

template <bool HasHighBits>
STRATA_TARGET_AVX2 float scale_min_row_dot_avx2(int64_t n, const uint8_t* row, const void* activation) {
  constexpr int kBlockBytes = scale_min_block_bytes<HasHighBits>();
  const auto* act = static_cast<const uint8_t*>(activation);
  __m256 acc = _mm256_setzero_ps();
  float min_total = 0.0f;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    sdk::prefetch_ahead<kBlockBytes>(block);
    const uint8_t* a = act + b * Q8K::kBytes;
    const int8_t* q8 = Q8K::values(a);
    const float d8 = Q8K::scale(a);

    const PackedCodes codes = unpack_codes_wordwise(block + 4);
    uint8_t scales[8];
    std::memcpy(scales, codes.scales, 8);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes.mins)));
    const __m128i sums16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + Q8K::kSumsOffset));
    const __m128i sums16_high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + Q8K::kSumsOffset + 16));
    const __m128i sums32 = _mm_hadd_epi16(sums16, sums16_high);  // one per 32-value sub-block
    min_total += d8 * _cvtsh_ss(load_u16(block + 2)) * static_cast<float>(sdk::hsum_i32(_mm_madd_epi16(mins, sums32)));

    ScaleMinLevels<HasHighBits> levels(block);
    __m256i scaled = _mm256_setzero_si256();
    for (int chunk = 0; chunk < 4; ++chunk) {
      const auto [first, second] = levels.next_chunk();
      const __m256i q8_first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * chunk));
      const __m256i q8_second = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * chunk + 32));
      scaled = _mm256_add_epi32(scaled, sdk::scaled_dot_u8_s8(first, q8_first, _mm256_set1_epi16(scales[2 * chunk])));
      scaled =
          _mm256_add_epi32(scaled, sdk::scaled_dot_u8_s8(second, q8_second, _mm256_set1_epi16(scales[2 * chunk + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d8 * _cvtsh_ss(load_u16(block))), _mm256_cvtepi32_ps(scaled), acc);
  }
  return sdk::hsum_f32(acc) - min_total;
}

STRATA_TARGET_AVX2 float q6_k_row_dot_avx2(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  const __m256i low_nibble = _mm256_set1_epi8(0x0f), two_bits = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kQ6KBytes;
    sdk::prefetch_ahead<kQ6KBytes>(block);
    const uint8_t* a = act + b * Q8K::kBytes;
    const int8_t* q8 = Q8K::values(a);
    const auto* scales = reinterpret_cast<const int8_t*>(block + kQ6KScalesOffset);

    // The bias: 32 * sum_j scale_j * (sum of sub-block j's q8), all 16 sub-blocks in one multiply-add.
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Q8K::kSumsOffset));
    __m256i scaled = _mm256_slli_epi32(_mm256_madd_epi16(scales16, sums16), 5);
    scaled = _mm256_sub_epi32(_mm256_setzero_si256(), scaled);

    for (int half = 0; half < 2; ++half) {
      const uint8_t* low_bits = block + 64 * half;
      const __m256i packed_low[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low_bits)),
                                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low_bits + 32))};
      const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ6KHighBitsOffset + 32 * half));
      for (int k = 0; k < 4; ++k) {
        const __m256i nibbles = k < 2 ? packed_low[k & 1] : _mm256_srli_epi16(packed_low[k & 1], 4);
        const __m256i top = _mm256_and_si256(_mm256_srli_epi16(high, 2 * k), two_bits);
        const __m256i levels = _mm256_or_si256(_mm256_and_si256(nibbles, low_nibble), _mm256_slli_epi16(top, 4));
        // 32 values span two 16-value sub-blocks: one scale per 128-bit lane.
        const int first = 8 * half + 2 * k;
        const __m256i lane_scales = _mm256_set_m128i(_mm_set1_epi16(scales[first + 1]), _mm_set1_epi16(scales[first]));
        const __m256i q8v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * half + 32 * k));
        scaled = _mm256_add_epi32(scaled, sdk::scaled_dot_u8_s8(levels, q8v, lane_scales));
      }
    }
    const float d = Q8K::scale(a) * _cvtsh_ss(load_u16(block + kQ6KDOffset));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(scaled), acc);
  }
  return sdk::hsum_f32(acc);
}

// ---- AVX-512 ----

// As the AVX2 kernel, 64 values per register: a half's 64 low-bit bytes give values 0..63 (low nibbles) and
// 64..127 (high nibbles); its 32 high-bit bytes, in both 256-bit halves, are shifted per 16-bit lane so that
// each half of the register sees its own two bits.
STRATA_TARGET_AVX512 float q6_k_row_dot_avx512(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  const __m512i low_nibble = _mm512_set1_epi8(0x0f), top_bits = _mm512_set1_epi8(0x30);
  const __m512i shift_first = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i shift_second = _mm512_add_epi16(shift_first, _mm512_set1_epi16(4));
  const __m512i lane_index =
      _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                         11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                        3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kQ6KBytes;
    sdk::prefetch_ahead<kQ6KBytes>(block);
    const uint8_t* a = act + b * Q8K::kBytes;
    const int8_t* q8 = Q8K::values(a);
    const __m128i scale_bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ6KScalesOffset));
    const __m256i scales16 = _mm256_cvtepi8_epi16(scale_bytes);
    const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Q8K::kSumsOffset));
    __m512i scaled = _mm512_zextsi256_si512(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(scales16, sums16), 5)));
    const __m512i all_scales = _mm512_castsi256_si512(scales16);
    for (int half = 0; half < 2; ++half) {
      const __m512i packed_low = _mm512_loadu_si512(block + 64 * half);
      const __m512i high = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ6KHighBitsOffset + 32 * half)));
      const __m512i levels[2] = {
          _mm512_or_si512(_mm512_and_si512(packed_low, low_nibble),
                          _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(high, shift_first), 4), top_bits)),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(packed_low, 4), low_nibble),
                          _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(high, shift_second), 4), top_bits))};
      for (int k = 0; k < 2; ++k) {
        // 64 values span four 16-value sub-blocks: int16 lane j takes scale 8 * half + 4 * k + j / 8.
        const int first = 8 * half + 4 * k;
        const __m512i lane_scales = _mm512_permutexvar_epi16(
            _mm512_add_epi16(lane_index, _mm512_set1_epi16(static_cast<int16_t>(first))), all_scales);
        const __m512i q8v = _mm512_loadu_si512(q8 + 128 * half + 64 * k);
        scaled = _mm512_add_epi32(scaled, _mm512_madd_epi16(_mm512_maddubs_epi16(levels[k], q8v), lane_scales));
      }
    }
    const float d = Q8K::scale(a) * _cvtsh_ss(load_u16(block + kQ6KDOffset));
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(scaled), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// Q4_K / Q5_K for up to kDotTokens tokens: a block's levels are decoded once into four registers of 64 values in
// value order (chunk c's low nibbles then its high nibbles: values 64c .. 64c + 63), each 32-value half scaled by
// its sub-block's scale in vpmaddwd; then every token's q8 meets them. The mins' share comes from the Q8_K sums
// (one per 16 values, the sub-block's min repeated for both). Each block's two integers, then two fused
// multiply-adds per token (d's term, then -dmin's), as cpu_rows_to_int8 and cpu_rows_int8_offsets promise the
// int8 kernels: a product is the same float whichever ran it.
template <bool HasHighBits>
STRATA_TARGET_AVX512 void scale_min_row_dot_tokens_avx512(int64_t n, const uint8_t* row, const uint8_t* activations,
                                                          size_t activation_stride, int n_tokens, float* sums) {
  constexpr int kBlockBytes = scale_min_block_bytes<HasHighBits>();
  for (int t = 0; t < n_tokens; ++t) sums[t] = 0.0f;
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const uint8_t* block = row + b * kBlockBytes;
    sdk::prefetch_ahead<kBlockBytes>(block);
    const PackedCodes codes = unpack_codes_wordwise(block + 4);
    uint8_t scales[8], mins[8];
    std::memcpy(scales, codes.scales, 8);
    std::memcpy(mins, codes.mins, 8);
    ScaleMinLevels<HasHighBits> chunks(block);
    __m512i levels[4], lane_scales[4];
    for (int chunk = 0; chunk < 4; ++chunk) {
      const auto [first, second] = chunks.next_chunk();
      levels[chunk] = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
      lane_scales[chunk] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(scales[2 * chunk])),
                                              _mm256_set1_epi16(scales[2 * chunk + 1]), 1);
    }
    // Sub-block j's min for the two 16-value sums of its values.
    const __m256i min_pairs =
        _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mins)),
                                               _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mins))));
    const float d = _cvtsh_ss(load_u16(block)), minus_dmin = -_cvtsh_ss(load_u16(block + 2));
    for (int t = 0; t < n_tokens; ++t) {
      const uint8_t* a = activations + static_cast<size_t>(t) * activation_stride + b * Q8K::kBytes;
      const int8_t* q8 = Q8K::values(a);
      __m512i scaled = _mm512_setzero_si512();
      for (int chunk = 0; chunk < 4; ++chunk) {
        const __m512i products = _mm512_maddubs_epi16(levels[chunk], _mm512_loadu_si512(q8 + 64 * chunk));
        scaled = _mm512_add_epi32(scaled, _mm512_madd_epi16(products, lane_scales[chunk]));
      }
      const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + Q8K::kSumsOffset));
      const __m256i offsets = _mm256_madd_epi16(min_pairs, sums16);
      const float d8 = Q8K::scale(a);
      sums[t] = std::fma(d * d8, static_cast<float>(_mm512_reduce_add_epi32(scaled)), sums[t]);
      sums[t] = std::fma(minus_dmin * d8, static_cast<float>(_mm512_reduce_add_epi32(_mm512_zextsi256_si512(offsets))),
                         sums[t]);
    }
  }
}

// scale_min_rows_to_int8_scalar's output with the AVX2 level decoder (inlined here) for the levels.
template <bool HasHighBits>
STRATA_TARGET_AVX512 void scale_min_rows_to_int8_avx512(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                                        int8_t* levels, int16_t* group_scales, float* block_scales) {
  // The lambda needs the target of its own: it is not inlined into the loop, which is baseline code.
  const auto decode = [&](const uint8_t* block, int64_t index) STRATA_TARGET_AVX512 {
    ScaleMinLevels<HasHighBits> chunks(block);
    auto* out = reinterpret_cast<__m256i*>(levels + index * kSuperBlock);
    for (int chunk = 0; chunk < 4; ++chunk) {
      const auto [first, second] = chunks.next_chunk();
      _mm256_storeu_si256(out + 2 * chunk, first);
      _mm256_storeu_si256(out + 2 * chunk + 1, second);
    }
    const PackedCodes codes = unpack_codes_wordwise(block + 4);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(group_scales + index * kScaleMinSubBlocks),
                     _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes.scales))));
    block_scales[index] = _cvtsh_ss(load_u16(block));
  };
  for_each_scale_min_block<HasHighBits>(n, n_rows, weight, row_bytes, decode);
}

constexpr sdk::CpuDotRowsFn kQ4KAvx2 = dot_rows<scale_min_row_dot_avx2<false>>;
constexpr sdk::CpuDotRowsFn kQ5KAvx2 = dot_rows<scale_min_row_dot_avx2<true>>;
constexpr sdk::CpuDotRowsFn kQ6KAvx2 = dot_rows<q6_k_row_dot_avx2>;
constexpr sdk::CpuDotRowsFn kQ6KAvx512 = dot_rows<q6_k_row_dot_avx512>;
constexpr sdk::CpuDotKernel kQ4KAvx512 = sdk::kTokensDotKernel<scale_min_row_dot_tokens_avx512<false>>;
constexpr sdk::CpuDotKernel kQ5KAvx512 = sdk::kTokensDotKernel<scale_min_row_dot_tokens_avx512<true>>;
constexpr sdk::CpuRowsToInt8Fn kQ4KToInt8Avx512 = scale_min_rows_to_int8_avx512<false>;
constexpr sdk::CpuRowsToInt8Fn kQ5KToInt8Avx512 = scale_min_rows_to_int8_avx512<true>;

#else

constexpr sdk::CpuDotRowsFn kQ4KAvx2 = nullptr, kQ5KAvx2 = nullptr, kQ6KAvx2 = nullptr, kQ6KAvx512 = nullptr;
constexpr sdk::CpuDotKernel kQ4KAvx512 = {}, kQ5KAvx512 = {};
constexpr sdk::CpuRowsToInt8Fn kQ4KToInt8Avx512 = nullptr, kQ5KToInt8Avx512 = nullptr;

#endif

}  // namespace

const sdk::CpuDotVariants kQ4KDot{{dot_rows<scale_min_row_dot_scalar<false>>}, {kQ4KAvx2}, kQ4KAvx512};
const sdk::CpuDotVariants kQ5KDot{{dot_rows<scale_min_row_dot_scalar<true>>}, {kQ5KAvx2}, kQ5KAvx512};
const sdk::CpuDotVariants kQ6KDot{{dot_rows<q6_k_row_dot_scalar>}, {kQ6KAvx2}, {kQ6KAvx512}};
const sdk::CpuRowsToInt8Variants kQ4KToInt8{scale_min_rows_to_int8_scalar<false>, kQ4KToInt8Avx512};
const sdk::CpuRowsToInt8Variants kQ5KToInt8{scale_min_rows_to_int8_scalar<true>, kQ5KToInt8Avx512};

void q4_k_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int16_t* group_offsets,
                            float* block_offset_scales) {
  scale_min_rows_int8_offsets<false>(n, n_rows, weight, row_bytes, group_offsets, block_offset_scales);
}
void q5_k_rows_int8_offsets(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int16_t* group_offsets,
                            float* block_offset_scales) {
  scale_min_rows_int8_offsets<true>(n, n_rows, weight, row_bytes, group_offsets, block_offset_scales);
}

}  // namespace strata::quant_k
