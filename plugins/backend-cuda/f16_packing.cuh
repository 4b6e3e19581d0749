// Floats to the f16 the tensor-core GEMMs read, eight at a time: the glue kernels around the GEMMs are bound
// by memory, so each thread moves 32 bytes in and 16 out rather than one value.
#pragma once

#include <cuda_fp16.h>

namespace strata::cuda {

// a then b rounded to f16 (to nearest even), as one 16-byte store.
__device__ inline uint4 eight_halves(float4 a, float4 b) {
  __align__(16) const __half2 halves[4] = {__floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w),
                                           __floats2half2_rn(b.x, b.y), __floats2half2_rn(b.z, b.w)};
  return *reinterpret_cast<const uint4*>(halves);
}

}  // namespace strata::cuda
