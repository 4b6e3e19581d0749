// Causal grouped-query attention for prompt steps, flash-attention style on the tensor cores. The per-token
// kernel (attention.cu) has each query read the whole K/V history; here a block takes 64 query rows of
// one kv head, (token, query head) pairs of its group, and walks the cache in tiles of 64 positions that
// are loaded once into shared memory for all 64 rows.
//
// Per key tile, each of the 4 warps owns 16 query rows: S = Q K^T on the tensor cores (WMMA 16x16x16, f16
// inputs, float accumulation) into shared floats; the online softmax in float, two lanes per row, with the
// causal mask per element (key j is visible to a row iff j <= its token's position, so any positions work,
// consecutive or not); P rounded to f16; the row's output rescaled and O += P V on the tensor cores. O stays
// in shared floats (WMMA fragments cannot be rescaled per row). A tile's keys run from 0 to the largest
// position of its rows; a warp skips the tiles past its own rows' largest position.
//
// Rounding beyond the per-token kernel's: the prepared, scaled query and the probabilities to f16 (and,
// for an int8 cache, the dequantized K/V values); scores, softmax state and sums stay float. The row sum
// adds the rounded probabilities, so each output is a weighted mean of values with the weights it used.
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>

#include "attention_common.cuh"

namespace strata::cuda {
namespace {

using namespace nvcuda;
using sdk::cuda::kWarp;

constexpr int kRows = 64;  // query rows of a block
constexpr int kKeys = 64;  // cache positions of a key tile
constexpr int kWarps = 4;
constexpr int kWarpRows = kRows / kWarps;  // one WMMA tile high
constexpr int kFragment = 16;              // WMMA 16x16x16
constexpr int kHalfPad = 8, kFloatPad = 4;  // per shared row, against bank conflicts
constexpr int kScoreStride = kKeys + kFloatPad, kProbabilityStride = kKeys + kHalfPad;

// The block's dynamic shared memory for one head_dim: q (f16), the key and value tiles (f16), the output
// accumulator (float, which first stages the queries for their preparation), the scores (float) and the
// probabilities (f16). Every part's size is a multiple of 32 bytes, so each stays aligned for WMMA.
struct SharedLayout {
  int head_dim;

  __host__ __device__ int half_stride() const { return head_dim + kHalfPad; }
  __host__ __device__ int float_stride() const { return head_dim + kFloatPad; }
  __host__ __device__ size_t q_bytes() const { return sizeof(__half) * kRows * half_stride(); }
  __host__ __device__ size_t tile_bytes() const { return sizeof(__half) * kKeys * half_stride(); }
  __host__ __device__ size_t output_bytes() const { return sizeof(float) * kRows * float_stride(); }
  __host__ __device__ size_t bytes() const {
    return q_bytes() + 2 * tile_bytes() + output_bytes() + sizeof(float) * kRows * kScoreStride +
           sizeof(__half) * kRows * kProbabilityStride;
  }
};

// Cache rows first_row .. first_row + count - 1 into a shared tile of kKeys rows as f16, the rest zero (a
// zero value row keeps masked products at 0 whatever the cache holds there).
__device__ void load_tile(const KvView& source, size_t first_row, int count, __half* tile, int stride) {
  const int chunks = source.head_dim / 8;
  for (int item = threadIdx.x; item < kKeys * chunks; item += blockDim.x) {
    const int r = item / chunks, c = item % chunks;
    const uint4 bits = r < count ? source.halves8(first_row + r, 8 * c) : make_uint4(0, 0, 0, 0);
    *reinterpret_cast<uint4*>(tile + r * stride + 8 * c) = bits;
  }
}

// S = Q K^T for a warp's 16 rows against the key tile, into the warp's rows of scores.
__device__ void score_tile(const __half* q_rows, const __half* k_tile, int head_dim, int stride, float* score_rows) {
  wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float> scores[kKeys / kFragment];
#pragma unroll
  for (int j = 0; j < kKeys / kFragment; ++j) wmma::fill_fragment(scores[j], 0.0f);
  for (int d = 0; d < head_dim; d += kFragment) {
    wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, __half, wmma::row_major> q;
    wmma::load_matrix_sync(q, q_rows + d, stride);
#pragma unroll
    for (int j = 0; j < kKeys / kFragment; ++j) {
      wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, __half, wmma::col_major> k;
      wmma::load_matrix_sync(k, k_tile + j * kFragment * stride + d, stride);
      wmma::mma_sync(scores[j], q, k, scores[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kKeys / kFragment; ++j) {
    wmma::store_matrix_sync(score_rows + j * kFragment, scores[j], kScoreStride, wmma::mem_row_major);
  }
}

// The online softmax step of one row for the key tile at first_key, by a pair of lanes (half the keys each,
// interleaved): masked scores, the new running max, the probabilities rounded to f16, and the running sum
// and output row rescaled to the new max. A row that has seen no visible key yet keeps max -inf and weights 0.
__device__ void softmax_row(const float* score_row, __half* probability_row, float* output_row, int head_dim,
                            int position, int first_key, float& running_max, float& running_sum) {
  const int side = threadIdx.x % 2;
  float tile_max = -INFINITY;
  for (int c = side; c < kKeys; c += 2) {
    if (first_key + c <= position) tile_max = fmaxf(tile_max, score_row[c]);
  }
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  const float new_max = fmaxf(running_max, tile_max);
  const float base = new_max == -INFINITY ? 0.0f : new_max;
  float sum = 0.0f;
  for (int c = side; c < kKeys; c += 2) {
    const __half weight = first_key + c <= position ? __float2half_rn(expf(score_row[c] - base)) : __float2half_rn(0.0f);
    probability_row[c] = weight;
    sum += __half2float(weight);
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  const float correction = expf(running_max - base);  // 0 while the row has seen nothing
  running_sum = running_sum * correction + sum;
  running_max = new_max;
  if (correction != 1.0f) {
    for (int i = side; i < head_dim; i += 2) output_row[i] *= correction;
  }
}

// O += P V for a warp's 16 rows: the probabilities against the value tile, each 16 output columns loaded
// from shared floats into an accumulator and stored back.
__device__ void accumulate_tile(const __half* probability_rows, const __half* v_tile, int head_dim, int stride,
                                float* output_rows, int output_stride) {
  wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, __half, wmma::row_major> p[kKeys / kFragment];
#pragma unroll
  for (int k = 0; k < kKeys / kFragment; ++k) {
    wmma::load_matrix_sync(p[k], probability_rows + k * kFragment, kProbabilityStride);
  }
  for (int d = 0; d < head_dim; d += kFragment) {
    wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float> o;
    wmma::load_matrix_sync(o, output_rows + d, output_stride, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kKeys / kFragment; ++k) {
      wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, __half, wmma::row_major> v;
      wmma::load_matrix_sync(v, v_tile + k * kFragment * stride + d, stride);
      wmma::mma_sync(o, p[k], v, o);
    }
    wmma::store_matrix_sync(output_rows + d, o, output_stride, wmma::mem_row_major);
  }
}

// Grid (row tiles, kv heads). Row r of the block is flat index blockIdx.x * 64 + r over the step's
// (token, query head of the group) pairs, token-major, so a tile holds 64 / group tokens (or part of them)
// and all their heads of this kv head.
__global__ void __launch_bounds__(kWarp* kWarps)
    prompt_attention_kernel(KvView keys, KvView values, const float* q, HeadPrep prep, const int32_t* positions,
                            float* out, int n_tokens, int layer, int n_head, int n_head_kv, int n_ctx, float scale) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ int row_position[kRows];  // -1: past the step's last row
  __shared__ int warp_last_position[kWarps];
  const int head_dim = keys.head_dim;
  const SharedLayout layout{head_dim};
  const int half_stride = layout.half_stride(), float_stride = layout.float_stride();
  auto* q_tile = reinterpret_cast<__half*>(shared);
  auto* k_tile = reinterpret_cast<__half*>(shared + layout.q_bytes());
  auto* v_tile = reinterpret_cast<__half*>(shared + layout.q_bytes() + layout.tile_bytes());
  auto* output = reinterpret_cast<float*>(shared + layout.q_bytes() + 2 * layout.tile_bytes());
  auto* scores = reinterpret_cast<float*>(shared + layout.q_bytes() + 2 * layout.tile_bytes() + layout.output_bytes());
  auto* probabilities = reinterpret_cast<__half*>(scores + kRows * kScoreStride);
  const int group = n_head / n_head_kv, kv_head = blockIdx.y;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int first_flat = blockIdx.x * kRows, n_flat = n_tokens * group;
  const int warp_row = warp * kWarpRows;
  sdk::cuda::start_after_previous_kernel();

  if (lane < kWarpRows) {
    const int flat = first_flat + warp_row + lane;
    row_position[warp_row + lane] = flat < n_flat ? positions[flat / group] : -1;
  }
  __syncwarp();
  // The warp's queries, each staged in its output row, prepared as the per-token kernel prepares them,
  // scaled and rounded to f16.
  for (int r = warp_row; r < warp_row + kWarpRows; ++r) {
    float* staged = output + r * float_stride;
    const int flat = first_flat + r;
    if (row_position[r] >= 0) {
      const float* q_row = q + (int64_t{flat / group} * n_head + kv_head * group + flat % group) * head_dim;
      for (int i = lane; i < head_dim; i += kWarp) staged[i] = q_row[i];
      __syncwarp();
      prepare_head(staged, head_dim, prep.q_gain, prep.eps, prep.half, prep.theta_scale, row_position[r]);
    }
    for (int i = lane; i < head_dim; i += kWarp) {
      q_tile[r * half_stride + i] = __float2half_rn(row_position[r] >= 0 ? staged[i] * scale : 0.0f);
    }
  }
  __syncwarp();
  for (int r = warp_row; r < warp_row + kWarpRows; ++r) {
    for (int i = lane; i < head_dim; i += kWarp) output[r * float_stride + i] = 0.0f;
  }
  int warp_last = lane < kWarpRows ? row_position[warp_row + lane] : -1;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, offset));
  if (lane == 0) warp_last_position[warp] = static_cast<int>(warp_last);
  __syncthreads();
  int last = -1;
  for (int w = 0; w < kWarps; ++w) last = max(last, warp_last_position[w]);

  // Lane pair (2i, 2i + 1) of a warp keeps the softmax state of the warp's row i.
  const int softmax_row_index = warp_row + lane / 2;
  const int softmax_position = row_position[softmax_row_index];
  float running_max = -INFINITY, running_sum = 0.0f;
  const size_t first_row = (static_cast<size_t>(layer) * n_head_kv + kv_head) * n_ctx;
  for (int first_key = 0; first_key <= last; first_key += kKeys) {
    const int count = min(kKeys, last + 1 - first_key);
    load_tile(keys, first_row + first_key, count, k_tile, half_stride);
    load_tile(values, first_row + first_key, count, v_tile, half_stride);
    __syncthreads();
    if (first_key <= warp_last) {
      score_tile(q_tile + warp_row * half_stride, k_tile, head_dim, half_stride, scores + warp_row * kScoreStride);
      __syncwarp();
      softmax_row(scores + softmax_row_index * kScoreStride, probabilities + softmax_row_index * kProbabilityStride,
                  output + softmax_row_index * float_stride, head_dim, softmax_position, first_key, running_max,
                  running_sum);
      __syncwarp();
      accumulate_tile(probabilities + warp_row * kProbabilityStride, v_tile, head_dim, half_stride,
                      output + warp_row * float_stride, float_stride);
    }
    __syncthreads();  // the tiles are overwritten next
  }

  // Each row divided by its sum (kept by lane 2i for row i), the warp writing a row at a time.
  for (int i = 0; i < kWarpRows; ++i) {
    const float sum = __shfl_sync(0xffffffffu, running_sum, 2 * i);
    const int r = warp_row + i, flat = first_flat + r;
    if (row_position[r] < 0) continue;
    float* out_row = out + (int64_t{flat / group} * n_head + kv_head * group + flat % group) * head_dim;
    for (int k = lane; k < head_dim; k += kWarp) out_row[k] = output[r * float_stride + k] / sum;
  }
}

}  // namespace

bool launch_prompt_attention(cudaStream_t stream, const KvView& keys, const KvView& values, const float* q,
                             const HeadPrep& prep, const int32_t* positions, float* out, int n_tokens, int layer,
                             int n_head, int n_head_kv, int n_ctx, float scale) {
  if (keys.head_dim % kFragment != 0) return false;  // the WMMA tiles cover whole 16-value slices
  const size_t shared_bytes = SharedLayout{keys.head_dim}.bytes();
  // Beyond 48 KiB a kernel must opt in; a device that gives a block less than the shape needs refuses here.
  if (cudaFuncSetAttribute(prompt_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(shared_bytes)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const int group = n_head / n_head_kv;
  const dim3 grid(static_cast<unsigned>((n_tokens * group + kRows - 1) / kRows), static_cast<unsigned>(n_head_kv));
  sdk::cuda::launch_after_previous(prompt_attention_kernel, grid, kWarp * kWarps, shared_bytes, stream, keys, values,
                                   q, prep, positions, out, n_tokens, layer, n_head, n_head_kv, n_ctx, scale);
  return true;
}

}  // namespace strata::cuda
