// The router: softmax over each token's expert logits, then the top k, best first, equal probabilities
// keeping the lower expert index first (the CPU backend's order), optionally renormalized. route starts from
// logits; route_experts computes them too, and for a decode step does both in one kernel: the product and
// the choice are two short kernels on the critical path of every layer, and their fixed latency is the cost.
#include <cooperative_groups.h>

#include <string>
#include <utility>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "matmul.hpp"
#include "normed_input.hpp"
#include "ops.hpp"
#include "strata/cuda/block_kernels.cuh"

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

// A token's n_experts logits into shared memory of one warp, read from L2 (ld.cg): route_experts' last block
// reads what other blocks of its kernel wrote, which this SM's L1 (not coherent with other SMs) may hold stale.
__device__ void logits_to_shared(const float* row, int n_experts, float* to) {
  for (int e = threadIdx.x % kWarp; e < n_experts; e += kWarp) to[e] = __ldcg(row + e);
  __syncwarp();
}

// The largest (kLargest) or the smallest of the warp's values: one redux.sync from sm_80, a shuffle tree before.
template <bool kLargest>
__device__ inline unsigned warp_extreme(unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return kLargest ? __reduce_max_sync(0xffffffffu, value) : __reduce_min_sync(0xffffffffu, value);
#else
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const unsigned other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = kLargest ? max(value, other) : min(value, other);
  }
  return value;
#endif
}

// One token's choice by one warp, in place on its logits in shared memory: softmax into probabilities (a
// chosen expert's then marked by -1), n_used rounds of a warp-wide best, then the renormalization. A round
// takes each lane's best (ranks_before), then the warp's highest probability and the lowest expert holding
// it: two reductions of 32-bit keys instead of a 10-shuffle tree of (probability, id) pairs, the routing
// being 8 such rounds on the critical path of every layer. Probabilities are >= 0, so their bits order as
// unsigned integers; key 0 means the lane has none left (all chosen, or NaN logits).
__device__ void route_token(float* probabilities, int n_experts, int n_used, bool renormalize, int32_t* token_ids,
                            float* token_weights) {
  const int lane = threadIdx.x % kWarp;
  float max_logit = -INFINITY;
  for (int e = lane; e < n_experts; e += kWarp) max_logit = fmaxf(max_logit, probabilities[e]);
  max_logit = warp_max(max_logit);
  float sum = 0.0f;
  for (int e = lane; e < n_experts; e += kWarp) {
    probabilities[e] = expf(probabilities[e] - max_logit);
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
    const unsigned key = best > 0.0f ? __float_as_uint(best) + 1u : best == 0.0f ? 1u : 0u;  // -0 as +0
    const unsigned top = warp_extreme<true>(key);
    best_id =
        static_cast<int>(warp_extreme<false>(top != 0u && key == top ? static_cast<unsigned>(best_id) : n_experts));
    best = top != 0u ? __uint_as_float(top - 1u) : -1.0f;
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
  logits_to_shared(logits + int64_t{token} * n_experts, n_experts, probabilities);
  route_token(probabilities, n_experts, n_used, renormalize, ids + int64_t{token} * n_used,
              weights + int64_t{token} * n_used);
}

// sums[t] += w . (float4 i of token t's row of x), for the step's tokens (at most kTokens).
template <int kTokens>
__device__ inline void add_products(float4 w, const float4* x, int row_vectors, int i, int n_tokens,
                                    float (&sums)[kTokens]) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t < n_tokens) {
      const float4 v = x[t * row_vectors + i];
      sums[t] += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
    }
  }
}

constexpr int kEarlyVectors = kRouterVectorsEarly * kWarp;

// A warp's router row (row_vectors float4s) as far as a kernel may take it before it waits for the previous
// kernel (no kernel writes weights): its first part into registers (early), the rest into L2.
__device__ inline void start_router_row(const float4* row, int row_vectors, bool has_row,
                                        float4 (&early)[kRouterVectorsEarly]) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int u = 0; u < kRouterVectorsEarly; ++u) {
    const int i = lane + u * kWarp;
    early[u] = has_row && i < row_vectors ? row[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if (has_row && row_vectors > kEarlyVectors) {
    sdk::cuda::prefetch_lines(reinterpret_cast<const uint8_t*>(row + kEarlyVectors),
                              (row_vectors - kEarlyVectors) * sizeof(float4), lane, kWarp);
  }
}

// A warp's logits of its router row for the step's tokens (x: their rows of row_vectors float4s, at most
// kTokens), stored at (token, expert) of each out (one or two of them, the other nullptr), a row of n_experts
// per token.
template <int kTokens>
__device__ inline void router_row_logits(const float4* row, int row_vectors, const float4 (&early)[kRouterVectorsEarly],
                                         const float4* x, int n_tokens, int n_experts, int expert, float* out,
                                         float* out2) {
  const int lane = threadIdx.x % kWarp;
  float sums[kTokens] = {};
#pragma unroll
  for (int u = 0; u < kRouterVectorsEarly; ++u) {
    const int i = lane + u * kWarp;
    if (i < row_vectors) add_products(early[u], x, row_vectors, i, n_tokens, sums);
  }
  for (int base = kEarlyVectors + lane; base < row_vectors; base += kRouterVectorsInFlight * kWarp) {
    float4 w[kRouterVectorsInFlight];
#pragma unroll
    for (int u = 0; u < kRouterVectorsInFlight; ++u) w[u] = row[min(base + u * kWarp, row_vectors - 1)];
#pragma unroll
    for (int u = 0; u < kRouterVectorsInFlight; ++u) {
      const int i = base + u * kWarp;
      if (i >= row_vectors) break;
      add_products(w[u], x, row_vectors, i, n_tokens, sums);
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= n_tokens) break;
    const float sum = sdk::cuda::warp_sum(sums[t]);
    if (lane != 0) continue;
    out[t * n_experts + expert] = sum;
    if (out2 != nullptr) out2[t * n_experts + expert] = sum;
  }
}

// logits = router x (an F32 router of n values per row, n a multiple of 4), a warp per expert row and all
// tokens; then the block that finishes last routes every token, a warp per token. blocks_done counts the
// finished blocks and is 0 again when the kernel ends, for the next launch (a step graph replays this one).
// The Hopper path is route_experts_cluster_kernel below; this one serves GPUs without thread block clusters
// and steps whose activations do not fit its shared memory.
__global__ void __launch_bounds__(kRouterWarps* kWarp)
    route_experts_kernel(const float* router, int n, int n_experts, const float* x, int n_tokens, int n_used,
                         bool renormalize, float* logits, int32_t* ids, float* weights, unsigned* blocks_done) {
  sdk::cuda::let_next_kernel_launch();
  const int warp = threadIdx.x / kWarp;
  const int expert = blockIdx.x * kRouterWarps + warp;
  const bool has_row = expert < n_experts;
  const int row_vectors = n / 4;
  const float4* row = reinterpret_cast<const float4*>(router) + int64_t{expert} * row_vectors;
  float4 early[kRouterVectorsEarly];
  start_router_row(row, row_vectors, has_row, early);
  sdk::cuda::wait_for_previous_kernel();
  if (has_row) {
    router_row_logits<kMaxMatvecTokens>(row, row_vectors, early, reinterpret_cast<const float4*>(x), n_tokens,
                                        n_experts, expert, logits, nullptr);
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
    float* mine = probabilities + warp * n_experts;
    logits_to_shared(logits + int64_t{t} * n_experts, n_experts, mine);
    route_token(mine, n_experts, n_used, renormalize, ids + int64_t{t} * n_used, weights + int64_t{t} * n_used);
  }
  if (threadIdx.x == 0) *blocks_done = 0;
}

// The Hopper path of route_experts: one cluster of kClusterBlocks blocks of kClusterWarps warps, a warp per
// expert row (128 rows at once, a warp takes every 128th). 16 blocks is past the portable cluster size (8),
// which H100/H200 allow when asked (cluster_kernel_ready): 8 blocks of 16 warps at 140 registers a thread
// would each need an SM's whole register file, so they could not start beside the kernels still running
// before them, and their early loads would overlap nothing. With more than 128 experts a warp's later rows
// go to L2 before the wait too. Each block first
// copies the step's x to its shared memory; the warps write their logits into the shared memory of the
// cluster's first block (distributed shared memory) as well as to logits, and after one cluster barrier that
// block's warps route the tokens in place there, a warp per token. No fence, no block counter and no trip of
// the logits through L2: what the last-block scheme above pays on the critical path of every layer.
// kTokens is the most tokens an instance takes: decode steps of one token take an instance of a third of the
// code (28 KB of sm_90 code instead of 73 with 8 guarded tokens in every loop), whose instructions a step
// fetches afresh in every layer. With norm.gain (route_experts_normed) x is the residual stream, which every
// block normalizes itself instead of copying (sdk::cuda::normalize_rows), each block writing its share of
// the sum and, where asked, of the norm's output with its 8-bit copy (the expert kernels read it next).
constexpr int kClusterBlocks = 16;
constexpr int kClusterWarps = 8;

// Where route_experts_cluster_kernel puts the norm of a normed input besides its shared memory (all NULL for
// none; levels and scales in strata_buffer's 8-bit layout).
struct NormOutputs {
  float* values;
  int8_t* levels;
  float* scales;
};

template <int kTokens>
__global__ void __launch_bounds__(kClusterWarps* kWarp)
    route_experts_cluster_kernel(const float* router, int n, int n_experts, const float* x, sdk::cuda::NormedRows norm,
                                 NormOutputs normed, int n_tokens, int n_used, bool renormalize, float* logits,
                                 int32_t* ids, float* weights) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  // Another block's shared memory may be written only once it is known to run: this arrival, waited for
  // after x is staged, says so for every block of the cluster.
  auto arrival = cluster.barrier_arrive();
  sdk::cuda::let_next_kernel_launch();
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, row_vectors = n / 4;
  const auto* router_rows = reinterpret_cast<const float4*>(router);
  const int first_expert = static_cast<int>(cluster.block_rank()) * kClusterWarps + warp;
  constexpr int kRowsAtOnce = kClusterBlocks * kClusterWarps;
  float4 early[kRouterVectorsEarly];
  start_router_row(router_rows + int64_t{first_expert} * row_vectors, row_vectors, first_expert < n_experts, early);
  for (int expert = first_expert + kRowsAtOnce; expert < n_experts; expert += kRowsAtOnce) {
    sdk::cuda::prefetch_lines(reinterpret_cast<const uint8_t*>(router_rows + int64_t{expert} * row_vectors),
                              row_vectors * sizeof(float4), lane, kWarp);
  }
  const sdk::cuda::NormGains gains =
      norm.gain != nullptr ? sdk::cuda::load_norm_gains(norm.gain, n) : sdk::cuda::NormGains{};
  sdk::cuda::wait_for_previous_kernel();

  extern __shared__ float4 step_x[];  // n_tokens x row_vectors, then (read in the first block) the logits
  if (norm.gain == nullptr) {
    for (int i = threadIdx.x; i < n_tokens * row_vectors; i += blockDim.x)
      step_x[i] = reinterpret_cast<const float4*>(x)[i];
  } else {
    const int rank = static_cast<int>(cluster.block_rank()), eights = n / 8;
    const int share_first = rank * eights / kClusterBlocks, share_end = (rank + 1) * eights / kClusterBlocks;
    sdk::cuda::normalize_rows<kTokens>(
        x, norm, gains, n_tokens, n, share_first, share_end, [&](int row, int eight, float4 a, float4 b, float amax) {
          float4* to = step_x + row * row_vectors + 2 * eight;
          to[0] = a, to[1] = b;
          if (normed.values == nullptr || eight < share_first || eight >= share_end) return;
          auto* values = reinterpret_cast<float4*>(normed.values + int64_t{row} * n) + 2 * eight;
          values[0] = a, values[1] = b;
          if (normed.levels != nullptr) {
            sdk::cuda::store_rounded_eight(normed.levels, normed.scales, n, row, eight, a, b, amax);
          }
        });
  }
  __syncthreads();
  cluster.barrier_wait(std::move(arrival));
  float* own_logits = reinterpret_cast<float*>(step_x + n_tokens * row_vectors);
  float* first_block_logits = cluster.map_shared_rank(own_logits, 0);
  for (int expert = first_expert; expert < n_experts; expert += kRowsAtOnce) {
    const float4* row = router_rows + int64_t{expert} * row_vectors;
    if (expert != first_expert) start_router_row(row, row_vectors, true, early);
    router_row_logits<kTokens>(row, row_vectors, early, step_x, n_tokens, n_experts, expert, first_block_logits,
                               logits);
  }
  cluster.sync();  // the logits are in the first block's shared memory
  if (cluster.block_rank() != 0) return;
  for (int t = warp; t < n_tokens; t += kClusterWarps) {
    route_token(own_logits + t * n_experts, n_experts, n_used, renormalize, ids + int64_t{t} * n_used,
                weights + int64_t{t} * n_used);
  }
#endif
}

// Shared bytes of route_experts_cluster_kernel for a step: its tokens' x, then their logits.
size_t cluster_shared_bytes(int64_t n, int32_t n_tokens, int32_t n_experts) {
  return static_cast<size_t>(n_tokens) * static_cast<size_t>(n + n_experts) * sizeof(float);
}

// Whether this device runs route_experts_cluster_kernel: built for it (from sm_90 PTX or later) and able
// to hold a cluster of kClusterBlocks with the most shared memory a step may give it. Asked once per instance
// and device.
template <int kTokens>
bool cluster_kernel_ready() {
  const auto* kernel = reinterpret_cast<const void*>(route_experts_cluster_kernel<kTokens>);
  if (!sdk::cuda::kernel_waits_for_previous(kernel)) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  return sdk::cuda::asked_once<std::pair<const void*, int>, bool>({kernel, device}, [kernel] {
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {kClusterBlocks, 1, 1};
    cudaLaunchConfig_t config{};
    config.gridDim = kClusterBlocks;
    config.blockDim = kClusterWarps * kWarp;
    config.dynamicSmemBytes = sdk::cuda::kQ8MaxSharedBytes - sdk::cuda::kernel_attributes(kernel).sharedSizeBytes;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0;
    const bool ready = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
                       cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) == cudaSuccess && clusters >= 1;
    (void)cudaGetLastError();  // a refusal is an answer, not an error for a later launch
    return ready;
  });
}

// Whether the cluster kernel takes a step that fits_one_kernel: a device that runs it, and x and logits
// within the 48 KiB a block gets without opting in, next to the kernel's static shared memory (a decode
// step of a 2048-wide model: 8.5 KiB).
template <int kTokens>
bool fits_cluster_kernel(int64_t n, int32_t n_tokens, int32_t n_experts) {
  return sdk::cuda::fits_shared_memory(reinterpret_cast<const void*>(route_experts_cluster_kernel<kTokens>),
                                       cluster_shared_bytes(n, n_tokens, n_experts)) &&
         cluster_kernel_ready<kTokens>();
}

// route_experts_cluster_kernel for the step's tokens (as many as kTokens) of an F32 router of n values per
// row, if it takes the step (and, for a normed input, rows that normalize_rows holds); whether it did.
template <int kTokens>
bool launch_cluster_kernel(cudaStream_t stream, const float* router, int64_t n, const sdk::MatmulOperands& product,
                           const sdk::cuda::NormedRows& norm, const NormOutputs& normed, int32_t n_tokens,
                           int32_t n_experts, int32_t n_used, bool renormalize, const sdk::RouteOperands& choice) {
  if (!fits_cluster_kernel<kTokens>(n, n_tokens, n_experts)) return false;
  if (norm.gain != nullptr && !sdk::cuda::fits_normalize_rows(n, kClusterWarps * kWarp)) return false;
  sdk::cuda::launch_after_previous_in_clusters(kClusterBlocks, route_experts_cluster_kernel<kTokens>, kClusterBlocks,
                                               kClusterWarps * kWarp, cluster_shared_bytes(n, n_tokens, n_experts),
                                               stream, router, static_cast<int>(n), n_experts, product.x, norm, normed,
                                               n_tokens, n_used, renormalize, product.out, choice.ids, choice.weights);
  check_launch("route_experts");
  return true;
}

// Whether route_experts' one kernel takes this router and step (it reads rows as float4).
bool fits_one_kernel(const strata_weight& router, const float* x, int32_t n_tokens, int32_t n_experts) {
  return n_tokens >= 1 && n_tokens <= kMaxMatvecTokens && router.type->type_id == kTypeF32 && router.ne0 % 4 == 0 &&
         n_experts <= kMaxRouterExperts && sdk::cuda::is_16_byte_aligned(router.matrix(0)) &&
         sdk::cuda::is_16_byte_aligned(x);
}

}  // namespace

void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts, int32_t n_used,
           int32_t routing, strata_buffer* ids, strata_buffer* weights) {
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

namespace {

// route_experts on the current lane, for x (float rows, or a normed input's residual stream when norm.gain is
// set). false where the step takes neither of its one-kernel paths with a normed input, which the caller then
// normalizes first; with plain rows, route_experts falls back to the product and the route op.
bool route_on_lane(strata_backend& instance, const strata_weight& weight, const float* x_values,
                   const sdk::cuda::NormedRows& norm, const NormOutputs& normed, int32_t n_tokens, int32_t n_experts,
                   int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids, strata_buffer* weights) {
  const bool from_residual = norm.gain != nullptr;
  float* logit_values = floats(logits, n_tokens * n_experts, "route_experts logits");
  if (!fits_one_kernel(weight, x_values, n_tokens, n_experts)) {
    if (from_residual) return false;
    multiply(instance, weight, 0, x_values, n_tokens, logit_values);
    route(&instance, logits, n_tokens, n_experts, n_used, routing, ids, weights);
    return true;
  }
  const sdk::RouteOperands choice = sdk::route_operands(logits, n_tokens, n_experts, n_used, routing, ids, weights);
  const auto* router_values = reinterpret_cast<const float*>(weight.matrix(0));
  const bool renormalize = routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM;
  const auto launch_cluster = n_tokens == 1 ? launch_cluster_kernel<1> : launch_cluster_kernel<kMaxMatvecTokens>;
  if (launch_cluster(instance.stream, router_values, weight.ne0, {x_values, logit_values}, norm, normed, n_tokens,
                     n_experts, n_used, renormalize, choice)) {
    return true;
  }
  if (from_residual) return false;
  sdk::cuda::launch_after_previous(route_experts_kernel, blocks_for(n_experts, kRouterWarps), kRouterWarps * kWarp,
                                   kRouterWarps * n_experts * sizeof(float), instance.stream, router_values,
                                   static_cast<int>(weight.ne0), n_experts, x_values, n_tokens, n_used, renormalize,
                                   logit_values, choice.ids, choice.weights, router_blocks_done(instance));
  check_launch("route_experts");
  return true;
}

}  // namespace

void route_experts(strata_backend* backend, const strata_buffer* x, const strata_weight* router, int32_t n_tokens,
                   int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids,
                   strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(router, "route_experts router");
  sdk::check_router(weight, n_experts);
  const sdk::MatmulOperands product = sdk::matmul_operands(weight, 0, x, n_tokens, logits);
  instance.take_next_lane();
  instance.weight_writes.await(weight.written, instance.stream);
  route_on_lane(instance, weight, product.x, {}, {}, n_tokens, n_experts, n_used, routing, logits, ids, weights);
}

void route_experts_normed(strata_backend* backend, const strata_normed_input* in, const strata_weight* router,
                          int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits,
                          strata_buffer* ids, strata_buffer* weights) {
  auto& instance = deref(backend, "backend");
  const auto& weight = deref(router, "route_experts_normed router");
  sdk::check_router(weight, n_experts);
  const auto width = static_cast<int32_t>(weight.ne0);
  const NormedInput input = normed_input(in, n_tokens, width, "route_experts_normed");
  for (const strata_buffer* output : {logits, ids, weights})
    sdk::check_normed_output(in, output, "route_experts_normed");
  instance.take_next_lane();
  instance.weight_writes.await(weight.written, instance.stream);
  if (n_tokens == 0) return;
  NormOutputs normed{input.rows.normed, nullptr, nullptr};
  const bool round = input.normed != nullptr && n_tokens <= kMaxMatvecTokens && width % 32 == 0;
  if (round) {
    input.normed->allocate_rounded(instance.budget);
    normed.levels = input.normed->rounded_levels(), normed.scales = input.normed->rounded_scales();
  }
  const sdk::cuda::NormedRows norm{input.rows.y, input.gain, input.eps, input.rows.sum};
  if (route_on_lane(instance, weight, input.rows.x, norm, normed, n_tokens, n_experts, n_used, routing, logits, ids,
                    weights)) {
    if (round) input.normed->mark_rounded(n_tokens, width);
    return;
  }
  const strata_buffer& rows = normalize_first(instance, input, n_tokens, width);
  route_on_lane(instance, weight, static_cast<const float*>(rows.base()), {}, {}, n_tokens, n_experts, n_used, routing,
                logits, ids, weights);
}

}  // namespace strata::cuda
