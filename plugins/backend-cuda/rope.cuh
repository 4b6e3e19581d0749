// NEOX rope on the device, shared by the rope_neox op and the attention kernels that fuse it.
#pragma once

namespace strata::cuda {

// cos and sin of pair i's angle at position: position * theta_scale^i built by repeated float
// multiplication, as ggml and the CPU backend build it, so the angles agree exactly; cos and sin by one
// range reduction (sincosf) instead of two: less code in every kernel that rotates.
__device__ inline float2 rope_cos_sin(int position, float theta_scale, int i) {
  float theta = static_cast<float>(position);
  for (int k = 0; k < i; ++k) theta *= theta_scale;
  float2 angle;
  sincosf(theta, &angle.y, &angle.x);
  return angle;
}

// Rotates the pairs (i, i + half) of one head, i < half, the threads thread, thread + threads, ... of a
// team (a block or a warp) taking a pair each.
__device__ inline void rotate_head(float* head, int half, int position, float theta_scale, int thread, int threads) {
  for (int i = thread; i < half; i += threads) {
    const float2 angle = rope_cos_sin(position, theta_scale, i);
    const float x0 = head[i], x1 = head[i + half];
    head[i] = x0 * angle.x - x1 * angle.y;
    head[i + half] = x0 * angle.y + x1 * angle.x;
  }
}

}  // namespace strata::cuda
