// One sequence's KV cache and causal grouped-query attention over it. Rows of head_dim values are laid
// out [layer][kv head][position] as in the CPU backend, as IEEE half, or as int8 with one float scale per
// 16 values (kInt8GroupSize) rounded the CPU backend's way, so both backends cache the same numbers.
#include <cuda_fp16.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>

#include "attention_common.cuh"
#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"
#include "strata/cuda_launch.cuh"

struct strata_kv_cache {
  strata_kv_config config;
  int32_t groups_per_row;  // int8 scales per row; the last group may be short
  strata::cuda::DeviceAllocation keys, values, key_scales, value_scales;
};

namespace strata::cuda {
namespace {

using sdk::cuda::kWarp;

constexpr int kAttentionWarps = 4;
static_assert(kAttentionWarps >= 3, "the key, value and query jobs of a decode step take a warp each");
constexpr int kMaxValuesPerLane = 8;  // head_dim up to 256

KvView view(const strata_kv_cache& cache, const DeviceAllocation& data, const DeviceAllocation& scales) {
  const bool is_int8 = cache.config.kv_type == STRATA_KV_INT8;
  return {is_int8 ? nullptr : data.as<__half>(), is_int8 ? data.as<int8_t>() : nullptr, scales.as<float>(),
          cache.config.head_dim, cache.groups_per_row};
}

// Writes one cache row from shared memory, a warp's lanes taking a value (f16) or a group of 16 (int8).
__device__ void store_row(const KvView& target, size_t row, const float* x) {
  const int lane = threadIdx.x % kWarp;
  if (target.halves != nullptr) {
    for (int i = lane; i < target.head_dim; i += kWarp) target.halves[row * target.head_dim + i] = __float2half_rn(x[i]);
    return;
  }
  for (int group = lane; group < target.groups_per_row; group += kWarp) {
    const int start = group * kInt8GroupSize, end = min(start + kInt8GroupSize, target.head_dim);
    float amax = 0.0f;
    for (int i = start; i < end; ++i) amax = fmaxf(amax, fabsf(x[i]));
    const float scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int i = start; i < end; ++i) target.levels[row * target.head_dim + i] = static_cast<int8_t>(lroundf(x[i] * inverse));
    target.scales[row * target.groups_per_row + group] = scale;
  }
}

// A warp's copy of head_dim values into shared memory.
__device__ void load_head(float* to, const float* from, int head_dim) {
  for (int i = threadIdx.x % kWarp; i < head_dim; i += kWarp) to[i] = from[i];
  __syncwarp();
}

// The jobs of a token's K/V store, a warp each so that they run side by side: warp 0 prepares the key and
// writes it to the cache at the token's position, warp 1 the value (both through shared staging rows).
// Other warps do nothing here.
__device__ void store_token(const KvView& keys, const KvView& values, const float* k, const float* v,
                            const HeadPrep& prep, int position, size_t row, int64_t offset, float* key_staging,
                            float* value_staging) {
  const int warp = threadIdx.x / kWarp, head_dim = keys.head_dim;
  if (warp == 0) {
    load_head(key_staging, k + offset, head_dim);
    prepare_head(key_staging, head_dim, prep.k_gain, prep.eps, prep.half, prep.theta_scale, position);
    store_row(keys, row, key_staging);
  } else if (warp == 1) {
    load_head(value_staging, v + offset, head_dim);
    store_row(values, row, value_staging);
  }
}

// One block per (token, kv head): the token's key (prepared) and value rows into the cache.
__global__ void __launch_bounds__(kWarp* kAttentionWarps)
    store_kernel(KvView keys, KvView values, const float* k, const float* v, HeadPrep prep, const int32_t* positions,
                 int layer, int n_head_kv, int n_ctx) {
  sdk::cuda::start_after_previous_kernel();
  __shared__ float staging[2][kMaxValuesPerLane * kWarp];
  const int token = blockIdx.x / n_head_kv, kv_head = blockIdx.x % n_head_kv;
  const size_t row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx + positions[token];
  store_token(keys, values, k, v, prep, positions[token], row, (int64_t{token} * n_head_kv + kv_head) * keys.head_dim,
              staging[0], staging[1]);
}

// One block per (token, head). The warps take turns at runs of 32 cache positions, a position per lane:
// each lane scores its position against the scaled query in shared memory, then the warp updates its
// online softmax state once per run (running max, running sum, rescaled accumulator) and adds the run's
// values. A lane accumulates kRun consecutive dimensions where head_dim is 32 * kRun (1, 2, 4 or 8), a
// vector load per position, all 32 positions of a run in flight together; else (kRun 0) dimensions lane,
// lane + 32, ... a value at a time. The warps' states are merged at the end. Nothing is stored per
// position, so any context fits. (Lanes splitting each score's dimensions instead, with a shuffle reduction
// per position, measured 9% slower decoding on the H200.)
// With store (one token): every block first writes its kv head's new key and value rows itself (two warps,
// while a third prepares the query), so the step needs no store kernel. The blocks sharing a kv head write
// the same bytes (each prepares the key from the same inputs with the same operations), so whichever write
// lands last, each block reads back its own row after its barrier; formally a race of identical values,
// which memcheck does not flag and racecheck (shared memory only) does not cover.
template <int kRun>
__global__ void __launch_bounds__(kWarp* kAttentionWarps)
    attention_kernel(KvView keys, KvView values, const float* q, const float* k, const float* v, HeadPrep prep,
                     bool store, const int32_t* positions, float* out, int8_t* out_levels, float* out_scales, int layer,
                     int n_head, int n_head_kv, int n_ctx, float scale) {
  sdk::cuda::start_after_previous_kernel();
  __shared__ float warp_max[kAttentionWarps], warp_sum_shared[kAttentionWarps];
  __shared__ float warp_acc[kAttentionWarps][kMaxValuesPerLane * kWarp];
  __shared__ float query[kMaxValuesPerLane * kWarp];
  const int token = blockIdx.x / n_head, head = blockIdx.x % n_head;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int head_dim = keys.head_dim;
  const int kv_head = head / (n_head / n_head_kv);
  const size_t first_row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx;
  // Three jobs side by side, a warp each, then one barrier: the key and value rows into the cache (store;
  // read back below by other threads of the block) and the query, prepared and scaled, into shared memory.
  if (store) {
    store_token(keys, values, k, v, prep, positions[token], first_row + positions[token],
                (int64_t{token} * n_head_kv + kv_head) * head_dim, warp_acc[0], warp_acc[1]);
  }
  if (warp == kAttentionWarps - 1) {
    load_head(query, q + (int64_t{token} * n_head + head) * head_dim, head_dim);
    prepare_head(query, head_dim, prep.q_gain, prep.eps, prep.half, prep.theta_scale, positions[token]);
    for (int i = lane; i < head_dim; i += kWarp) query[i] *= scale;
  }
  __syncthreads();

  constexpr int kAccumulated = kRun > 0 ? kRun : kMaxValuesPerLane;
  float acc[kAccumulated] = {};
  float running_max = -INFINITY, running_sum = 0.0f;
  const int last = positions[token];
  for (int base = warp * kWarp; base <= last; base += kAttentionWarps * kWarp) {
    const int j = base + lane;
    const float score = j <= last ? keys.dot(first_row + j, query) : -INFINITY;
    const float new_max = fmaxf(running_max, sdk::cuda::warp_max(score));
    const float weight = j <= last ? expf(score - new_max) : 0.0f;
    const float correction = expf(running_max - new_max);
    running_sum = running_sum * correction + sdk::cuda::warp_sum(weight);
#pragma unroll
    for (int k = 0; k < kAccumulated; ++k) acc[k] *= correction;
    const int count = min(kWarp, last - base + 1);
    if constexpr (kRun > 0) {
      // Unconditional loads, so that all 32 are in flight: past the run's end the weight is 0 and the row read
      // is its last (a row not yet written could hold NaN).
#pragma unroll
      for (int p = 0; p < kWarp; ++p) {
        const float w = __shfl_sync(0xffffffffu, weight, p);
        float run[kAccumulated];
        values.load_run<kRun>(first_row + base + min(p, count - 1), lane * kRun, run);
#pragma unroll
        for (int k = 0; k < kRun; ++k) acc[k] += w * run[k];
      }
    } else {
#pragma unroll 8
      for (int p = 0; p < count; ++p) {
        const float w = __shfl_sync(0xffffffffu, weight, p);
        const size_t row = first_row + base + p;
#pragma unroll
        for (int k = 0; k < kMaxValuesPerLane; ++k) {
          const int i = lane + kWarp * k;
          if (i < head_dim) acc[k] += w * values.load(row, i);
        }
      }
    }
    running_max = new_max;
  }
  if (lane == 0) {
    warp_max[warp] = running_max;
    warp_sum_shared[warp] = running_sum;
  }
#pragma unroll
  for (int k = 0; k < kAccumulated; ++k) warp_acc[warp][kRun > 0 ? lane * kRun + k : lane + kWarp * k] = acc[k];
  __syncthreads();

  float total_max = -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w) total_max = fmaxf(total_max, warp_max[w]);
  float total_sum = 0.0f;
  float factors[kAttentionWarps];
  for (int w = 0; w < kAttentionWarps; ++w) {
    factors[w] = warp_sum_shared[w] > 0.0f ? expf(warp_max[w] - total_max) : 0.0f;  // a warp that saw nothing adds 0
    total_sum += warp_sum_shared[w] * factors[w];
  }
  const int64_t first = (int64_t{token} * n_head + head) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float value = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) value += warp_acc[w][i] * factors[w];
    value /= total_sum;
    out[first + i] = value;
    if (out_levels != nullptr) {
      // A warp holds one group of 32 (head_dim a multiple of 32): rounded as the 8-bit matvecs round.
      const float group_scale = sdk::cuda::warp_max(fabsf(value)) / 127.0f;
      out_levels[first + i] = static_cast<int8_t>(sdk::cuda::q8_level(value, group_scale));
      if (lane == 0) out_scales[(first + i) / sdk::cuda::kQ8Group] = group_scale;
    }
  }
}

}  // namespace

void kv_create(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out) {
  auto& instance = deref(backend, "backend");
  const auto& checked = deref(config, "kv config");
  deref(out, "out");
  sdk::check_kv_config(checked);
  if (checked.head_dim > kMaxValuesPerLane * kWarp) {
    throw sdk::Failure(STRATA_E_UNSUPPORTED, "kv config: head_dim " + std::to_string(checked.head_dim) +
                                                 " is above the CUDA attention's " +
                                                 std::to_string(kMaxValuesPerLane * kWarp));
  }
  auto cache = std::make_unique<strata_kv_cache>();
  cache->config = checked;
  cache->groups_per_row = (checked.head_dim + kInt8GroupSize - 1) / kInt8GroupSize;
  const size_t n_rows = static_cast<size_t>(checked.n_layers) * checked.n_head_kv * checked.n_ctx;
  const size_t value_bytes = checked.kv_type == STRATA_KV_INT8 ? 1 : 2;
  for (auto [data, scales, what] : {std::tuple{&cache->keys, &cache->key_scales, "keys"},
                                    std::tuple{&cache->values, &cache->value_scales, "values"}}) {
    *data = instance.budget.allocate(n_rows * checked.head_dim * value_bytes, std::string("KV cache ") + what);
    if (checked.kv_type == STRATA_KV_INT8) {
      *scales = instance.budget.allocate(n_rows * cache->groups_per_row * sizeof(float),
                                         std::string("KV cache ") + what + " scales");
    }
  }
  *out = cache.release();
}

void kv_free(strata_backend* backend, strata_kv_cache* cache) {
  if (backend != nullptr && cache != nullptr) cudaStreamSynchronize(backend->stream);
  delete cache;
}

namespace {

// Store and attend: one kernel for a single token (the decode step), else a store kernel first, then the
// tiled prompt kernel for steps of kPromptAttentionMinTokens or more where it takes the shape, else the
// per-token kernel.
void launch_attention(strata_backend& instance, strata_kv_cache& kv, const strata_attention_params& p,
                      const sdk::AttentionOperands& operands, const HeadPrep& prep, strata_buffer& out) {
  const int64_t n_tokens = p.n_tokens;
  if (n_tokens == 0) return;
  const int32_t* positions = device_positions(instance, p.positions, static_cast<int32_t>(n_tokens));
  const KvView keys = view(kv, kv.keys, kv.key_scales), values = view(kv, kv.values, kv.value_scales);
  const bool store_in_attention = n_tokens == 1;
  if (!store_in_attention) {
    sdk::cuda::launch_after_previous(store_kernel, static_cast<unsigned>(n_tokens * p.n_head_kv), kWarp * kAttentionWarps,
                                     0, instance.stream, keys, values, operands.k, operands.v, prep, positions, p.layer,
                                     p.n_head_kv, kv.config.n_ctx);
    check_launch("kv store");
    if (n_tokens >= kPromptAttentionMinTokens &&
        launch_prompt_attention(instance.stream, keys, values, operands.q, prep, positions, operands.out,
                                static_cast<int>(n_tokens), p.layer, p.n_head, p.n_head_kv, kv.config.n_ctx, p.scale)) {
      check_launch("prompt attention");
      return;
    }
  }
  // A decode step's output also rounded to 8 bits, for the output projection's matvec.
  const bool round = n_tokens <= sdk::cuda::kMaxMatvecTokens && p.head_dim % sdk::cuda::kQ8Group == 0;
  if (round) out.allocate_rounded(instance.budget);
  const int run = p.head_dim % kWarp != 0 ? 0 : p.head_dim / kWarp;
  const auto kernel = run == 8 ? attention_kernel<8> : run == 4 ? attention_kernel<4> : run == 2 ? attention_kernel<2>
                    : run == 1 ? attention_kernel<1> : attention_kernel<0>;
  sdk::cuda::launch_after_previous(kernel, static_cast<unsigned>(n_tokens * p.n_head),
                                   kWarp * kAttentionWarps, 0, instance.stream, keys, values, operands.q, operands.k,
                                   operands.v, prep, store_in_attention, positions, operands.out,
                                   round ? out.rounded_levels() : nullptr, round ? out.rounded_scales() : nullptr,
                                   p.layer, p.n_head, p.n_head_kv, kv.config.n_ctx, p.scale);
  check_launch("attention");
  if (round) out.mark_rounded(n_tokens, int64_t{p.n_head} * p.head_dim);
}

}  // namespace

void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
               const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out) {
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  launch_attention(deref(backend, "backend"), kv, p, sdk::attention_operands(kv.config, p, q, k, v, out), HeadPrep{}, *out);
}

void attention_rope(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
                    const strata_qk_prepare* prepare, strata_buffer* q, strata_buffer* k, const strata_buffer* v,
                    strata_buffer* out) {
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  const auto& r = sdk::checked_qk_prepare(prepare, p);
  const sdk::AttentionOperands operands = sdk::attention_operands(kv.config, p, q, k, v, out);
  const HeadPrep prep{r.q_norm != nullptr ? f32_vector(r.q_norm, p.head_dim, "attention q_norm") : nullptr,
                      r.k_norm != nullptr ? f32_vector(r.k_norm, p.head_dim, "attention k_norm") : nullptr,
                      r.norm_eps, r.n_rot / 2, std::pow(r.rope_base, -2.0f / static_cast<float>(r.n_rot))};
  launch_attention(deref(backend, "backend"), kv, p, operands, prep, *out);
}

}  // namespace strata::cuda
