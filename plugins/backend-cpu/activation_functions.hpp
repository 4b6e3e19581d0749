// The activation functions, shared by the unary op and the expert FFN.
#pragma once

#include <cmath>

namespace strata::cpu {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace strata::cpu
