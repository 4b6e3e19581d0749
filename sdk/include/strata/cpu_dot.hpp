// The shape every CPU dot kernel shares: a per-row function run over a block of rows, one variant per
// SIMD level with the process's choice made once, and the x86 reductions the variants have in common.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "strata/cpu_isa.hpp"

#if STRATA_X86
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics (_mm512_undefined_*, `__m512i __Y = __Y;`) warn as uninitialized once inlined into a
// function with a target attribute (GCC bug 105593, fixed in GCC 13): silenced for the header's lines alone.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif

namespace strata::sdk {

// A row kernel's one-token products do too little work a byte to hide the memory's latency, and the hardware's own
// prefetcher does not run far enough ahead of them: the kernels ask for the block this many bytes on (one token's
// expert products on the development VM: 2048 was the plateau of 512-4096, docs/benchmarks.md).
inline constexpr uintptr_t kCpuPrefetchBytes = 2048;

// Every cache line of the BlockBytes bytes kCpuPrefetchBytes past block, into L1.
template <uintptr_t BlockBytes>
inline void prefetch_ahead(const void* block) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(block) + kCpuPrefetchBytes;
  for (uintptr_t line = ahead & ~uintptr_t{63}; line < ahead + BlockBytes; line += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

// strata_quant_type::cpu_dot_rows.
using CpuDotRowsFn = void (*)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation,
                              float* out);

// strata_quant_type::cpu_dot_rows_multi.
using CpuDotRowsMultiFn = void (*)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                   const void* activations, size_t activation_stride, int64_t n_tokens, float* out,
                                   size_t out_stride);

// One dot product: n values of one weight row against the whole activation row.
using RowDotFn = float (*)(int64_t n, const uint8_t* row, const void* activation);

template <RowDotFn RowDot>
void dot_rows(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation, float* out) {
  const auto* rows = static_cast<const uint8_t*>(weight);
  for (int64_t r = 0; r < n_rows; ++r) out[r] = RowDot(n, rows + static_cast<size_t>(r) * row_bytes, activation);
}

// Kernels built from a row kernel that takes up to kDotTokens tokens at once: sums[t] = dot(row, activation
// row t) for t < n_tokens, activation row t at activations + t * activation_stride, so that the kernel
// decodes each weight block once for all of them. Only plain types cross between these loops (baseline
// code) and the row kernels (one per SIMD level).
inline constexpr int kDotTokens = 16;
using RowDotTokensFn = void (*)(int64_t n, const uint8_t* row, const uint8_t* activations, size_t activation_stride,
                                int n_tokens, float* sums);

template <RowDotTokensFn RowDotTokens>
void dot_rows_multi_by_tokens(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activations,
                              size_t activation_stride, int64_t n_tokens, float* out, size_t out_stride) {
  const auto* rows = static_cast<const uint8_t*>(weight);
  const auto* acts = static_cast<const uint8_t*>(activations);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = rows + static_cast<size_t>(r) * row_bytes;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kDotTokens) {
      const int count = static_cast<int>(n_tokens - t0 < kDotTokens ? n_tokens - t0 : kDotTokens);
      float sums[kDotTokens];
      RowDotTokens(n, row, acts + static_cast<size_t>(t0) * activation_stride, activation_stride, count, sums);
      for (int t = 0; t < count; ++t) out[static_cast<size_t>(t0 + t) * out_stride + r] = sums[t];
    }
  }
}

template <RowDotTokensFn RowDotTokens>
void dot_rows_by_tokens(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation,
                        float* out) {
  const auto* rows = static_cast<const uint8_t*>(weight);
  const auto* act = static_cast<const uint8_t*>(activation);
  for (int64_t r = 0; r < n_rows; ++r) RowDotTokens(n, rows + static_cast<size_t>(r) * row_bytes, act, 0, 1, out + r);
}

// One SIMD level's kernels: rows for one token, and optionally rows for several.
struct CpuDotKernel {
  CpuDotRowsFn rows = nullptr;
  CpuDotRowsMultiFn rows_multi = nullptr;
};

// Both forms from one row kernel.
template <RowDotTokensFn RowDotTokens>
inline constexpr CpuDotKernel kTokensDotKernel{dot_rows_by_tokens<RowDotTokens>,
                                               dot_rows_multi_by_tokens<RowDotTokens>};

// A type's kernels per level; a level without its own (null rows) uses the best one below it.
struct CpuDotVariants {
  CpuDotKernel scalar;
  CpuDotKernel avx2 = {};
  CpuDotKernel avx512 = {};

  const CpuDotKernel& pick_kernel(CpuIsa isa) const {
    if (isa >= CpuIsa::avx512 && avx512.rows != nullptr) return avx512;
    if (isa >= CpuIsa::avx2 && avx2.rows != nullptr) return avx2;
    return scalar;
  }
  CpuDotRowsFn pick(CpuIsa isa) const { return pick_kernel(isa).rows; }
  // Null when the picked level has no multi-token form.
  CpuDotRowsMultiFn pick_multi(CpuIsa isa) const { return pick_kernel(isa).rows_multi; }
};

// A codec's cpu_dot_rows: the variant for this process's level, looked up on the first call.
template <const CpuDotVariants& Variants>
void dispatched_dot_rows(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation,
                         float* out) {
  static const CpuDotRowsFn chosen = Variants.pick(cpu_isa());
  chosen(n, n_rows, weight, row_bytes, activation, out);
}

// A codec's cpu_dot_rows_multi: the level's multi-token kernel, or where it has none its one-token kernel token by
// token (a type may have the multi-token form at its best level only).
template <const CpuDotVariants& Variants>
void dispatched_dot_rows_multi(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activations,
                               size_t activation_stride, int64_t n_tokens, float* out, size_t out_stride) {
  static const CpuDotRowsMultiFn chosen = Variants.pick_multi(cpu_isa());
  if (chosen != nullptr) {
    chosen(n, n_rows, weight, row_bytes, activations, activation_stride, n_tokens, out, out_stride);
    return;
  }
  static const CpuDotRowsFn one_token = Variants.pick(cpu_isa());
  for (int64_t t = 0; t < n_tokens; ++t) {
    one_token(n, n_rows, weight, row_bytes, static_cast<const uint8_t*>(activations) + t * activation_stride,
              out + t * out_stride);
  }
}

// strata_quant_type::cpu_rows_to_int8.
using CpuRowsToInt8Fn = void (*)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                                 int16_t* group_scales, float* block_scales);

// strata_quant_type::cpu_rows_int8_offsets.
using CpuRowsInt8OffsetsFn = void (*)(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes,
                                      int16_t* group_offsets, float* block_offset_scales);

// A type's int8 row decoders per level (the output is the same at every level; a level only decodes faster).
struct CpuRowsToInt8Variants {
  CpuRowsToInt8Fn scalar;
  CpuRowsToInt8Fn avx512 = nullptr;

  CpuRowsToInt8Fn pick(CpuIsa isa) const { return isa >= CpuIsa::avx512 && avx512 != nullptr ? avx512 : scalar; }
};

// A codec's cpu_rows_to_int8: the variant for this process's level, looked up on the first call.
template <const CpuRowsToInt8Variants& Variants>
void dispatched_rows_to_int8(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                             int16_t* group_scales, float* block_scales) {
  static const CpuRowsToInt8Fn chosen = Variants.pick(cpu_isa());
  chosen(n, n_rows, weight, row_bytes, levels, group_scales, block_scales);
}

// The Q8_K activation block (type 15) that k-quant and IQ kernels read: float d, int8 q[256], and the
// int16 sums of each 16 q, so that a per-16 or per-32 constant term costs one multiply.
struct Q8K {
  static constexpr int kValues = 256, kBytes = 292, kValuesOffset = 4, kSumsOffset = 260;
  static constexpr int kSumValues = 16;  // values per sum

  static float scale(const uint8_t* block) {
    float d;
    std::memcpy(&d, block, sizeof d);
    return d;
  }
  static const int8_t* values(const uint8_t* block) { return reinterpret_cast<const int8_t*>(block + kValuesOffset); }
  // The sum of values kSumValues * i .. kSumValues * (i + 1) - 1.
  static int32_t sum16(const uint8_t* block, int i) {
    int16_t sum;
    std::memcpy(&sum, block + kSumsOffset + 2 * i, sizeof sum);
    return sum;
  }
};

#if STRATA_X86

STRATA_TARGET_AVX2 inline float hsum_f32(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

STRATA_TARGET_AVX2 inline int32_t hsum_i32(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

STRATA_TARGET_AVX2 inline int32_t hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

// Products of unsigned bytes u and signed bytes s, summed in fours into 8 int32 lanes. Pairs of products
// are summed in int16 first, so |u * s| pairs must stay below 2^15 (true for levels up to 127 against
// int8 activations other than -128 * 128 pairs).
STRATA_TARGET_AVX2 inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// As dot_u8_s8 but with int16 weights per pair of lanes applied before the sum into int32: one
// sub-block scale per 16 int16 lanes.
STRATA_TARGET_AVX2 inline __m256i scaled_dot_u8_s8(__m256i u, __m256i s, __m256i scales16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scales16);
}

#endif

}  // namespace strata::sdk
