// CPU dot kernels of Q4_K, Q5_K and Q6_K rows against Q8_K activations (a scalar variant, AVX2, and AVX-512
// for Q6_K).
#pragma once

#include "strata/cpu_dot.hpp"

namespace strata::quant_k {

inline constexpr uint32_t kQ8KTypeId = 15;

extern const sdk::CpuDotVariants kQ4KDot;
extern const sdk::CpuDotVariants kQ5KDot;
extern const sdk::CpuDotVariants kQ6KDot;

}  // namespace strata::quant_k
