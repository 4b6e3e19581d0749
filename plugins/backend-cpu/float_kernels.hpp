// The hot float loops of every op (dot products and axpy over float and int8 rows, attention over f16 rows), compiled
// once per instruction set and picked at run time through this table.
#pragma once

#include <cstddef>
#include <cstdint>

#include "isa.hpp"

namespace strata::cpu {

// Positions per block in dot_blocks_f16's layout: one vector of floats on every level.
inline constexpr int32_t kBlockLanes = 16;

struct FloatKernels {
  float (*dot)(const float* a, const float* b, int64_t n);
  // out[r] = dot(w + r * w_stride, x) for the four rows r < 4: x is loaded once for all four.
  void (*dot4)(const float* w, size_t w_stride, const float* x, int64_t n, float* out);
  float (*dot_i8)(const int8_t* a, const float* b, int64_t n);
  // y += a * x
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  void (*axpy_i8)(float a, const int8_t* x, float* y, int64_t n);
  // ys + v * y_stride += a[v * a_stride + j] * (rows + j * n) for j < n_rows (in that order), v < n_y.
  void (*axpy_rows_f16)(const float* a, size_t a_stride, const uint16_t* rows, int64_t n_rows, float* ys,
                        size_t y_stride, int n_y, int64_t n);
  // out[v * out_stride + j] = dot(row j, xs + v * x_stride) for j < n_rows, v < n_x, over rows of n halves stored in
  // blocks of kBlockLanes rows, value by value (blocks[b][i][lane] is value i of row b * kBlockLanes + lane); a last
  // partial block's other outputs are not written.
  void (*dot_blocks_f16)(const uint16_t* blocks, int64_t n_rows, const float* xs, size_t x_stride, int n_x, int64_t n,
                         float* out, size_t out_stride);
  // x = softmax(x * scale) over n values, the maximum subtracted first.
  void (*scaled_softmax)(float* x, int64_t n, float scale);
  // gate = silu(gate) * up, the expert FFN's SwiGLU (e^ within 2 ulp, as the softmax's)
  void (*swiglu)(float* gate, const float* up, int64_t n);
  // out = a + b, out = a * b (out may be a or b)
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*mul)(const float* a, const float* b, float* out, int64_t n);
  // out = x * scale * gain, in that order (out may be x): a normalized row
  void (*scale_mul)(const float* x, float scale, const float* gain, float* out, int64_t n);
  // out[i * stride] = x[i] as a half (rounded to nearest even, as sdk::fp32_to_fp16) for i < n
  void (*to_halves)(const float* x, int64_t n, uint16_t* out, size_t stride);
};

const FloatKernels& float_kernels(CpuIsa isa);

}  // namespace strata::cpu
