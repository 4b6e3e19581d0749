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

}  // namespace strata::cpu_kernels
