#include "iq3_cpu_dot.hpp"

#include "iq3_quantizer.hpp"
#include "iq3_tables.hpp"
#include "strata/half.hpp"

// Both formats make a 32-value sub-block from eight 4-byte grid points, 32 sign bits and an odd integer
// scale, so its dot with Q8_K is integer: scale * sum(magnitude * sign * q8); one float multiply per block.
namespace strata::iq3 {
namespace {

using sdk::dot_rows;
using sdk::Q8K;

struct SubBlock {
  uint32_t points[kGroupsPerSubBlock];  // magnitudes of values 4g .. 4g+3, lowest byte first
  uint32_t sign_bits;                   // bit i set: value i is negative
  int32_t scale;
};

// IQ3_XXS: d * (2l + 1) / 4 * grid byte, see iq3_xxs.hpp.
struct Xxs {
  static constexpr int kBlockBytes = 98, kIndicesOffset = 2, kSignsAndScalesOffset = 66;
  static constexpr float kScaleFactor = 0.25f;
  static SubBlock sub_block(const uint8_t* block, int ib) {
    SubBlock s;
    const uint8_t* indices = block + kIndicesOffset + kGroupsPerSubBlock * ib;
    for (int g = 0; g < kGroupsPerSubBlock; ++g) s.points[g] = kIq3XxsGrid[indices[g]];
    const uint32_t packed = load_u32(block + kSignsAndScalesOffset + 4 * ib);
    s.sign_bits = 0;
    for (int group = 0; group < kSubBlockValues / kSignGroupValues; ++group) {
      s.sign_bits |= static_cast<uint32_t>(kSignsIq2xs[(packed >> (7 * group)) & 127]) << (8 * group);
    }
    s.scale = 2 * static_cast<int32_t>(packed >> 28) + 1;
    return s;
  }
};

// IQ3_S: d * (2l + 1) * grid byte, see iq3_s.hpp.
struct S {
  static constexpr int kBlockBytes = 110, kQsOffset = 2, kQhOffset = 66, kSignsOffset = 74, kScalesOffset = 106;
  static constexpr float kScaleFactor = 1.0f;
  static SubBlock sub_block(const uint8_t* block, int ib) {
    SubBlock s;
    const uint8_t high_bits = block[kQhOffset + ib];
    for (int g = 0; g < kGroupsPerSubBlock; ++g) {
      s.points[g] = kIq3SGrid[block[kQsOffset + kGroupsPerSubBlock * ib + g] | (((high_bits >> g) & 1) << 8)];
    }
    s.sign_bits = load_u32(block + kSignsOffset + 4 * ib);
    s.scale = 2 * ((block[kScalesOffset + ib / 2] >> (4 * (ib % 2))) & 15) + 1;
    return s;
  }
};

template <class Format>
float iq3_row_dot_scalar(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * Format::kBlockBytes;
    const uint8_t* a = act + b * Q8K::kBytes;
    int32_t scaled = 0;
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      const SubBlock s = Format::sub_block(block, ib);
      const int8_t* q8 = Q8K::values(a) + kSubBlockValues * ib;
      int32_t dot = 0;
      for (int i = 0; i < kSubBlockValues; ++i) {
        const int32_t magnitude = (s.points[i / kGroupValues] >> (8 * (i % kGroupValues))) & 0xff;
        dot += ((s.sign_bits >> i) & 1 ? -magnitude : magnitude) * q8[i];
      }
      scaled += s.scale * dot;
    }
    sum += sdk::fp16_to_fp32(load_u16(block)) * Q8K::scale(a) * static_cast<float>(scaled);
  }
  return Format::kScaleFactor * sum;
}

#if STRATA_X86

// 0xff in byte i where bit i of sign_bits is set.
STRATA_TARGET_AVX2 __m256i sign_byte_mask(uint32_t sign_bits) {
  const __m256i byte_of_bit = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                               2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit_in_byte = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(sign_bits)), byte_of_bit);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_in_byte), bit_in_byte);
}

// scale * sum(magnitude * sign * q8) in 8 int32 lanes. Negating q8 could overflow (Q8_K uses -128), so a
// negative value's product is taken as magnitude * ~q8 + magnitude instead: ~q8 = -q8 - 1 always fits.
STRATA_TARGET_AVX2 __m256i scaled_signed_dot(__m256i magnitudes, uint32_t sign_bits, __m256i q8, int32_t scale) {
  const __m256i negative = sign_byte_mask(sign_bits);
  const __m256i scale16 = _mm256_set1_epi16(static_cast<int16_t>(scale));
  const __m256i products = sdk::scaled_dot_u8_s8(magnitudes, _mm256_xor_si256(q8, negative), scale16);
  // Sums of 8 bytes in the low 16 bits of each 64-bit lane, times the scale by the same multiply-add.
  const __m256i correction = _mm256_sad_epu8(_mm256_and_si256(magnitudes, negative), _mm256_setzero_si256());
  return _mm256_add_epi32(products, _mm256_madd_epi16(correction, scale16));
}

template <class Format>
STRATA_TARGET_AVX2 float iq3_row_dot_avx2(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kBlockValues; ++b) {
    const uint8_t* block = row + b * Format::kBlockBytes;
    const uint8_t* a = act + b * Q8K::kBytes;
    __m256i scaled = _mm256_setzero_si256();
    for (int ib = 0; ib < kSubBlocks; ++ib) {
      const SubBlock s = Format::sub_block(block, ib);
      const __m256i magnitudes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.points));
      const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Q8K::values(a) + kSubBlockValues * ib));
      scaled = _mm256_add_epi32(scaled, scaled_signed_dot(magnitudes, s.sign_bits, q8, s.scale));
    }
    const float d = _cvtsh_ss(load_u16(block)) * Q8K::scale(a);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(scaled), acc);
  }
  return Format::kScaleFactor * sdk::hsum_f32(acc);
}

constexpr sdk::CpuDotRowsFn kXxsAvx2 = dot_rows<iq3_row_dot_avx2<Xxs>>;
constexpr sdk::CpuDotRowsFn kSAvx2 = dot_rows<iq3_row_dot_avx2<S>>;

#else

constexpr sdk::CpuDotRowsFn kXxsAvx2 = nullptr, kSAvx2 = nullptr;

#endif

}  // namespace

const sdk::CpuDotVariants kIq3XxsDot{dot_rows<iq3_row_dot_scalar<Xxs>>, kXxsAvx2};
const sdk::CpuDotVariants kIq3SDot{dot_rows<iq3_row_dot_scalar<S>>, kSAvx2};

}  // namespace strata::iq3
