// CPU dot kernels of IQ3_XXS and IQ3_S rows against Q8_K activations, one token or several at once (a
// scalar variant, AVX2 and AVX-512).
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::iq3 {

inline constexpr uint32_t kQ8KTypeId = 15;

extern const sdk::CpuDotVariants kIq3XxsDot;
extern const sdk::CpuDotVariants kIq3SDot;

}  // namespace strata::iq3
