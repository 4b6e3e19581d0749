// One generic body per kernel, written with GCC vector extensions (16 floats per vector), inlined into a
// wrapper per target: avx512 keeps a vector in one zmm register, avx2 in two ymm, the baseline in four xmm.
// Every variant sums in the same order; only FMA contraction (this file builds with -ffp-contract=fast)
// makes the avx2/avx512 results differ from the baseline, within float rounding.
#include "float_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#if STRATA_X86
#include <immintrin.h>
#endif

#include "activation_functions.hpp"
#include "strata/half.hpp"

namespace strata::cpu {
namespace {

#define STRATA_INLINE [[gnu::always_inline]] inline

using vf = float __attribute__((vector_size(64)));
using vi32 = int32_t __attribute__((vector_size(64)));
using vu16 = uint16_t __attribute__((vector_size(32)));
using vi8 = int8_t __attribute__((vector_size(16)));
constexpr int kLanes = 16;

STRATA_INLINE vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
STRATA_INLINE void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }

// What each kernel set does with its own instructions: halves to floats (exactly) and the lane-wise maximum. The
// portable halves move the exponent and mantissa bits into float position and scale by 2^112 (every finite half,
// subnormals included; inf and NaN get the float's all-ones exponent), without branches or compares (GCC 12
// scalarizes compares on vectors wider than the target's registers), so that it vectorizes. The x86 sets' members
// are not always_inline: a target-specific function cannot be forced into the generic bodies, so the kernel sets'
// entry points flatten their calls instead.
struct PortableOps {
  STRATA_INLINE static vf load_halves(const uint16_t* p) {
    vu16 h;
    std::memcpy(&h, p, sizeof h);
    const vi32 bits = __builtin_convertvector(h, vi32);
    const vi32 magnitude = (bits & 0x7fff) << 13;
    const vi32 sign = (bits & 0x8000) << 16;
    const vi32 finite = (vi32)((vf)magnitude * 0x1p112f);
    const vi32 is_inf_or_nan = -(((magnitude >> 23) + 1) >> 5);  // exponent 31: all-ones lanes, else zero
    const vi32 result = ((magnitude | 0x7f800000) & is_inf_or_nan) | (finite & ~is_inf_or_nan);
    return (vf)(result | sign);
  }
  // kLanes floats as halves, rounded to nearest even.
  STRATA_INLINE static void store_halves(const float* x, uint16_t* out) {
    for (int i = 0; i < kLanes; ++i) out[i] = sdk::fp32_to_fp16(x[i]);
  }
  // b where a < b, else a (so a NaN in b is passed over, one in a kept), as std::max(a, b) per lane.
  STRATA_INLINE static vf max(vf a, vf b) {
    for (int lane = 0; lane < 16; ++lane) a[lane] = a[lane] < b[lane] ? b[lane] : a[lane];
    return a;
  }
};
#if STRATA_X86
struct Avx2Ops {
  STRATA_TARGET_AVX2 static vf load_halves(const uint16_t* p) {
    const __m256 low = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256 high = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
    return join(low, high);
  }
  STRATA_TARGET_AVX2 static void store_halves(const float* x, uint16_t* out) {
    for (int half = 0; half < 2; ++half) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * half),
                       _mm256_cvtps_ph(_mm256_loadu_ps(x + 8 * half), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  STRATA_TARGET_AVX2 static vf max(vf a, vf b) {
    __m256 a_half[2], b_half[2];
    std::memcpy(a_half, &a, sizeof a);
    std::memcpy(b_half, &b, sizeof b);
    // maxps returns its second operand where either is NaN: b, a in that order is std::max(a, b).
    return join(_mm256_max_ps(b_half[0], a_half[0]), _mm256_max_ps(b_half[1], a_half[1]));
  }
  STRATA_TARGET_AVX2 static vf join(__m256 low, __m256 high) {
    vf v;
    std::memcpy(&v, &low, sizeof low);
    std::memcpy(reinterpret_cast<char*>(&v) + sizeof low, &high, sizeof high);
    return v;
  }
};
struct Avx512Ops {
  STRATA_TARGET_AVX512 static vf load_halves(const uint16_t* p) {
    // The zero-masked form: GCC 12 warns of _mm512_cvtph_ps's undefined source as maybe uninitialized.
    return (vf)_mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  STRATA_TARGET_AVX512 static void store_halves(const float* x, uint16_t* out) {
    // The zero-masked form, as load_halves' (GCC 12 warns of the plain one's undefined source).
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out),
        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  STRATA_TARGET_AVX512 static vf max(vf a, vf b) {
    return (vf)_mm512_maskz_max_ps(0xffff, (__m512)b, (__m512)a);  // zero-masked, as above; b, a as in Avx2Ops
  }
};
#endif

STRATA_INLINE vf load(const int8_t* p) {
  vi8 q;
  std::memcpy(&q, p, sizeof q);
  // Through int32: GCC scalarizes a direct int8 -> float conversion.
  return __builtin_convertvector(__builtin_convertvector(q, vi32), vf);
}

// A vector of 16 values of any element type the kernels read, halves through the kernel set's loader.
template <class Ops>
STRATA_INLINE vf load_any(const float* p) {
  return load(p);
}
template <class Ops>
STRATA_INLINE vf load_any(const int8_t* p) {
  return load(p);
}
template <class Ops>
STRATA_INLINE vf load_any(const uint16_t* p) {
  return Ops::load_halves(p);
}

STRATA_INLINE float to_float(float x) { return x; }
STRATA_INLINE float to_float(uint16_t x) { return sdk::fp16_to_fp32(x); }
STRATA_INLINE float to_float(int8_t x) { return static_cast<float>(x); }

// Lanes summed pairwise (halves, then quarters, ...): a fixed order, the same on every target, in four
// dependent adds rather than sixteen.
STRATA_INLINE float reduce(vf v) {
  using vf8 = float __attribute__((vector_size(32)));
  using vf4 = float __attribute__((vector_size(16)));
  const vf8 halves = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                     __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const vf4 quarters =
      __builtin_shufflevector(halves, halves, 0, 1, 2, 3) + __builtin_shufflevector(halves, halves, 4, 5, 6, 7);
  return (quarters[0] + quarters[2]) + (quarters[1] + quarters[3]);
}

// Two accumulators per row hide the add latency.
template <class Ops, class T>
STRATA_INLINE float dot_body(const T* a, const float* b, int64_t n) {
  vf acc0 = {}, acc1 = {};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    acc0 += load_any<Ops>(a + i) * load(b + i);
    acc1 += load_any<Ops>(a + i + kLanes) * load(b + i + kLanes);
  }
  float sum = reduce(acc0 + acc1);
  for (; i < n; ++i) sum += to_float(a[i]) * b[i];
  return sum;
}

// Same accumulation per row as dot_body, so a row's result does not depend on which kernel computed it.
STRATA_INLINE void dot4_body(const float* w, size_t stride, const float* x, int64_t n, float* out) {
  vf acc[4][2] = {};
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const vf x0 = load(x + i), x1 = load(x + i + kLanes);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      acc[r][0] += load(w + r * stride + i) * x0;
      acc[r][1] += load(w + r * stride + i + kLanes) * x1;
    }
  }
  for (int r = 0; r < 4; ++r) {
    float sum = reduce(acc[r][0] + acc[r][1]);
    for (int64_t j = i; j < n; ++j) sum += w[r * stride + j] * x[j];
    out[r] = sum;
  }
}

template <class Ops, class T>
STRATA_INLINE void axpy_body(float a, const T* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, load(y + i) + a * load_any<Ops>(x + i));
  for (; i < n; ++i) y[i] += a * to_float(x[i]);
}

// A kv head's cached rows against several vectors (the query heads sharing that kv head): each row is loaded and
// converted once for all of them, in one call per head group.
constexpr int kMaxVectors = 8;

// Chunks vectors of ys + v * y_stride + i (v < Count) kept in registers while every row adds its part, in row
// order per lane. Count and Chunks are constants so that the loops unroll and the sums stay in registers (with a
// run-time count GCC keeps them on the stack, a load and a store around every FMA).
template <int Count, int Chunks, class Ops, class T>
STRATA_INLINE void axpy_rows_chunks(const float* weights, size_t a_stride, const T* rows, int64_t n_rows, float* y,
                                    size_t y_stride, int64_t n, int64_t i) {
  vf acc[Count][Chunks];
#pragma GCC unroll 8
  for (int v = 0; v < Count; ++v) {
#pragma GCC unroll 2
    for (int c = 0; c < Chunks; ++c) acc[v][c] = load(y + v * y_stride + i + c * kLanes);
  }
  for (int64_t j = 0; j < n_rows; ++j) {
    vf row[Chunks];
#pragma GCC unroll 2
    for (int c = 0; c < Chunks; ++c) row[c] = load_any<Ops>(rows + j * n + i + c * kLanes);
#pragma GCC unroll 8
    for (int v = 0; v < Count; ++v) {
#pragma GCC unroll 2
      for (int c = 0; c < Chunks; ++c) acc[v][c] += weights[v * a_stride + j] * row[c];
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < Count; ++v) {
#pragma GCC unroll 2
    for (int c = 0; c < Chunks; ++c) store(y + v * y_stride + i + c * kLanes, acc[v][c]);
  }
}

// One group of Count vectors of axpy_rows_body.
template <int Count, class Ops, class T>
STRATA_INLINE void axpy_rows_group(const float* weights, size_t a_stride, const T* rows, int64_t n_rows, float* y,
                                   size_t y_stride, int64_t n) {
  int64_t i = 0;
  if constexpr (Count <= kMaxVectors / 2) {
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      axpy_rows_chunks<Count, 2, Ops>(weights, a_stride, rows, n_rows, y, y_stride, n, i);
    }
  }
  for (; i + kLanes <= n; i += kLanes)
    axpy_rows_chunks<Count, 1, Ops>(weights, a_stride, rows, n_rows, y, y_stride, n, i);
  for (; i < n; ++i) {
    for (int v = 0; v < Count; ++v) {
      for (int64_t j = 0; j < n_rows; ++j) y[v * y_stride + i] += weights[v * a_stride + j] * to_float(rows[j * n + i]);
    }
  }
}

// ys[v * y_stride ..] += a[v * a_stride + j] * row j for j < n_rows, in row order per lane (as n_rows axpy
// calls would), each y chunk kept in a register meanwhile; two chunks at a time for up to half kMaxVectors
// vectors, so that at least eight sums are in flight.
template <class Ops, class T>
STRATA_INLINE void axpy_rows_body(const float* a, size_t a_stride, const T* rows, int64_t n_rows, float* ys,
                                  size_t y_stride, int n_y, int64_t n) {
  static_assert(kMaxVectors == 8, "a case per vector count");
  for (int v0 = 0; v0 < n_y; v0 += kMaxVectors) {
    const float* w = a + v0 * a_stride;
    float* y = ys + v0 * y_stride;
    switch (n_y - v0) {
      case 1:
        axpy_rows_group<1, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 2:
        axpy_rows_group<2, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 3:
        axpy_rows_group<3, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 4:
        axpy_rows_group<4, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 5:
        axpy_rows_group<5, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 6:
        axpy_rows_group<6, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      case 7:
        axpy_rows_group<7, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
      default:
        axpy_rows_group<8, Ops>(w, a_stride, rows, n_rows, y, y_stride, n);
        break;
    }
  }
}

// out[v * out_stride + j] = dot(row j, x + v * x_stride) for v < Count over blocks of kLanes rows stored value by
// value: each vector FMA adds one value's product for kLanes rows at once (two sums per vector, for even and odd
// values, hide the FMA latency). Count is a constant so that the sums stay in registers.
template <int Count, class Ops>
STRATA_INLINE void dot_blocks_group(const uint16_t* blocks, int64_t n_rows, const float* x, size_t x_stride, int64_t n,
                                    float* out, size_t out_stride) {
  static_assert(kLanes == kBlockLanes);
  for (int64_t j0 = 0; j0 < n_rows; j0 += kLanes) {
    const uint16_t* block = blocks + j0 * n;
    vf acc[Count][2];
#pragma GCC unroll 8
    for (int v = 0; v < Count; ++v) acc[v][0] = acc[v][1] = vf{};
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
      const vf even = Ops::load_halves(block + i * kLanes), odd = Ops::load_halves(block + (i + 1) * kLanes);
#pragma GCC unroll 8
      for (int v = 0; v < Count; ++v) {
        acc[v][0] += x[v * x_stride + i] * even;
        acc[v][1] += x[v * x_stride + i + 1] * odd;
      }
    }
    if (i < n) {
      const vf last = Ops::load_halves(block + i * kLanes);
#pragma GCC unroll 8
      for (int v = 0; v < Count; ++v) acc[v][0] += x[v * x_stride + i] * last;
    }
    const int64_t rows = n_rows - j0 < kLanes ? n_rows - j0 : kLanes;
#pragma GCC unroll 8
    for (int v = 0; v < Count; ++v) {
      const vf sum = acc[v][0] + acc[v][1];
      std::memcpy(out + v * out_stride + j0, &sum, static_cast<size_t>(rows) * sizeof(float));
    }
  }
}

template <class Ops>
STRATA_INLINE void dot_blocks_body(const uint16_t* blocks, int64_t n_rows, const float* xs, size_t x_stride, int n_x,
                                   int64_t n, float* out, size_t out_stride) {
  static_assert(kMaxVectors == 8, "a case per vector count");
  for (int v0 = 0; v0 < n_x; v0 += kMaxVectors) {
    const float* x = xs + v0 * x_stride;
    float* o = out + v0 * out_stride;
    switch (n_x - v0) {
      case 1:
        dot_blocks_group<1, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 2:
        dot_blocks_group<2, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 3:
        dot_blocks_group<3, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 4:
        dot_blocks_group<4, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 5:
        dot_blocks_group<5, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 6:
        dot_blocks_group<6, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      case 7:
        dot_blocks_group<7, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
      default:
        dot_blocks_group<8, Ops>(blocks, n_rows, x, x_stride, n, o, out_stride);
        break;
    }
  }
}

// e^x per lane for x <= 0 (a softmax's shifted scores): x = n ln 2 + r with |r| <= ln 2 / 2, e^r by Cephes' degree-6
// polynomial (within 2 ulp of the true value), times 2^n built in the exponent bits. x below -87.3 gives 2^-126
// times e^r's error at most (not 0): no softmax weight that small changes a sum of terms of which one is 1.
template <class Ops>
STRATA_INLINE vf exp_nonpositive(vf x) {
  x = Ops::max(x, vf{} - 87.3f);
  const vf rounding = vf{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const vf n = (x * 1.44269504f + rounding) - rounding;
  const vf r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  vf p = vf{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const vi32 power = (__builtin_convertvector(n, vi32) + 127) << 23;
  return p * (vf)power;
}

// x = softmax(x * scale) over n values in place: the maximum subtracted, e^, and the sum's inverse applied, in
// vectors (a NaN score makes every value NaN, as the scalar loop's sum would).
template <class Ops>
STRATA_INLINE void scaled_softmax_body(float* x, int64_t n, float scale) {
  float max_score = -INFINITY;
  int64_t i = 0;
  if (n >= kLanes) {
    vf high = load(x);
    for (i = kLanes; i + kLanes <= n; i += kLanes) high = Ops::max(high, load(x + i));
    for (int lane = 0; lane < kLanes; ++lane) max_score = std::max(max_score, high[lane]);
  }
  for (; i < n; ++i) max_score = std::max(max_score, x[i]);
  const float shift = max_score * scale;
  vf sums = {};
  for (i = 0; i + kLanes <= n; i += kLanes) {
    const vf e = exp_nonpositive<Ops>(load(x + i) * scale - shift);
    store(x + i, e);
    sums += e;
  }
  float sum = reduce(sums);
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] * scale - shift));
  const float normalizer = 1.0f / sum;
  for (i = 0; i + kLanes <= n; i += kLanes) store(x + i, load(x + i) * normalizer);
  for (; i < n; ++i) x[i] *= normalizer;
}

// gate = silu(gate) * up over n values: silu(x) = x * sigmoid(x), with sigmoid from t = e^-|x| (an exponent <= 0,
// so no overflow): 1 / (1 + t) where x >= 0, t / (1 + t) below.
template <class Ops>
STRATA_INLINE void swiglu_body(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const vf x = load(gate + i);
    const vf t = exp_nonpositive<Ops>(Ops::max(x, -x) * -1.0f);
    const vf numerator = x >= 0.0f ? vf{} + 1.0f : t;
    store(gate + i, x * numerator / (t + 1.0f) * load(up + i));
  }
  for (; i < n; ++i) gate[i] = silu(gate[i]) * up[i];
}

// Lane by lane, then the tail: each element's operations are the scalar ones, so every set gives the same floats.
template <class Op>
STRATA_INLINE void elementwise_body(const float* a, const float* b, float* out, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(out + i, op(load(a + i), load(b + i)));
  for (; i < n; ++i) out[i] = op(a[i], b[i]);
}

// out[i * stride] = x[i] as a half (rounded to nearest even) for i < n.
template <class Ops>
STRATA_INLINE void to_halves_body(const float* x, int64_t n, uint16_t* out, size_t stride) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    if (stride == 1) {
      Ops::store_halves(x + i, out + i);
      continue;
    }
    uint16_t halves[kLanes];
    Ops::store_halves(x + i, halves);
    for (int lane = 0; lane < kLanes; ++lane) out[(i + lane) * stride] = halves[lane];
  }
  for (; i < n; ++i) out[i * stride] = sdk::fp32_to_fp16(x[i]);
}

// A kernel set: its entry points flatten their calls, so that the F16C loaders (not always_inline) are inlined.
#define STRATA_FLOAT_KERNELS(set_name, target_attribute, Ops)                                                         \
  namespace set_name {                                                                                                \
  target_attribute [[gnu::flatten]] float dot(const float* a, const float* b, int64_t n) {                            \
    return dot_body<Ops>(a, b, n);                                                                                    \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void dot4(const float* w, size_t stride, const float* x, int64_t n, float* out) { \
    dot4_body(w, stride, x, n, out);                                                                                  \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] float dot_i8(const int8_t* a, const float* b, int64_t n) {                        \
    return dot_body<Ops>(a, b, n);                                                                                    \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void axpy(float a, const float* x, float* y, int64_t n) {                         \
    axpy_body<Ops>(a, x, y, n);                                                                                       \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void axpy_i8(float a, const int8_t* x, float* y, int64_t n) {                     \
    axpy_body<Ops>(a, x, y, n);                                                                                       \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void axpy_rows_f16(const float* a, size_t a_stride, const uint16_t* rows,         \
                                                       int64_t n_rows, float* ys, size_t y_stride, int n_y,           \
                                                       int64_t n) {                                                   \
    axpy_rows_body<Ops>(a, a_stride, rows, n_rows, ys, y_stride, n_y, n);                                             \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void scaled_softmax(float* x, int64_t n, float scale) {                           \
    scaled_softmax_body<Ops>(x, n, scale);                                                                            \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void to_halves(const float* x, int64_t n, uint16_t* out, size_t stride) {         \
    to_halves_body<Ops>(x, n, out, stride);                                                                           \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void swiglu(float* gate, const float* up, int64_t n) {                            \
    swiglu_body<Ops>(gate, up, n);                                                                                    \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void add(const float* a, const float* b, float* out, int64_t n) {                 \
    elementwise_body(a, b, out, n, [](auto p, auto q) { return p + q; });                                             \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void mul(const float* a, const float* b, float* out, int64_t n) {                 \
    elementwise_body(a, b, out, n, [](auto p, auto q) { return p * q; });                                             \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void scale_mul(const float* x, float scale, const float* gain, float* out,        \
                                                   int64_t n) {                                                       \
    elementwise_body(x, gain, out, n, [scale](auto p, auto g) { return p * scale * g; });                             \
  }                                                                                                                   \
  target_attribute [[gnu::flatten]] void dot_blocks_f16(const uint16_t* blocks, int64_t n_rows, const float* xs,      \
                                                        size_t x_stride, int n_x, int64_t n, float* out,              \
                                                        size_t out_stride) {                                          \
    dot_blocks_body<Ops>(blocks, n_rows, xs, x_stride, n_x, n, out, out_stride);                                      \
  }                                                                                                                   \
  constexpr FloatKernels table{&dot,           &dot4,           &dot_i8,         &axpy,   &axpy_i8,                   \
                               &axpy_rows_f16, &dot_blocks_f16, &scaled_softmax, &swiglu, &add,                       \
                               &mul,           &scale_mul,      &to_halves};                                          \
  }

STRATA_FLOAT_KERNELS(baseline, , PortableOps)
#if STRATA_X86
STRATA_FLOAT_KERNELS(avx2, STRATA_TARGET_AVX2, Avx2Ops)
STRATA_FLOAT_KERNELS(avx512, STRATA_TARGET_AVX512, Avx512Ops)
#endif

}  // namespace

const FloatKernels& float_kernels(CpuIsa isa) {
#if STRATA_X86
  switch (isa) {
    case CpuIsa::avx512:
      return avx512::table;
    case CpuIsa::avx2:
      return avx2::table;
    case CpuIsa::scalar:
      break;
  }
#endif
  return baseline::table;
}

}  // namespace strata::cpu
