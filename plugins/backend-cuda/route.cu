// The router: softmax over each token's expert logits, then the top k, best first, equal probabilities
// keeping the lower expert index first (the CPU backend's order), optionally renormalized. route starts from
// logits; route_experts computes them too, and for a decode step does both in one kernel: the product and
// the choice are two short kernels on the critical path of every layer, and their fixed latency is the cost.
#include <string>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "matmul.hpp"
#include "ops.hpp"
#include "strata/cuda_block_kernels.cuh"

namespace strata::cuda {
namespace {

using sdk::cuda::kWarp;
using sdk::cuda::warp_max;

// route_experts' one kernel: warps per block, each computing one expert's logits (and, in the block that
// finishes last, routing tokens).
constexpr int kRouterWarps = 4;
// The most experts it takes: each routing warp keeps a token's probabilities in shared memory (4 warps x
// 4 KiB). Larger routers take the matmul and route kernels.
constexpr int kMaxRouterExperts = 1024;
// float4s of its weight row a lane loads before waiting for the previous kernel (the norm that writes x):
// 2048 values per warp, the whole row of a 2048-wide router. The rest of a longer row is prefetched into L2
// then and loaded kRouterVectorsInFlight at a time after the wait.
constexpr int kRouterVectorsEarly = 16;
constexpr int kRouterVectorsInFlight = 8;

// Does (p, i) rank before (q, j)? Higher probability first; ties go to the lower index.
__device__ inline bool ranks_before(float p, int i, float q, int j) { return p > q || (p == q && i < j); }

// One token's choice by one warp: softmax of its n_experts logits into probabilities (shared memory of this
// warp, a chosen expert's marked by -1), then n_used rounds of a warp-wide best, then the renormalization.
// The logits are read from L2 (ld.cg): route_experts' last block reads what other blocks of its kernel
// wrote, which this SM's L1 (not coherent with other SMs) may hold stale.
__device__ void route_token(const float* row, int n_experts, int n_used, bool renormalize, float* probabilities,
                            int32_t* token_ids, float* token_weights) {
  const int lane = threadIdx.x % kWarp;
  float max_logit = -INFINITY;
  for (int e = lane; e < n_experts; e += kWarp) max_logit = fmaxf(max_logit, __ldcg(row + e));
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < n_experts; e += kWarp) {
    probabilities[e] = expf(__ldcg(row + e) - max_logit);
    sum += probabilities[e];
  }
  sum = sdk::cuda::warp_sum(sum);
  for (int e = lane; e < n_experts; e += kWarp) probabilities[e] /= sum;
  __syncwarp();

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
      // No expert ranks where the logits hold NaN (best_id stays n_experts, past this warp's probabilities).
      if (best_id < n_experts) probabilities[best_id] = -1.0f;
    }
    chosen_sum += best;
    __syncwarp();
  }
  if (renormalize) {
    for (int j = lane; j < n_used; j += kWarp) token_weights[j] *= 1.0f / chosen_sum;
  }
}

// One warp per token.
__global__ void route_kernel(const float* logits, int n_experts, int n_used, bool renormalize, int32_t* ids,
                             float* weights) {
  sdk::cuda::start_after_previous_kernel();
  extern __shared__ float probabilities[];
  const int token = blockIdx.x;
  route_token(logits + int64_t{token} * n_experts, n_experts, n_used, renormalize, probabilities,
              ids + int64_t{token} * n_used, weights + int64_t{token} * n_used);
}

// sums[t] += w . (float4 i of token t's row of x), for the step's tokens.
__device__ inline void add_products(float4 w, const float4* x, int row_vectors, int i, int n_tokens,
                                    float (&sums)[kMaxMatvecTokens]) {
#pragma unroll
  for (int t = 0; t < kMaxMatvecTokens; ++t) {
    if (t < n_tokens) {
      const float4 v = x[t * row_vectors + i];
      sums[t] += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
    }
  }
}

// logits = router x (an F32 router of n values per row, n a multiple of 4), a warp per expert row and all
// tokens; then the block that finishes last routes every token, a warp per token. blocks_done counts the
// finished blocks and is 0 again when the kernel ends, for the next launch (a step graph replays this one).
__global__ void __launch_bounds__(kRouterWarps* kWarp)
    route_experts_kernel(const float* router, int n, int n_experts, const float* x, int n_tokens, int n_used,
                         bool renormalize, float* logits, int32_t* ids, float* weights, unsigned* blocks_done) {
  sdk::cuda::let_next_kernel_launch();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int expert = blockIdx.x * kRouterWarps + warp;
  const bool has_row = expert < n_experts;
  const int row_vectors = n / 4;
  const float4* row = reinterpret_cast<const float4*>(router) + int64_t{expert} * row_vectors;
  // Weights only until the wait (no kernel writes them): the row's first part into registers, the rest into L2.
  float4 early[kRouterVectorsEarly];
#pragma unroll
  for (int u = 0; u < kRouterVectorsEarly; ++u) {
    const int i = lane + u * kWarp;
    early[u] = has_row && i < row_vectors ? row[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  constexpr int kEarlyVectors = kRouterVectorsEarly * kWarp;
  if (has_row && row_vectors > kEarlyVectors) {
    sdk::cuda::prefetch_lines(reinterpret_cast<const uint8_t*>(row + kEarlyVectors),
                              (row_vectors - kEarlyVectors) * sizeof(float4), lane, kWarp);
  }
  sdk::cuda::wait_for_previous_kernel();

  if (has_row) {
    const auto* x_vectors = reinterpret_cast<const float4*>(x);
    float sums[kMaxMatvecTokens] = {};
#pragma unroll
    for (int u = 0; u < kRouterVectorsEarly; ++u) {
      const int i = lane + u * kWarp;
      if (i < row_vectors) add_products(early[u], x_vectors, row_vectors, i, n_tokens, sums);
    }
    for (int base = kEarlyVectors + lane; base < row_vectors; base += kRouterVectorsInFlight * kWarp) {
      float4 w[kRouterVectorsInFlight];
#pragma unroll
      for (int u = 0; u < kRouterVectorsInFlight; ++u) w[u] = row[min(base + u * kWarp, row_vectors - 1)];
#pragma unroll
      for (int u = 0; u < kRouterVectorsInFlight; ++u) {
        const int i = base + u * kWarp;
        if (i >= row_vectors) break;
        add_products(w[u], x_vectors, row_vectors, i, n_tokens, sums);
      }
    }
    sdk::cuda::store_token_sums(sums, n_tokens, n_experts, expert, lane, logits);
  }

  // The last block to arrive sees every block's logits: each thread's stores are fenced before its block
  // counts itself done, and the last block fences again before it reads them.
  __shared__ bool last_block;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(blocks_done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  extern __shared__ float probabilities[];  // kRouterWarps x n_experts
  for (int t = warp; t < n_tokens; t += kRouterWarps) {
    route_token(logits + int64_t{t} * n_experts, n_experts, n_used, renormalize, probabilities + warp * n_experts,
                ids + int64_t{t} * n_used, weights + int64_t{t} * n_used);
  }
  if (threadIdx.x == 0) *blocks_done = 0;
}

// Whether route_experts' one kernel takes this router and step (it reads rows as float4).
bool fits_one_kernel(const strata_weight& router, const float* x, int32_t n_tokens, int32_t n_experts) {
  return n_tokens >= 1 && n_tokens <= kMaxMatvecTokens && router.type->type_id == kTypeF32 && router.ne0 % 4 == 0 &&
         n_experts <= kMaxRouterExperts && sdk::cuda::is_16_byte_aligned(router.matrix(0)) &&
         sdk::cuda::is_16_byte_aligned(x);
}

}  // namespace

void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,
           int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  const sdk::RouteOperands operands = sdk::route_operands(logits, n_tokens, n_experts, n_used, routing, ids, weights);
  if (n_tokens == 0) return;
  sdk::cuda::launch_after_previous(route_kernel, n_tokens, kWarp, n_experts * sizeof(float), instance.stream,
                                   operands.logits, n_experts, n_used, routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM,
                                   operands.ids, operands.weights);
  check_launch("route");
}

namespace {

// The current lane's count for route_experts_kernel, made at the lane's first launch rather than with the
// backend, whose budget may not yet hold a byte (a reserve the weights then fail against, naming their size).
// Zeroed on the lane's stream: in a step graph's capture that is a node before the kernel, which leaves it 0.
unsigned* router_blocks_done(strata_backend& instance) {
  DeviceAllocation& counter = instance.lane().router_blocks_done;
  if (counter.get() == nullptr) {
    counter = instance.budget.allocate(sizeof(unsigned), "route_experts' block count");
    check(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned), instance.stream), "zeroing route_experts' block count");
  }
  return counter.as<unsigned>();
}

}  // namespace

void route_experts(strata_backend* backend, const strata_buffer* x, const strata_weight* router, int32_t n_tokens,
                   int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids,
                   strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(router, "route_experts router");
  sdk::check_router(weight, n_experts);
  const sdk::MatmulOperands product = sdk::matmul_operands(weight, 0, x, n_tokens, logits);
  if (!fits_one_kernel(weight, product.x, n_tokens, n_experts)) {
    matmul(backend, router, 0, x, n_tokens, nullptr, logits);
    route(backend, logits, n_tokens, n_experts, n_used, routing, ids, weights);
    return;
  }
  instance.take_next_lane();
  const sdk::RouteOperands choice = sdk::route_operands(logits, n_tokens, n_experts, n_used, routing, ids, weights);
  sdk::cuda::launch_after_previous(route_experts_kernel, blocks_for(n_experts, kRouterWarps), kRouterWarps * kWarp,
                                   kRouterWarps * n_experts * sizeof(float), instance.stream,
                                   reinterpret_cast<const float*>(weight.matrix(0)), static_cast<int>(weight.ne0),
                                   n_experts, product.x, n_tokens, n_used, routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM,
                                   product.out, choice.ids, choice.weights,
                                   router_blocks_done(instance));
  check_launch("route_experts");
}

}  // namespace strata::cuda
