// The router: softmax over each token's expert logits, then the top k, best first, equal probabilities
// keeping the lower expert index first (the CPU backend's order), optionally renormalized.
#include <string>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"
#include "strata/cuda_block_kernels.cuh"

namespace strata::cuda {
namespace {

using sdk::cuda::kWarp;
using sdk::cuda::warp_max;

// Does (p, i) rank before (q, j)? Higher probability first; ties go to the lower index.
__device__ inline bool ranks_before(float p, int i, float q, int j) { return p > q || (p == q && i < j); }

// One warp per token; the probabilities live in shared memory, a chosen expert's marked by a negative id.
__global__ void route_kernel(const float* logits, int n_experts, int n_used, bool renormalize, int32_t* ids,
                             float* weights) {
  sdk::cuda::start_after_previous_kernel();
  extern __shared__ float probabilities[];
  const int token = blockIdx.x, lane = threadIdx.x;
  const float* row = logits + int64_t{token} * n_experts;
  float max_logit = -INFINITY;
  for (int e = lane; e < n_experts; e += kWarp) max_logit = fmaxf(max_logit, row[e]);
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < n_experts; e += kWarp) {
    probabilities[e] = expf(row[e] - max_logit);
    sum += probabilities[e];
  }
  sum = sdk::cuda::warp_sum(sum);
  for (int e = lane; e < n_experts; e += kWarp) probabilities[e] /= sum;
  __syncwarp();

  int32_t* token_ids = ids + int64_t{token} * n_used;
  float* token_weights = weights + int64_t{token} * n_used;
  float chosen_sum = 0.0f;
  for (int j = 0; j < n_used; ++j) {
    float best = -1.0f;
    int best_id = n_experts;
    for (int e = lane; e < n_experts; e += kWarp) {
      const float p = probabilities[e];
      if (p >= 0.0f && ranks_before(p, e, best, best_id)) best = p, best_id = e;
    }
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (ranks_before(other, other_id, best, best_id)) best = other, best_id = other_id;
    }
    if (lane == 0) {
      token_ids[j] = best_id;
      token_weights[j] = best;
      probabilities[best_id] = -1.0f;
    }
    chosen_sum += best;
    __syncwarp();
  }
  if (renormalize) {
    for (int j = lane; j < n_used; j += kWarp) token_weights[j] *= 1.0f / chosen_sum;
  }
}

}  // namespace

void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,
           int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  sdk::check_route_args(n_tokens, n_experts, n_used, routing);
  const float* logit_values = floats(logits, int64_t{n_tokens} * n_experts, "route logits");
  int32_t* id_values = elements<int32_t>(ids, int64_t{n_tokens} * n_used, "route ids");
  float* weight_values = floats(weights, int64_t{n_tokens} * n_used, "route weights");
  if (n_tokens == 0) return;
  sdk::cuda::launch_after_previous(route_kernel, n_tokens, kWarp, n_experts * sizeof(float), instance.stream,
                                   logit_values, n_experts, n_used, routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM,
                                   id_values, weight_values);
  check_launch("route");
}

}  // namespace strata::cuda
