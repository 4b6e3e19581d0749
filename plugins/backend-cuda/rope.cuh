// The rotation angle of NEOX rope, shared by the rope_neox op and the attention kernels that fuse it.
#pragma once

namespace strata::cuda {

// cos and sin of pair i's angle at position: position * theta_scale^i built by repeated float
// multiplication, as ggml and the CPU backend build it, so the angles agree exactly.
__device__ inline float2 rope_cos_sin(int position, float theta_scale, int i) {
  float theta = static_cast<float>(position);
  for (int k = 0; k < i; ++k) theta *= theta_scale;
  return make_float2(cosf(theta), sinf(theta));
}

}  // namespace strata::cuda
