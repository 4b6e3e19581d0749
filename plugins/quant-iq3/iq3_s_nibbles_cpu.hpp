// CPU kernels of IQ3_S as 4-bit levels (iq3_s_nibbles.hpp), the layout a CPU backend may keep IQ3_S weights in
// (quant.h's cpu_repacked, ABI 1.9): Q8_K dot kernels (scalar, AVX2 from iq3_cpu_dot.cpp, AVX-512) and rows as
// int8 levels. A sub-block's levels are 16 contiguous bytes of nibbles: decoding takes a mask and a shift where IQ3_S
// gathers grid points. At every level a block's dot is IQ3_S's, integers and float operations alike, so both
// layouts give a product the same float.
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::iq3 {

extern const sdk::CpuDotVariants kIq3SNibblesDot;
extern const sdk::CpuRowsToInt8Variants kIq3SNibblesToInt8;

}  // namespace strata::iq3
