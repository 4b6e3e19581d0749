// CPU dot kernels of IQ3_XXS and IQ3_S rows (and IQ3_S as 4-bit levels) against Q8_K activations, one token or several
// at once (a scalar variant, AVX2 and AVX-512), and their rows decoded to int8 for the CPU backend's int8 matrix
// kernels.
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::iq3 {

inline constexpr uint32_t kQ8KTypeId = 15;

extern const sdk::CpuDotVariants kIq3XxsDot;
extern const sdk::CpuDotVariants kIq3SDot;
// Their rows as int8 levels, integer scales per 32 and float scales per 256 (strata_quant_type::cpu_rows_to_int8).
extern const sdk::CpuRowsToInt8Variants kIq3XxsToInt8;
extern const sdk::CpuRowsToInt8Variants kIq3SToInt8;
// IQ3_S as 4-bit levels (iq3_s_nibbles.hpp), the layout a CPU backend may keep IQ3_S weights in (quant.h's
// cpu_repacked, ABI 1.9): decoding takes a mask and a shift where IQ3_S gathers grid points, and at every level a
// block's dot is IQ3_S's, integers and float operations alike, so both layouts give a product the same float.
extern const sdk::CpuDotVariants kIq3SNibblesDot;
extern const sdk::CpuRowsToInt8Variants kIq3SNibblesToInt8;

}  // namespace strata::iq3
