// CPU dot kernels of IQ3_XXS and IQ3_S rows against Q8_K activations, one token or several at once (a
// scalar variant, AVX2 and AVX-512), and their rows decoded to int8 for the CPU backend's int8 matrix kernels.
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::iq3 {

inline constexpr uint32_t kQ8KTypeId = 15;

extern const sdk::CpuDotVariants kIq3XxsDot;
extern const sdk::CpuDotVariants kIq3SDot;
// Their rows as int8 levels, integer scales per 32 and float scales per 256 (strata_quant_type::cpu_rows_to_int8).
extern const sdk::CpuRowsToInt8Variants kIq3XxsToInt8;
extern const sdk::CpuRowsToInt8Variants kIq3SToInt8;
// The AVX2 kernel of IQ3_S as 4-bit levels (iq3_s_nibbles_cpu.hpp), built from IQ3_S's, so its floats are IQ3_S's.
extern const sdk::CpuDotKernel kIq3SNibblesAvx2;

}  // namespace strata::iq3
