#include "core/quant/base_cpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "strata/half.hpp"

namespace strata::cpu_kernels {
namespace {

using sdk::dot_rows;

// ---- F32, F16, BF16 weights against F32 activations ----

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_f16(const uint8_t* p) { return sdk::fp16_to_fp32(load_u16(p)); }
float load_bf16(const uint8_t* p) { return sdk::bf16_to_fp32(load_u16(p)); }

// Partial sums per lane, as the SIMD variants keep them, so that both round alike.
constexpr int kLanes = 8;

template <float (*Load)(const uint8_t*), int Bytes>
float float_row_dot_scalar(int64_t n, const uint8_t* row, const void* activation) {
  const auto* a = static_cast<const float*>(activation);
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += Load(row + (i + l) * Bytes) * a[i + l];
  }
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  for (; i < n; ++i) sum += Load(row + i * Bytes) * a[i];
  return sum;
}

// ---- Q8_K activations ----

using sdk::Q8K;

void write_q8_k_header(uint8_t* block, float d, const int16_t* sums) {
  std::memcpy(block, &d, 4);
  std::memcpy(block + Q8K::kSumsOffset, sums, sizeof(int16_t) * (Q8K::kValues / Q8K::kSumValues));
}

// ---- Q8_0 weights against Q8_0 activations: 32 int8 and an f16 scale per block ----

constexpr int kQ8_0Values = 32, kQ8_0Bytes = 34;

float q8_0_row_dot_scalar(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQ8_0Values; ++b) {
    const uint8_t* w = row + b * kQ8_0Bytes;
    const uint8_t* a = act + b * kQ8_0Bytes;
    int32_t dot = 0;
    for (int i = 0; i < kQ8_0Values; ++i) dot += static_cast<int8_t>(w[2 + i]) * static_cast<int8_t>(a[2 + i]);
    sum += static_cast<float>(dot) * (load_f16(w) * load_f16(a));
  }
  return sum;
}

#if STRATA_X86

STRATA_TARGET_AVX2 __m256 load8_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
STRATA_TARGET_AVX2 __m256 load8_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
STRATA_TARGET_AVX2 __m256 load8_bf16(const uint8_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Four independent accumulators hide the FMA latency; the remainder below 8 goes through the scalar loop.
template <__m256 (*Load8)(const uint8_t*), float (*Load)(const uint8_t*), int Bytes>
STRATA_TARGET_AVX2 float float_row_dot_avx2(int64_t n, const uint8_t* row, const void* activation) {
  const auto* a = static_cast<const float*>(activation);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(Load8(row + (i + 8 * k) * Bytes), _mm256_loadu_ps(a + i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load8(row + i * Bytes), _mm256_loadu_ps(a + i), acc[0]);
  float sum = sdk::hsum_f32(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += Load(row + i * Bytes) * a[i];
  return sum;
}

STRATA_TARGET_AVX2 float q8_0_scale(const uint8_t* w, const uint8_t* a) {
  return _cvtsh_ss(load_u16(w)) * _cvtsh_ss(load_u16(a));
}

// Signed by signed bytes through the unsigned-by-signed multiply: |w| times a with w's sign moved onto a.
STRATA_TARGET_AVX2 float q8_0_row_dot_avx2(int64_t n, const uint8_t* row, const void* activation) {
  const auto* act = static_cast<const uint8_t*>(activation);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQ8_0Values; ++b) {
    const uint8_t* w = row + b * kQ8_0Bytes;
    sdk::prefetch_ahead<kQ8_0Bytes>(w);
    const uint8_t* a = act + b * kQ8_0Bytes;
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2));
    const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2));
    const __m256i dot = sdk::dot_u8_s8(_mm256_abs_epi8(wq), _mm256_sign_epi8(aq, wq));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(q8_0_scale(w, a)), _mm256_cvtepi32_ps(dot), acc);
  }
  return sdk::hsum_f32(acc);
}

constexpr sdk::CpuDotRowsFn kF32Avx2 = dot_rows<float_row_dot_avx2<load8_f32, load_f32, 4>>;
constexpr sdk::CpuDotRowsFn kF16Avx2 = dot_rows<float_row_dot_avx2<load8_f16, load_f16, 2>>;
constexpr sdk::CpuDotRowsFn kBF16Avx2 = dot_rows<float_row_dot_avx2<load8_bf16, load_bf16, 2>>;
constexpr sdk::CpuDotRowsFn kQ8_0Avx2 = dot_rows<q8_0_row_dot_avx2>;

#else

constexpr sdk::CpuDotRowsFn kF32Avx2 = nullptr, kF16Avx2 = nullptr, kBF16Avx2 = nullptr, kQ8_0Avx2 = nullptr;

#endif

}  // namespace

const sdk::CpuDotVariants kF32Dot{{dot_rows<float_row_dot_scalar<load_f32, 4>>}, {kF32Avx2}};
const sdk::CpuDotVariants kF16Dot{{dot_rows<float_row_dot_scalar<load_f16, 2>>}, {kF16Avx2}};
const sdk::CpuDotVariants kBF16Dot{{dot_rows<float_row_dot_scalar<load_bf16, 2>>}, {kBF16Avx2}};
const sdk::CpuDotVariants kQ8_0Dot{{dot_rows<q8_0_row_dot_scalar>}, {kQ8_0Avx2}};

void quantize_q8_k_scalar(const float* src, uint8_t* blocks, int64_t n) {
  for (int64_t b = 0; b < n / Q8K::kValues; ++b) {
    const float* x = src + b * Q8K::kValues;
    uint8_t* block = blocks + b * Q8K::kBytes;
    float max = 0.0f, amax = 0.0f, non_finite = 0.0f;  // as in Q8_0
    for (int i = 0; i < Q8K::kValues; ++i) {
      non_finite += x[i] * 0.0f;
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    auto* q = reinterpret_cast<int8_t*>(block + Q8K::kValuesOffset);
    int16_t sums[Q8K::kValues / Q8K::kSumValues] = {};
    float d = 0.0f;
    if (non_finite != 0.0f) {
      std::memset(q, 0, Q8K::kValues);
      d = std::numeric_limits<float>::quiet_NaN();
    } else if (amax > 0.0f) {
      const float inverse = -128.0f / max;
      for (int i = 0; i < Q8K::kValues; ++i) {
        q[i] = static_cast<int8_t>(std::min(127L, std::lround(inverse * x[i])));
        sums[i / Q8K::kSumValues] = static_cast<int16_t>(sums[i / Q8K::kSumValues] + q[i]);
      }
      d = 1.0f / inverse;
    } else {
      std::memset(q, 0, Q8K::kValues);
    }
    write_q8_k_header(block, d, sums);
  }
}

#if STRATA_X86

// Each vector of 16 values is one group of the sums. lround (half away from zero) as trunc plus the sign where the
// fraction's magnitude is at least one half: exact, the products being at most 128 in magnitude.
STRATA_TARGET_AVX512 void quantize_q8_k_avx512(const float* src, uint8_t* blocks, int64_t n) {
  constexpr int kVectors = Q8K::kValues / Q8K::kSumValues;
  const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 largest = _mm512_set1_ps(127.0f);
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  for (int64_t b = 0; b < n / Q8K::kValues; ++b) {
    const float* x = src + b * Q8K::kValues;
    uint8_t* block = blocks + b * Q8K::kBytes;
    auto* q = reinterpret_cast<int8_t*>(block + Q8K::kValuesOffset);
    __m512 v[kVectors];
    __m512 amax = zero;
    __mmask16 non_finite = 0;
    for (int k = 0; k < kVectors; ++k) {
      v[k] = _mm512_loadu_ps(x + Q8K::kSumValues * k);
      non_finite |= _mm512_cmp_ps_mask(_mm512_mul_ps(v[k], zero), zero, _CMP_NEQ_UQ);
      amax = _mm512_max_ps(amax, _mm512_abs_ps(v[k]));
    }
    int16_t sums[kVectors] = {};
    const float largest_magnitude = _mm512_reduce_max_ps(amax);
    if (non_finite != 0 || !(largest_magnitude > 0.0f)) {
      std::memset(q, 0, Q8K::kValues);
      write_q8_k_header(block, non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : 0.0f, sums);
      continue;
    }
    // The first value of that magnitude gives the sign, as the scalar scan's strict comparison does.
    float max = 0.0f;
    const __m512 target = _mm512_set1_ps(largest_magnitude);
    for (int k = 0; k < kVectors; ++k) {
      const __mmask16 equal = _mm512_cmp_ps_mask(_mm512_abs_ps(v[k]), target, _CMP_EQ_OQ);
      if (equal != 0) {
        max = x[Q8K::kSumValues * k + __builtin_ctz(equal)];
        break;
      }
    }
    const float inverse = -128.0f / max;
    const __m512 scale = _mm512_set1_ps(inverse);
    for (int k = 0; k < kVectors; ++k) {
      const __m512 scaled = _mm512_mul_ps(scale, v[k]);
      const __m512 truncated = _mm512_roundscale_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __mmask16 away = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(scaled, truncated)), half, _CMP_GE_OQ);
      const __m512 sign_one = _mm512_castsi512_ps(
          _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(scaled), sign_bit), _mm512_castps_si512(one)));
      const __m512 rounded = _mm512_min_ps(_mm512_mask_add_ps(truncated, away, truncated, sign_one), largest);
      const __m512i integers = _mm512_cvttps_epi32(rounded);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + Q8K::kSumValues * k), _mm512_cvtepi32_epi8(integers));
      sums[k] = static_cast<int16_t>(_mm512_reduce_add_epi32(integers));
    }
    write_q8_k_header(block, 1.0f / inverse, sums);
  }
}

#else

void quantize_q8_k_avx512(const float* src, uint8_t* blocks, int64_t n) { quantize_q8_k_scalar(src, blocks, n); }

#endif

void quantize_q8_k(const float* x, uint8_t* blocks, int64_t n) {
  static const auto chosen = sdk::cpu_isa() >= sdk::CpuIsa::avx512 ? &quantize_q8_k_avx512 : &quantize_q8_k_scalar;
  chosen(x, blocks, n);
}

}  // namespace strata::cpu_kernels
