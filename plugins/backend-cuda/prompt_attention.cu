// Causal grouped-query attention for prompt steps, flash-attention style on the tensor cores. The per-token
// kernel (attention.cu) has each query read the whole K/V history; here a block takes 64 query rows of
// one kv head, (token, query head) pairs of its group, and walks the cache in tiles of 64 positions that
// are loaded once into shared memory for all 64 rows.
//
// The K/V tiles are double-buffered: while the warps work on tile j, tile j + 1 is on its way into the
// other buffer (f16 caches by cp.async; int8 caches are dequantized to f16 by the threads before the work
// on tile j, so they gain no overlap). Per key tile, each of the 4 warps owns 16 query rows and keeps
// everything of them in registers, FlashAttention-2 style, with mma.sync m16n8k16 (f16 inputs, float
// accumulation; warp_mma.cuh, whose documented fragment layouts tell each lane which rows it holds):
// S = Q K^T; the online softmax in float, a lane holding two rows' scores and a quad of lanes a row, with
// the causal mask per element (key j is visible to a row iff j <= its token's position, so any positions
// work, consecutive or not); P rounded to f16 straight into the operand registers of O += P V; O rescaled
// per row in its accumulators. A tile's keys run from 0 to the largest position of the block's rows; a
// warp skips the tiles past its own rows' largest position.
//
// Rounding beyond the per-token kernel's: the prepared, scaled query and the probabilities to f16 (and,
// for an int8 cache, the dequantized K/V values); scores, softmax state and sums stay float. The row sum
// adds the rounded probabilities, so each output is a weighted mean of values with the weights it used.
#include <cuda_fp16.h>

#include <cmath>

#include "attention_common.cuh"
#include "strata/cuda/device_limits.cuh"
#include "warp_mma.cuh"

namespace strata::cuda {
namespace {

using sdk::cuda::kWarp;

constexpr int kRows = 64;  // query rows of a block
constexpr int kKeys = 64;  // cache positions of a key tile
constexpr int kWarps = 4;
constexpr int kWarpRows = kRows / kWarps;  // one mma tile high
constexpr int kStages = 2;                 // K/V tile buffers: the next tile loads while the current one is used
constexpr int kKeyTiles = kKeys / 8;       // a warp's scores as 16 x 8 accumulators
constexpr int kKeySlices = kKeys / 16;     // its probabilities as 16 x 16 operands

// The block's dynamic shared memory for one head_dim: the queries (f16), kStages pairs of key and value
// tiles (f16), and a float row per warp that stages a query for its preparation. Rows and parts are
// multiples of 16 bytes, as cp.async and ldmatrix want.
struct SharedLayout {
  int head_dim;

  __host__ __device__ int half_stride() const { return head_dim + kHalfPad; }
  __host__ __device__ size_t q_bytes() const { return sizeof(__half) * kRows * half_stride(); }
  __host__ __device__ size_t tile_bytes() const { return sizeof(__half) * kKeys * half_stride(); }
  __host__ __device__ size_t staging_bytes() const { return sizeof(float) * kWarps * head_dim; }
  __host__ __device__ size_t bytes() const { return q_bytes() + 2 * kStages * tile_bytes() + staging_bytes(); }
};

// S = Q K^T for a warp's 16 rows against the key tile: scores[j] holds keys 8j .. 8j + 7. One ldmatrix gives
// a 16 x 16 query slice (matrices: rows 0-7 and 8-15 at columns d, then at d + 8) and another the keys of
// two accumulators (keys 8j .. 8j + 7 at d and d + 8, then keys 8j + 8 .. 8j + 15).
__device__ void score_tile(const __half* q_rows, const __half* k_tile, int head_dim, int stride,
                           Accumulator (&scores)[kKeyTiles]) {
  const int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) scores[j][e] = 0.0f;
  }
  for (int d = 0; d < head_dim; d += 16) {
    FragmentA q;
    load_matrices<false>(q_rows + (lane % 16) * stride + d + 8 * (lane / 16), q);
#pragma unroll
    for (int j = 0; j < kKeyTiles; j += 2) {
      uint32_t k[4];
      load_matrices<false>(k_tile + (8 * j + lane % 8 + 8 * (lane / 16)) * stride + d + 8 * (lane / 8 % 2), k);
      multiply_accumulate(scores[j], q, k[0], k[1]);
      multiply_accumulate(scores[j + 1], q, k[2], k[3]);
    }
  }
}

// The online softmax step of a lane's two rows for the key tile at first_key: the masked scores' maxima
// over the quad, the new running maxima, the probabilities rounded to f16 into P's operand registers
// (probabilities[k]: keys 16k .. 16k + 15), the partial sums of the rounded probabilities, and the factors
// that rescale each row's output and sum to the new maximum. A row that has seen no visible key yet keeps
// max -inf and weights 0.
__device__ void softmax_tile(const Accumulator (&scores)[kKeyTiles], const int (&position)[2], int first_key,
                             RowState& state, FragmentA (&probabilities)[kKeySlices], float (&correction)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float base = state.advance(h, visible_max(scores, h, first_key, position[h]), correction[h]);
    float sum = 0.0f;
    __half weights[kKeyTiles][2];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        weights[j][e] = key_visible(first_key, j, e, position[h]) ? __float2half_rn(expf(scores[j][2 * h + e] - base))
                                                                  : __float2half_rn(0.0f);
        sum += __half2float(weights[j][e]);
      }
    }
#pragma unroll
    for (int k = 0; k < kKeySlices; ++k) {
      probabilities[k][h] = pack_halves(weights[2 * k][0], weights[2 * k][1]);
      probabilities[k][2 + h] = pack_halves(weights[2 * k + 1][0], weights[2 * k + 1][1]);
    }
    state.partial_sum[h] = state.partial_sum[h] * correction[h] + sum;
  }
}

// O = O * correction + P V for a warp's 16 rows: output[c] holds columns 8c .. 8c + 7 (those past head_dim
// stay 0). One transposed ldmatrix gives the values of two accumulators for a 16-key slice (matrices: keys
// 0-7 and 8-15 at columns 8c, then at 8c + 8), each lane then holding two keys of one column as B wants.
template <int kMaxHeadDim>
__device__ void accumulate_tile(const FragmentA (&probabilities)[kKeySlices], const float (&correction)[2],
                                const __half* v_tile, int head_dim, int stride,
                                Accumulator (&output)[kMaxHeadDim / 8]) {
  const int lane = threadIdx.x % kWarp;
  rescale_rows(output, correction);
#pragma unroll
  for (int k = 0; k < kKeySlices; ++k) {
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 8; c += 2) {
      if (8 * c < head_dim) {
        uint32_t v[4];
        load_matrices<true>(v_tile + (16 * k + lane % 8 + 8 * (lane / 8 % 2)) * stride + 8 * c + 8 * (lane / 16), v);
        multiply_accumulate(output[c], probabilities[k], v[0], v[1]);
        multiply_accumulate(output[c + 1], probabilities[k], v[2], v[3]);
      }
    }
  }
}

// Grid (row tiles, kv heads). Row r of the block is flat index blockIdx.x * 64 + r over the step's
// (token, query head of the group) pairs, token-major, so a tile holds 64 / group tokens (or part of them)
// and all their heads of this kv head. kMaxHeadDim sizes the output registers; head_dim may be any
// multiple of 16 up to it.
template <int kMaxHeadDim>
__global__ void __launch_bounds__(kWarp* kWarps)
    prompt_attention_kernel(KvView keys, KvView values, const float* q, HeadPrep prep, const int32_t* positions,
                            float* out, int n_tokens, int layer, int n_head, int n_head_kv, int n_ctx, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ int row_position[kRows];  // -1: past the step's last row
  __shared__ int warp_last_position[kWarps];
  const int head_dim = keys.head_dim;
  const SharedLayout layout{head_dim};
  const int stride = layout.half_stride();
  auto* q_tile = reinterpret_cast<__half*>(shared);
  const auto k_tile = [&](int stage) {
    return reinterpret_cast<__half*>(shared + layout.q_bytes() + 2 * stage * layout.tile_bytes());
  };
  const auto v_tile = [&](int stage) { return k_tile(stage) + kKeys * stride; };
  const int group = n_head / n_head_kv, kv_head = blockIdx.y;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  auto* staged =
      reinterpret_cast<float*>(shared + layout.q_bytes() + 2 * kStages * layout.tile_bytes()) + warp * head_dim;
  const int first_flat = blockIdx.x * kRows, n_flat = n_tokens * group;
  const int warp_row = warp * kWarpRows;
  sdk::cuda::start_after_previous_kernel();

  if (lane < kWarpRows) {
    const int flat = first_flat + warp_row + lane;
    row_position[warp_row + lane] = flat < n_flat ? positions[flat / group] : -1;
  }
  int warp_last = lane < kWarpRows ? row_position[warp_row + lane] : -1;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, offset));
  if (lane == 0) warp_last_position[warp] = warp_last;
  __syncthreads();
  int last = -1;
  for (int w = 0; w < kWarps; ++w) last = max(last, warp_last_position[w]);

  // The first key tile comes in while the queries are prepared.
  const size_t first_row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx;
  const int n_tiles = last / kKeys + 1;
  const auto load_tile = [&](int tile) {
    load_stage(keys, values, first_row + tile * kKeys, min(kKeys, last + 1 - tile * kKeys), kKeys,
               k_tile(tile % kStages), v_tile(tile % kStages), stride);
  };
  load_tile(0);
  sdk::cuda::commit_async_copies();

  // The warp's queries, each staged in the warp's float row, prepared as the per-token kernel prepares
  // them, scaled and rounded to f16.
  for (int r = warp_row; r < warp_row + kWarpRows; ++r) {
    const int flat = first_flat + r;
    if (row_position[r] >= 0) {
      const float* q_row = q + (int64_t{flat / group} * n_head + kv_head * group + flat % group) * head_dim;
      for (int i = lane; i < head_dim; i += kWarp) staged[i] = q_row[i];
      __syncwarp();
      prepare_head(staged, head_dim, prep.q_gain, prep.eps, prep.half, prep.theta_scale, row_position[r]);
    }
    for (int i = lane; i < head_dim; i += kWarp) {
      q_tile[r * stride + i] = __float2half_rn(row_position[r] >= 0 ? staged[i] * scale : 0.0f);
    }
  }

  const int g = lane / 4;
  const int position[2] = {row_position[warp_row + g], row_position[warp_row + g + 8]};
  RowState state;
  Accumulator output[kMaxHeadDim / 8] = {};
  for (int tile = 0; tile < n_tiles; ++tile) {
    if (tile + 1 < n_tiles) load_tile(tile + 1);
    // A group per tile, empty after the last, so that waiting for all but the newest leaves this tile's.
    sdk::cuda::commit_async_copies();
    sdk::cuda::wait_async_copies<1>();
    __syncthreads();  // every thread's copies and the queries are in shared memory
    const int first_key = tile * kKeys;
    if (first_key <= warp_last) {
      Accumulator scores[kKeyTiles];
      score_tile(q_tile + warp_row * stride, k_tile(tile % kStages), head_dim, stride, scores);
      FragmentA probabilities[kKeySlices];
      float correction[2];
      softmax_tile(scores, position, first_key, state, probabilities, correction);
      accumulate_tile<kMaxHeadDim>(probabilities, correction, v_tile(tile % kStages), head_dim, stride, output);
    }
    __syncthreads();  // the next iteration refills this stage (with tile + 2)
  }

  // Each row divided by its sum, a quad's lanes writing two adjacent columns of each 8.
  const int t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = state.partial_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = warp_row + g + 8 * h, flat = first_flat + r;
    if (position[h] < 0) continue;
    float* out_row = out + (int64_t{flat / group} * n_head + kv_head * group + flat % group) * head_dim;
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 8; ++c) {
      if (8 * c < head_dim) {
        *reinterpret_cast<float2*>(out_row + 8 * c + 2 * t) =
            make_float2(output[c][2 * h] / sum, output[c][2 * h + 1] / sum);
      }
    }
  }
}

// The kernel whose output registers fit head_dim most closely, or nullptr past 256 (the registers of O
// would spill).
using PromptAttentionKernel = decltype(&prompt_attention_kernel<64>);
PromptAttentionKernel kernel_for(int head_dim) {
  if (head_dim <= 64) return prompt_attention_kernel<64>;
  if (head_dim <= 128) return prompt_attention_kernel<128>;
  if (head_dim <= 256) return prompt_attention_kernel<256>;
  return nullptr;
}

}  // namespace

bool launch_prompt_attention(cudaStream_t stream, const KvView& keys, const KvView& values, const float* q,
                             const HeadPrep& prep, const int32_t* positions, float* out, int n_tokens, int layer,
                             int n_head, int n_head_kv, int n_ctx, float scale) {
  if (keys.head_dim % 16 != 0) return false;  // the mma tiles cover whole 16-value slices
  const PromptAttentionKernel kernel = kernel_for(keys.head_dim);
  if (kernel == nullptr) return false;
  const size_t shared_bytes = SharedLayout{keys.head_dim}.bytes();
  // A device that gives a block less than the shape needs refuses here.
  if (!sdk::cuda::opt_in_shared_memory(reinterpret_cast<const void*>(kernel), shared_bytes)) return false;
  const int group = n_head / n_head_kv;
  const dim3 grid(static_cast<unsigned>((n_tokens * group + kRows - 1) / kRows), static_cast<unsigned>(n_head_kv));
  sdk::cuda::launch_after_previous(kernel, grid, kWarp * kWarps, shared_bytes, stream, keys, values, q, prep, positions,
                                   out, n_tokens, layer, n_head, n_head_kv, n_ctx, scale);
  return true;
}

}  // namespace strata::cuda
