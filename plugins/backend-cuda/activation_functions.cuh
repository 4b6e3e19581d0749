// The activation functions, shared by the unary op and the expert FFN (as the CPU backend's, in float).
#pragma once

namespace strata::cuda {

__device__ inline float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace strata::cuda
