// One sequence's KV cache and causal grouped-query attention over it. Rows of head_dim values are laid
// out [layer][kv head][position] as in the CPU backend, as IEEE half, or as int8 with one float scale per
// 16 values (kInt8GroupSize) rounded the CPU backend's way, so both backends cache the same numbers.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>

#include "attention_common.cuh"
#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"
#include "strata/cuda/device_limits.cuh"
#include "strata/cuda/launch.cuh"
#include "warp_mma.cuh"

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

// Flash decoding. One block per (token, head) is 32 blocks for 32 heads on a 132-SM GPU, and at 32k cached
// positions each of its warps walks 256 runs of 32 one after another. With a long cache the positions of a
// decode-sized step are therefore split into chunks, a block each, which leave their partial softmax states
// in a scratch for a combine kernel to merge. A step graph replays one launch shape at every position, so
// the split follows the cache's size, never the position: blocks whose chunk starts past their token's
// position return at once, and the combine kernel reads only the chunks up to that position.
// kMinSplitPositions: a chunk of 512 positions is 4 runs per warp, about what the combine kernel costs on the
// step's critical path (a launch, ~1-2 us); a cache of at most one chunk keeps the single kernel as it was
// (tg128 from an empty cache has 128 positions). kMaxSplits: 32 heads x 32 splits are 1024 blocks of 128
// threads, one wave on 132 SMs (an SM holds 9 or 10 of them at their 48-56 registers); longer caches take
// longer chunks (32k positions: 1024, 8 runs per warp). At a short position in a long cache the price is the
// combine launch plus the empty blocks, each of which reads one position and returns.
constexpr int kMinSplitPositions = 512;
constexpr int kMaxSplits = 32;
static_assert(kMaxSplits <= kWarp, "the combine kernel takes a split per lane of a warp");
static_assert(kMinSplitPositions % (kAttentionWarps * kWarp) == 0, "chunks of whole runs for every warp");

KvView view(const strata_kv_cache& cache, const DeviceAllocation& data, const DeviceAllocation& scales) {
  const bool is_int8 = cache.config.kv_type == STRATA_KV_INT8;
  return {is_int8 ? nullptr : data.as<__half>(), is_int8 ? data.as<int8_t>() : nullptr, scales.as<float>(),
          cache.config.head_dim, cache.groups_per_row};
}

// Writes one cache row from shared memory, a warp's lanes taking a value (f16) or a group of 16 (int8).
__device__ void store_row(const KvView& target, size_t row, const float* x) {
  const int lane = threadIdx.x % kWarp;
  if (target.halves != nullptr) {
    for (int i = lane; i < target.head_dim; i += kWarp)
      target.halves[row * target.head_dim + i] = __float2half_rn(x[i]);
    return;
  }
  for (int group = lane; group < target.groups_per_row; group += kWarp) {
    const int start = group * kInt8GroupSize, end = min(start + kInt8GroupSize, target.head_dim);
    float amax = 0.0f;
    bool has_nan = false;  // fmaxf drops a NaN: the group's scale carries it instead, so it reaches the logits
    for (int i = start; i < end; ++i) {
      amax = fmaxf(amax, fabsf(x[i]));
      has_nan |= isnan(x[i]);
    }
    const float scale = has_nan ? nanf("") : amax / 127.0f;
    const float inverse = !has_nan && scale != 0.0f ? 1.0f / scale : 0.0f;  // finite values: as before
    for (int i = start; i < end; ++i)
      target.levels[row * target.head_dim + i] = static_cast<int8_t>(lroundf(x[i] * inverse));
    target.scales[row * target.groups_per_row + group] = scale;
  }
}

// A warp's copy of head_dim values into shared memory, all its loads in flight before the first store (a
// loop of load-store pairs waits for L2 once per pair: the compiler may not move a load above a store that
// could alias it).
__device__ void load_head(float* to, const float* from, int head_dim) {
  const int lane = threadIdx.x % kWarp;
  float values[kMaxValuesPerLane];
#pragma unroll
  for (int k = 0; k < kMaxValuesPerLane; ++k) {
    if (lane + k * kWarp < head_dim) values[k] = from[lane + k * kWarp];
  }
#pragma unroll
  for (int k = 0; k < kMaxValuesPerLane; ++k) {
    if (lane + k * kWarp < head_dim) to[lane + k * kWarp] = values[k];
  }
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

// Where a decode-sized step's output rows go: the floats, and where levels is set also rounded to 8 bits for
// the output projection's matvec (a level per value, a scale per 32 values).
struct AttentionOutput {
  float* floats;
  int8_t* levels;
  float* scales;
};

// Writes output value `index`; the threads of a warp write 32 consecutive values together (where levels is
// set, head_dim a multiple of 32: a warp holds one group, rounded as the 8-bit matvecs round).
__device__ void write_output(const AttentionOutput& out, int64_t index, float value) {
  out.floats[index] = value;
  if (out.levels != nullptr) {
    const float amax = sdk::cuda::warp_max(fabsf(value));
    out.levels[index] = static_cast<int8_t>(sdk::cuda::q8_round(value, sdk::cuda::q8_inverse_scale(amax)));
    if (threadIdx.x % kWarp == 0) out.scales[index / sdk::cuda::kQ8Group] = sdk::cuda::q8_scale(amax);
  }
}

// The partial softmax states a split step's blocks leave for the combine kernel: for each (token, head) pair
// and split, head_dim weighted sums of values (not yet divided by the sum of weights), the running max, and
// the sum of weights.
struct SplitStates {
  float* rows;
  int chunk;     // positions per split
  int n_splits;  // splits per pair

  static size_t floats(int64_t pairs, int n_splits, int head_dim) {
    return static_cast<size_t>(pairs) * n_splits * (head_dim + 2);
  }
  __device__ float* state(int pair, int split, int head_dim) const {
    return rows + (static_cast<int64_t>(pair) * n_splits + split) * (head_dim + 2);
  }
};

// One block per (token, head), and with kSplit one per chunk of its positions too (blockIdx.y; the states'
// chunk). The warps take turns at runs of 32 cache positions, a position per lane:
// each lane scores its position against the scaled query in shared memory, then the warp updates its
// online softmax state once per run (running max, running sum, rescaled accumulator) and adds the run's
// values. A lane accumulates kRun consecutive dimensions where head_dim is 32 * kRun (1, 2, 4 or 8), a
// vector load per position, all 32 positions of a run in flight together; else (kRun 0) dimensions lane,
// lane + 32, ... a value at a time. The warps' states are merged at the end, into the output, or with kSplit
// into the block's split state (a block whose chunk starts past the token's position returns first, leaving
// none). Nothing is stored per position, so any context fits. (Lanes splitting each score's dimensions
// instead, with a shuffle reduction per position, measured 9% slower decoding on the H200.)
// With store (one token): the block whose positions include the token's first writes its kv head's new key
// and value rows itself (two warps, while a third prepares the query), so the step needs no store kernel;
// no other block of the pair reads that row. The blocks of the heads sharing a kv head write the same
// bytes (each prepares the key from the same inputs with the same operations), so whichever write lands
// last, each block reads back its own row after its barrier; formally a race of identical values, which
// memcheck does not flag and racecheck (shared memory only) does not cover.
// An instance per cache type (kInt8: the views hold levels and scales, else halves) holds only that type's
// loads: a decode step runs the kernel once per layer between others, so its code is fetched afresh each
// time, and both types' paths in every loop made 135 KB of it for head_dim 128.
template <int kRun, bool kSplit, bool kInt8>
__global__ void __launch_bounds__(kWarp* kAttentionWarps)
    attention_kernel(KvView keys, KvView values, const float* q, const float* k, const float* v, HeadPrep prep,
                     bool store, const int32_t* positions, AttentionOutput out, SplitStates states, int layer,
                     int n_head, int n_head_kv, int n_ctx, float scale) {
  __builtin_assume((keys.halves == nullptr) == kInt8 && (values.halves == nullptr) == kInt8);
  sdk::cuda::let_next_kernel_launch();
  __shared__ float warp_max[kAttentionWarps], warp_sum_shared[kAttentionWarps];
  __shared__ float warp_acc[kAttentionWarps][kMaxValuesPerLane * kWarp];
  __shared__ float query[kMaxValuesPerLane * kWarp];
  const int token = blockIdx.x / n_head, head = blockIdx.x % n_head;
  // The positions are ready before the previous kernel ends: a copy (the step graph's first node, or the
  // upload queued before this launch) wrote them, and copies start only when the kernels before them end.
  const int position = positions[token];
  const int first_position = kSplit ? static_cast<int>(blockIdx.y) * states.chunk : 0;
  // Leaving before the wait is fine: the blocks of split 0 always wait, so the kernel still ends after the
  // one before it (the combine kernel relies on that).
  if (kSplit && first_position > position) return;
  const int last = kSplit ? min(position, first_position + states.chunk - 1) : position;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int head_dim = keys.head_dim;
  const int kv_head = head / (n_head / n_head_kv);
  const size_t first_row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx;
  // The cache rows this block reads, on their way to L2 while the query is prepared (their loads below would
  // each wait for DRAM: a step streams ~1.5 GB of weights through L2, so last step's rows are gone).
  keys.prefetch_rows(first_row + first_position, last - first_position + 1, threadIdx.x, blockDim.x);
  values.prefetch_rows(first_row + first_position, last - first_position + 1, threadIdx.x, blockDim.x);
  prefetch_gains(prep, head_dim, warp);
  sdk::cuda::wait_for_previous_kernel();
  // Three jobs side by side, a warp each, then one barrier: the key and value rows into the cache (store;
  // read back below by other threads of the block) and the query, prepared and scaled, into shared memory.
  if (store && last == position) {
    store_token(keys, values, k, v, prep, position, first_row + position,
                (int64_t{token} * n_head_kv + kv_head) * head_dim, warp_acc[0], warp_acc[1]);
  }
  if (warp == kAttentionWarps - 1) {
    load_head(query, q + (int64_t{token} * n_head + head) * head_dim, head_dim);
    prepare_head(query, head_dim, prep.q_gain, prep.eps, prep.half, prep.theta_scale, position);
    for (int i = lane; i < head_dim; i += kWarp) query[i] *= scale;
  }
  __syncthreads();

  constexpr int kAccumulated = kRun > 0 ? kRun : kMaxValuesPerLane;
  float acc[kAccumulated] = {};
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int base = first_position + warp * kWarp; base <= last; base += kAttentionWarps * kWarp) {
    const int j = base + lane;
    // Loads in flight: all of a row's and a run's where a split block streams a long stretch of the cache,
    // fewer (less code, fetched afresh once per layer) where one block reads a short cache whole.
    constexpr int kChunksInFlight = kSplit ? 16 : 4, kRowsInFlight = kSplit ? kWarp : 8;
    const float score = j <= last ? keys.template dot<kChunksInFlight>(first_row + j, query) : -INFINITY;
    const float new_max = fmaxf(running_max, sdk::cuda::warp_max(score));
    const float weight = j <= last ? expf(score - new_max) : 0.0f;
    const float correction = expf(running_max - new_max);
    running_sum = running_sum * correction + sdk::cuda::warp_sum(weight);
#pragma unroll
    for (int k = 0; k < kAccumulated; ++k) acc[k] *= correction;
    const int count = min(kWarp, last - base + 1);
    if constexpr (kRun > 0) {
      // Unconditional loads, kRowsInFlight at a time: past the run's end the weight is 0 and the row read is
      // its last (a row not yet written could hold NaN).
#pragma unroll kRowsInFlight
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
  float* state = kSplit ? states.state(blockIdx.x, blockIdx.y, head_dim) : nullptr;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float value = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) value += warp_acc[w][i] * factors[w];
    if constexpr (kSplit) {
      state[i] = value;
    } else {
      write_output(out, int64_t{blockIdx.x} * head_dim + i, value / total_sum);
    }
  }
  if (kSplit && threadIdx.x == 0) {
    state[head_dim] = total_max;
    state[head_dim + 1] = total_sum;
  }
}

// One block per (token, head) of a split step: merges the states of the splits that hold positions (those up
// to the token's; the later ones' blocks left none) as the attention kernel merges its warps, a split per
// lane of the first warp, and writes the output row.
__global__ void __launch_bounds__(kWarp* kAttentionWarps)
    combine_splits_kernel(SplitStates states, const int32_t* positions, AttentionOutput out, int n_head, int head_dim) {
  sdk::cuda::start_after_previous_kernel();
  __shared__ float factors[kMaxSplits];
  __shared__ float total_sum;
  const int pair = blockIdx.x, used = positions[pair / n_head] / states.chunk + 1;
  if (threadIdx.x < kWarp) {
    const int split = threadIdx.x;
    const float* state = states.state(pair, min(split, used - 1), head_dim);
    const float max = split < used ? state[head_dim] : -INFINITY;
    const float total_max = sdk::cuda::warp_max(max);
    const float factor = split < used ? expf(max - total_max) : 0.0f;
    const float sum = sdk::cuda::warp_sum(split < used ? state[head_dim + 1] * factor : 0.0f);
    factors[split] = factor;
    if (split == 0) total_sum = sum;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float value = 0.0f;
    for (int split = 0; split < used; ++split) value += states.state(pair, split, head_dim)[i] * factors[split];
    write_output(out, int64_t{pair} * head_dim + i, value / total_sum);
  }
}

// Grouped split decode attention, on the tensor cores. The per-token kernel gives each query head its own
// blocks, so the group of query heads that share a kv head (8 in qwen3-30b-a3b) each read that kv head's
// cache rows: at 16384 positions ~268 MB a layer from L2 for 33.5 MB of cache. Here one block takes a kv
// head's whole group, (token, query head) rows of the step (kGroupedRows at most), and a chunk of its
// positions: each cache row is read once, in tiles of kGroupedTileKeys positions brought into shared memory
// by asynchronous copies kGroupedStages - 1 tiles ahead. Each of the 4 warps takes 16 positions of every
// tile and keeps its own online softmax state for all 16 rows (S = Q K^T and O += P V by mma.sync m16n8k16,
// as the prompt kernel does); the warps' states are merged at the end into the block's split state, which
// the combine kernel merges as it merges the per-token kernel's.
// Float accuracy with f16 operands: the scaled query and the probabilities are each split into a high f16
// and a low one (the remainder times 2^11, kept out of f16's subnormals), and each product is taken twice;
// f16 cache rows are exact operands. So the outputs match the per-token kernel's float arithmetic within
// its own rounding (the decode tests' bound), not the prompt kernel's f16 rounding. int8 caches (whose rows
// would be rounded to f16) keep the per-token kernel.
constexpr int kGroupedRows = 16;  // one mma tile high
constexpr int kGroupedTileKeys = kAttentionWarps * 16;
constexpr int kGroupedStages = 3;
constexpr float kLowScale = 2048.0f;  // 2^11: the low half's scale

struct GroupedLayout {
  int head_dim;

  __host__ __device__ int stride() const { return head_dim + kHalfPad; }
  __host__ __device__ size_t query_bytes() const { return 2 * sizeof(__half) * kGroupedRows * stride(); }
  __host__ __device__ size_t stage_bytes() const { return 2 * sizeof(__half) * kGroupedTileKeys * stride(); }
  // Float rows for preparing the queries (one a warp) and the token's key and value (the store), after the stages.
  __host__ __device__ size_t staging_bytes() const { return sizeof(float) * (kAttentionWarps + 2) * head_dim; }
  __host__ __device__ size_t bytes() const { return query_bytes() + kGroupedStages * stage_bytes() + staging_bytes(); }
};
static_assert(kAttentionWarps * kGroupedRows * sizeof(float) <= kGroupedStages * 2 * kGroupedTileKeys * sizeof(__half),
              "the warps' merged outputs fit in the stages they no longer use");

// value as high + low / kLowScale, both f16: ~22 of a float's 24 significant bits.
__device__ inline void split_halves(float value, __half& high, __half& low) {
  high = __float2half_rn(value);
  low = __float2half_rn((value - __half2float(high)) * kLowScale);
}

// S = Q K^T for the 16 rows against a warp's 16 keys (scores[0]: keys 0-7, scores[1]: keys 8-15), from the
// queries' high and low halves.
__device__ void score_keys(const __half* q_high, const __half* q_low, const __half* k_rows, int head_dim, int stride,
                           Accumulator (&scores)[2]) {
  const int lane = threadIdx.x % kWarp;
  Accumulator low[2] = {};
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) scores[j][e] = 0.0f;
  }
  for (int d = 0; d < head_dim; d += 16) {
    const int query_offset = (lane % 16) * stride + d + 8 * (lane / 16);
    FragmentA high_part, low_part;
    load_matrices<false>(q_high + query_offset, high_part);
    load_matrices<false>(q_low + query_offset, low_part);
    uint32_t k[4];
    load_matrices<false>(k_rows + (lane % 8 + 8 * (lane / 16)) * stride + d + 8 * (lane / 8 % 2), k);
    multiply_accumulate(scores[0], high_part, k[0], k[1]);
    multiply_accumulate(scores[1], high_part, k[2], k[3]);
    multiply_accumulate(low[0], low_part, k[0], k[1]);
    multiply_accumulate(low[1], low_part, k[2], k[3]);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) scores[j][e] += low[j][e] * (1.0f / kLowScale);
  }
}

// The online softmax step of a lane's two rows over a warp's 16 keys from first_key (as the prompt kernel's
// softmax_tile, with the probabilities split into high and low operands and the sums taken of the floats).
__device__ void softmax_keys(const Accumulator (&scores)[2], const int (&position)[2], int first_key, RowState& state,
                             FragmentA& p_high, FragmentA& p_low, float (&correction)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float base = state.advance(h, visible_max(scores, h, first_key, position[h]), correction[h]);
    float sum = 0.0f;
    __half high[2][2], low[2][2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float weight = key_visible(first_key, j, e, position[h]) ? expf(scores[j][2 * h + e] - base) : 0.0f;
        sum += weight;
        split_halves(weight, high[j][e], low[j][e]);
      }
    }
    p_high[h] = pack_halves(high[0][0], high[0][1]);
    p_high[2 + h] = pack_halves(high[1][0], high[1][1]);
    p_low[h] = pack_halves(low[0][0], low[0][1]);
    p_low[2 + h] = pack_halves(low[1][0], low[1][1]);
    state.partial_sum[h] = state.partial_sum[h] * correction[h] + sum;
  }
}

// O = O * correction + P V for the 16 rows over a warp's 16 value rows: output[c] holds columns 8c .. 8c + 7.
template <int kMaxHeadDim>
__device__ void accumulate_values(const FragmentA& p_high, const FragmentA& p_low, const float (&correction)[2],
                                  const __half* v_rows, int head_dim, int stride,
                                  Accumulator (&output)[kMaxHeadDim / 8]) {
  const int lane = threadIdx.x % kWarp;
  rescale_rows(output, correction);
#pragma unroll
  for (int c = 0; c < kMaxHeadDim / 8; c += 2) {
    if (8 * c < head_dim) {
      uint32_t v[4];
      load_matrices<true>(v_rows + (lane % 8 + 8 * (lane / 8 % 2)) * stride + 8 * c + 8 * (lane / 16), v);
      Accumulator low[2] = {};
      multiply_accumulate(output[c], p_high, v[0], v[1]);
      multiply_accumulate(output[c + 1], p_high, v[2], v[3]);
      multiply_accumulate(low[0], p_low, v[0], v[1]);
      multiply_accumulate(low[1], p_low, v[2], v[3]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        output[c][e] += low[0][e] * (1.0f / kLowScale);
        output[c + 1][e] += low[1][e] * (1.0f / kLowScale);
      }
    }
  }
}

// Grid (kv heads, splits). Row r < n_tokens * group of a block is token r / group, query head kv_head * group +
// r % group; the rows past them are zero queries that see nothing. With store (one token) the block whose
// chunk holds the token's position writes the kv head's new key and value rows first, as the per-token kernel
// does. kMaxHeadDim sizes the output registers; head_dim may be any multiple of 16 up to it.
template <int kMaxHeadDim>
__global__ void __launch_bounds__(kWarp* kAttentionWarps)
    grouped_split_attention_kernel(KvView keys, KvView values, const float* q, const float* k, const float* v,
                                   HeadPrep prep, bool store, const int32_t* positions, SplitStates states,
                                   int n_tokens, int layer, int n_head, int n_head_kv, int n_ctx, float scale) {
  sdk::cuda::let_next_kernel_launch();
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ int row_position[kGroupedRows];  // -1: no row
  __shared__ float merged_max[kAttentionWarps][kGroupedRows], merged_sum[kAttentionWarps][kGroupedRows];
  const int head_dim = keys.head_dim, group = n_head / n_head_kv, n_rows = n_tokens * group;
  const int kv_head = blockIdx.x, split = blockIdx.y;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // The positions are ready before the previous kernel ends (see attention_kernel).
  int last_position = -1;
  for (int token = 0; token < n_tokens; ++token) last_position = max(last_position, positions[token]);
  const int first_position = split * states.chunk;
  if (first_position > last_position) return;  // split 0's blocks always wait (see attention_kernel)
  const int last = min(last_position, first_position + states.chunk - 1);
  const size_t first_row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx;
  keys.prefetch_rows(first_row + first_position, last - first_position + 1, threadIdx.x, blockDim.x);
  values.prefetch_rows(first_row + first_position, last - first_position + 1, threadIdx.x, blockDim.x);
  prefetch_gains(prep, head_dim, warp);
  if (threadIdx.x < kGroupedRows) {
    row_position[threadIdx.x] = static_cast<int>(threadIdx.x) < n_rows ? positions[threadIdx.x / group] : -1;
  }

  const GroupedLayout layout{head_dim};
  const int stride = layout.stride();
  auto* q_high = reinterpret_cast<__half*>(shared);
  __half* q_low = q_high + kGroupedRows * stride;
  const auto k_tile = [&](int stage) {
    return reinterpret_cast<__half*>(shared + layout.query_bytes() + stage * layout.stage_bytes());
  };
  const auto v_tile = [&](int stage) { return k_tile(stage) + kGroupedTileKeys * stride; };
  auto* staging = reinterpret_cast<float*>(shared + layout.query_bytes() + kGroupedStages * layout.stage_bytes());
  sdk::cuda::wait_for_previous_kernel();

  if (store && last == positions[0]) {
    store_token(keys, values, k, v, prep, positions[0], first_row + positions[0], int64_t{kv_head} * head_dim,
                staging + kAttentionWarps * head_dim, staging + (kAttentionWarps + 1) * head_dim);
  }
  // The queries, a row per warp at a time, prepared as the per-token kernel prepares them, scaled and split.
  float* query = staging + warp * head_dim;
  for (int r = warp; r < kGroupedRows; r += kAttentionWarps) {
    const bool real = r < n_rows;
    if (real) {
      const int token = r / group;
      load_head(query, q + (int64_t{token} * n_head + kv_head * group + r % group) * head_dim, head_dim);
      prepare_head(query, head_dim, prep.q_gain, prep.eps, prep.half, prep.theta_scale, positions[token]);
    }
    for (int i = lane; i < head_dim; i += kWarp) {
      split_halves(real ? query[i] * scale : 0.0f, q_high[r * stride + i], q_low[r * stride + i]);
    }
    __syncwarp();  // the next row overwrites the staging row
  }
  __syncthreads();  // the stored row (the tiles below read it back), the queries, the rows' positions

  const int n_tiles = (last - first_position) / kGroupedTileKeys + 1;
  const auto load_tile = [&](int tile) {
    const int first_key = first_position + tile * kGroupedTileKeys;
    load_stage(keys, values, first_row + first_key, min(kGroupedTileKeys, last + 1 - first_key), kGroupedTileKeys,
               k_tile(tile % kGroupedStages), v_tile(tile % kGroupedStages), stride);
  };
  // A group of copies per tile, empty past the last, so that waiting for all but the newest kGroupedStages - 1
  // groups leaves the current tile's complete.
  for (int tile = 0; tile < kGroupedStages - 1; ++tile) {
    if (tile < n_tiles) load_tile(tile);
    sdk::cuda::commit_async_copies();
  }
  const int g = lane / 4, t = lane % 4;
  const int position[2] = {row_position[g], row_position[g + 8]};
  RowState state;
  Accumulator output[kMaxHeadDim / 8] = {};
  for (int tile = 0; tile < n_tiles; ++tile) {
    if (tile + kGroupedStages - 1 < n_tiles) load_tile(tile + kGroupedStages - 1);
    sdk::cuda::commit_async_copies();
    sdk::cuda::wait_async_copies<kGroupedStages - 1>();
    __syncthreads();  // every thread's copies of this tile are in shared memory
    const int warp_first_key = first_position + tile * kGroupedTileKeys + 16 * warp;
    if (warp_first_key <= last) {
      const int stage = tile % kGroupedStages;
      Accumulator scores[2];
      score_keys(q_high, q_low, k_tile(stage) + 16 * warp * stride, head_dim, stride, scores);
      FragmentA p_high, p_low;
      float correction[2];
      softmax_keys(scores, position, warp_first_key, state, p_high, p_low, correction);
      accumulate_values<kMaxHeadDim>(p_high, p_low, correction, v_tile(stage) + 16 * warp * stride, head_dim, stride,
                                     output);
    }
    __syncthreads();  // a later iteration refills this stage
  }

  // The warps' states through the stages' memory, then merged per row into the block's split state.
  auto* merged = reinterpret_cast<float*>(shared + layout.query_bytes());  // [warp][row][head_dim]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = state.partial_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = g + 8 * h;
    if (t == 0) {
      merged_max[warp][row] = state.max[h];
      merged_sum[warp][row] = sum;
    }
    float* merged_row = merged + (warp * kGroupedRows + row) * head_dim;
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 8; ++c) {
      if (8 * c < head_dim) {
        *reinterpret_cast<float2*>(merged_row + 8 * c + 2 * t) = make_float2(output[c][2 * h], output[c][2 * h + 1]);
      }
    }
  }
  __syncthreads();
  for (int item = threadIdx.x; item < n_rows * head_dim; item += blockDim.x) {
    const int row = item / head_dim, i = item % head_dim;
    float total_max = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) total_max = fmaxf(total_max, merged_max[w][row]);
    float value = 0.0f, total_sum = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
      const float factor = merged_sum[w][row] > 0.0f ? expf(merged_max[w][row] - total_max) : 0.0f;
      value += merged[(w * kGroupedRows + row) * head_dim + i] * factor;
      total_sum += merged_sum[w][row] * factor;
    }
    const int pair = row / group * n_head + kv_head * group + row % group;
    float* split_state = states.state(pair, split, head_dim);
    split_state[i] = value;
    if (i == 0) {
      split_state[head_dim] = total_max;
      split_state[head_dim + 1] = total_sum;
    }
  }
}

// The grouped kernel whose output registers fit head_dim most closely, or nullptr past 256.
using GroupedAttentionKernel = decltype(&grouped_split_attention_kernel<64>);
GroupedAttentionKernel grouped_kernel_for(int head_dim) {
  if (head_dim <= 64) return grouped_split_attention_kernel<64>;
  if (head_dim <= 128) return grouped_split_attention_kernel<128>;
  if (head_dim <= 256) return grouped_split_attention_kernel<256>;
  return nullptr;
}

// The attention kernel for a head size: kRun values per lane where head_dim is 32 * kRun, else a value at a time.
template <bool kSplit, bool kInt8>
auto attention_kernel_of_cache(int head_dim) {
  const int run = head_dim % kWarp != 0 ? 0 : head_dim / kWarp;
  return run == 8   ? attention_kernel<8, kSplit, kInt8>
         : run == 4 ? attention_kernel<4, kSplit, kInt8>
         : run == 2 ? attention_kernel<2, kSplit, kInt8>
         : run == 1 ? attention_kernel<1, kSplit, kInt8>
                    : attention_kernel<0, kSplit, kInt8>;
}

template <bool kSplit>
auto attention_kernel_for(int head_dim, bool int8_cache) {
  return int8_cache ? attention_kernel_of_cache<kSplit, true>(head_dim)
                    : attention_kernel_of_cache<kSplit, false>(head_dim);
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
  // Zeroed: the prompt kernel multiplies a masked position's value row by a weight of 0, which a row never
  // written (a gap in a step's positions) must not turn into NaN.
  const auto zeroed = [&](size_t bytes, const std::string& what) {
    DeviceAllocation memory = instance.budget.allocate(bytes, what);
    check(cudaMemsetAsync(memory.get(), 0, bytes, instance.stream), "zeroing the " + what);
    return memory;
  };
  for (auto [data, scales, what] : {std::tuple{&cache->keys, &cache->key_scales, "keys"},
                                    std::tuple{&cache->values, &cache->value_scales, "values"}}) {
    *data = zeroed(n_rows * checked.head_dim * value_bytes, std::string("KV cache ") + what);
    if (checked.kv_type == STRATA_KV_INT8) {
      *scales = zeroed(n_rows * cache->groups_per_row * sizeof(float), std::string("KV cache ") + what + " scales");
    }
  }
  *out = cache.release();
}

void kv_free(strata_backend* backend, strata_kv_cache* cache) {
  if (backend != nullptr && cache != nullptr) cudaStreamSynchronize(backend->stream);
  delete cache;
}

namespace {

// How a decode-sized step over a cache of n_ctx positions splits them: at most kMaxSplits chunks of whole
// units (a kernel's step over positions), none shorter than min_chunk.
SplitStates position_splits(int n_ctx, int min_chunk, int unit) {
  const int spread = (n_ctx + kMaxSplits - 1) / kMaxSplits;
  const int chunk = std::max(min_chunk, (spread + unit - 1) / unit * unit);
  return {nullptr, chunk, (n_ctx + chunk - 1) / chunk};
}

// The per-token kernel's splits (see kMinSplitPositions): one up to kMinSplitPositions, else chunks of whole
// runs for every warp.
SplitStates per_token_splits(int n_ctx) { return position_splits(n_ctx, kMinSplitPositions, kAttentionWarps * kWarp); }

// The grouped kernel's splits: chunks of whole tiles, two at least. A block serves a group of heads, so
// chunks shorter than the per-token kernel's keep the grid as wide (32 splits from 4096 positions).
SplitStates grouped_splits(int n_ctx) { return position_splits(n_ctx, 2 * kGroupedTileKeys, kGroupedTileKeys); }

// Launches the grouped split kernel (its states then hold the step's splits), or returns false where it does
// not take the step: an int8 cache, more rows than kGroupedRows, head_dim not a multiple of 16 or above 256, or
// more shared memory than the device gives a block.
bool launch_grouped_attention(strata_backend& instance, const KvView& keys, const KvView& values, int n_ctx,
                              const strata_attention_params& p, const sdk::AttentionOperands& operands,
                              const HeadPrep& prep, bool store, const int32_t* positions, SplitStates& states) {
  const GroupedAttentionKernel kernel = grouped_kernel_for(p.head_dim);
  if (keys.halves == nullptr || p.n_tokens * (p.n_head / p.n_head_kv) > kGroupedRows || p.head_dim % 16 != 0 ||
      kernel == nullptr) {
    return false;
  }
  const size_t shared_bytes = GroupedLayout{p.head_dim}.bytes();
  // A device that gives a block less keeps the per-token kernel.
  if (!sdk::cuda::opt_in_shared_memory(reinterpret_cast<const void*>(kernel), shared_bytes)) return false;
  SplitStates grouped = grouped_splits(n_ctx);
  grouped.rows = states.rows;
  const dim3 grid(static_cast<unsigned>(p.n_head_kv), static_cast<unsigned>(grouped.n_splits));
  sdk::cuda::launch_after_previous(kernel, grid, kWarp * kAttentionWarps, shared_bytes, instance.stream, keys, values,
                                   operands.q, operands.k, operands.v, prep, store, positions, grouped,
                                   static_cast<int>(p.n_tokens), p.layer, p.n_head, p.n_head_kv, n_ctx, p.scale);
  check_launch("grouped attention");
  states = grouped;
  return true;
}

// The scratch for a split step's states, sized for the largest step the per-token kernel takes and the most
// splits: it then never grows between steps.
float* split_state_rows(strata_backend& instance, const strata_attention_params& p) {
  const size_t floats = SplitStates::floats(int64_t{kPromptAttentionMinTokens - 1} * p.n_head, kMaxSplits, p.head_dim);
  return instance.lane().attention_splits.get<float>(instance.budget, floats);
}

// Store and attend: one kernel for a single token (the decode step), else a store kernel first, then the
// tiled prompt kernel for steps of kPromptAttentionMinTokens or more where it takes the shape, else the
// per-token kernel; for fewer tokens over a long cache, split over positions (by the grouped kernel where it
// takes the step, else by the per-token one), then the combine kernel.
void launch_attention(strata_backend& instance, strata_kv_cache& kv, const strata_attention_params& p,
                      const sdk::AttentionOperands& operands, const HeadPrep& prep, strata_buffer& out) {
  const int64_t n_tokens = p.n_tokens;
  if (n_tokens == 0) return;
  const int32_t* positions = device_positions(instance, p.positions, static_cast<int32_t>(n_tokens));
  const KvView keys = view(kv, kv.keys, kv.key_scales), values = view(kv, kv.values, kv.value_scales);
  const bool store_in_attention = n_tokens == 1;
  if (!store_in_attention) {
    sdk::cuda::launch_after_previous(store_kernel, static_cast<unsigned>(n_tokens * p.n_head_kv),
                                     kWarp * kAttentionWarps, 0, instance.stream, keys, values, operands.k, operands.v,
                                     prep, positions, p.layer, p.n_head_kv, kv.config.n_ctx);
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
  const AttentionOutput output{operands.out, round ? out.rounded_levels() : nullptr,
                               round ? out.rounded_scales() : nullptr};
  const auto pairs = static_cast<unsigned>(n_tokens * p.n_head);
  const bool int8_cache = keys.halves == nullptr;
  const auto attend = [&](auto kernel, dim3 grid, const SplitStates& states) {
    sdk::cuda::launch_after_previous(kernel, grid, kWarp * kAttentionWarps, 0, instance.stream, keys, values,
                                     operands.q, operands.k, operands.v, prep, store_in_attention, positions, output,
                                     states, p.layer, p.n_head, p.n_head_kv, kv.config.n_ctx, p.scale);
    check_launch("attention");
  };
  // Larger steps (prompts the tiled kernel refused) have blocks enough, and their states would not fit.
  SplitStates states = per_token_splits(kv.config.n_ctx);
  if (n_tokens >= kPromptAttentionMinTokens || states.n_splits == 1) {
    attend(attention_kernel_for<false>(p.head_dim, int8_cache), dim3(pairs), SplitStates{});
  } else {
    states.rows = split_state_rows(instance, p);
    if (!launch_grouped_attention(instance, keys, values, kv.config.n_ctx, p, operands, prep, store_in_attention,
                                  positions, states)) {
      attend(attention_kernel_for<true>(p.head_dim, int8_cache), dim3(pairs, static_cast<unsigned>(states.n_splits)),
             states);
    }
    sdk::cuda::launch_after_previous(combine_splits_kernel, pairs, kWarp * kAttentionWarps, 0, instance.stream, states,
                                     positions, output, p.n_head, p.head_dim);
    check_launch("attention split combine");
  }
  if (round) out.mark_rounded(n_tokens, int64_t{p.n_head} * p.head_dim);
}

}  // namespace

void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
               const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out) {
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  launch_attention(deref(backend, "backend"), kv, p, sdk::attention_operands(kv.config, p, q, k, v, out), HeadPrep{},
                   *out);
}

void attention_rope(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
                    const strata_qk_prepare* prepare, strata_buffer* q, strata_buffer* k, const strata_buffer* v,
                    strata_buffer* out) {
  auto& kv = deref(cache, "kv cache");
  const auto& p = deref(params, "attention params");
  const auto& r = sdk::checked_qk_prepare(prepare, p);
  const sdk::AttentionOperands operands = sdk::attention_operands(kv.config, p, q, k, v, out);
  const HeadPrep prep{r.q_norm != nullptr ? f32_vector(r.q_norm, p.head_dim, "attention q_norm") : nullptr,
                      r.k_norm != nullptr ? f32_vector(r.k_norm, p.head_dim, "attention k_norm") : nullptr, r.norm_eps,
                      r.n_rot / 2, std::pow(r.rope_base, -2.0f / static_cast<float>(r.n_rot))};
  launch_attention(deref(backend, "backend"), kv, p, operands, prep, *out);
}

}  // namespace strata::cuda
