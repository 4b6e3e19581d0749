// CPU dot kernels of the core's weight types: F32, F16 and BF16 rows against F32 activations, Q8_0 rows
// against Q8_0 activations: a scalar variant and AVX2 (an AVX-512 VNNI Q8_0 kernel measured slower than
// AVX2 on one thread, so the avx512 level uses AVX2 here).
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::cpu_kernels {

extern const sdk::CpuDotVariants kF32Dot;
extern const sdk::CpuDotVariants kF16Dot;
extern const sdk::CpuDotVariants kBF16Dot;
extern const sdk::CpuDotVariants kQ8_0Dot;

// Q8_K activation blocks (256 values: float d, int8 q[256], int16 sums of each 16) of n values, n a multiple of
// 256: the value of largest magnitude (the first, among equals) maps to -128, each q is
// min(127, lround(x * -128 / max)), d = max / -128; a block with a non-finite value is zeros with d NaN, an
// all-zero block zeros with d 0. The scalar variant and AVX-512, which gives the same bytes; quantize_q8_k runs
// the best this process's level allows.
void quantize_q8_k_scalar(const float* x, uint8_t* blocks, int64_t n);
void quantize_q8_k_avx512(const float* x, uint8_t* blocks, int64_t n);  // only where the CPU has AVX-512
void quantize_q8_k(const float* x, uint8_t* blocks, int64_t n);

}  // namespace strata::cpu_kernels
