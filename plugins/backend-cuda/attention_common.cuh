// What the per-token attention kernels (attention.cu) and the prompt attention kernel (prompt_attention.cu)
// share: the view of one KV tensor of the cache and the preparation of q and k heads.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "rope.cuh"
#include "strata/cuda/block_kernels.cuh"

namespace strata::cuda {

inline constexpr int kInt8GroupSize = 16;
inline constexpr int kMaxValuesPerLane = 8;  // of a head held by a warp: head_dim up to 256

// The type of one aligned load of kBytes (1 to 16, a power of 2).
template <int kBytes>
using VectorOfBytes = std::conditional_t<
    kBytes == 16, uint4,
    std::conditional_t<kBytes == 8, uint2,
                       std::conditional_t<kBytes == 4, uint32_t, std::conditional_t<kBytes == 2, uint16_t, uint8_t>>>>;

// Where one KV tensor (keys or values) lives; half_rows or (levels, scales) by the cache type.
struct KvView {
  __half* halves;
  int8_t* levels;
  float* scales;
  int head_dim, groups_per_row;

  __device__ float load(size_t row, int i) const {
    if (halves != nullptr) return __half2float(halves[row * head_dim + i]);
    return static_cast<float>(levels[row * head_dim + i]) * scales[row * groups_per_row + i / kInt8GroupSize];
  }
  // Values first .. first + kRun - 1 of a row as load gives them, by one vector load (kRun 1, 2, 4 or 8;
  // first a multiple of kRun, head_dim too: the run is aligned and within one int8 group).
  template <int kRun>
  __device__ void load_run(size_t row, int first, float out[kRun]) const {
    if (halves != nullptr) {
      const auto bits = *reinterpret_cast<const VectorOfBytes<2 * kRun>*>(halves + row * head_dim + first);
      const auto* run = reinterpret_cast<const __half*>(&bits);
#pragma unroll
      for (int i = 0; i < kRun; ++i) out[i] = __half2float(run[i]);
      return;
    }
    const auto bits = *reinterpret_cast<const VectorOfBytes<kRun>*>(levels + row * head_dim + first);
    const auto* run = reinterpret_cast<const int8_t*>(&bits);
    const float scale = scales[row * groups_per_row + first / kInt8GroupSize];
#pragma unroll
    for (int i = 0; i < kRun; ++i) out[i] = static_cast<float>(run[i]) * scale;
  }
  // dot(row, x) over head_dim values; f16 rows of whole 8-value chunks are read 16 bytes at a time,
  // kInFlight of them at once.
  template <int kInFlight>
  __device__ float dot(size_t row, const float* x) const {
    float sum = 0.0f;
    if (halves != nullptr && head_dim % 8 == 0) {
      const uint4* chunks = reinterpret_cast<const uint4*>(halves + row * head_dim);
#pragma unroll kInFlight
      for (int c = 0; c < head_dim / 8; ++c) {
        const uint4 bits = chunks[c];
        const __half2* pairs = reinterpret_cast<const __half2*>(&bits);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float2 pair = __half22float2(pairs[i]);
          sum += pair.x * x[8 * c + 2 * i] + pair.y * x[8 * c + 2 * i + 1];
        }
      }
      return sum;
    }
    for (int i = 0; i < head_dim; ++i) sum += load(row, i) * x[i];
    return sum;
  }
  // Asks L2 for rows [first, first + rows), the team's threads (thread of threads) taking a line at a time.
  // Only L2, the level all SMs share: rows a kernel before this one is still writing may be asked for too.
  __device__ void prefetch_rows(size_t first, int rows, int thread, int threads) const {
    const auto bytes_of = [&](const auto* data, int per_row) {
      sdk::cuda::prefetch_lines(reinterpret_cast<const uint8_t*>(data + first * per_row),
                                static_cast<size_t>(rows) * per_row * sizeof(*data), thread, threads);
    };
    if (halves != nullptr) {
      bytes_of(halves, head_dim);
    } else {
      bytes_of(levels, head_dim);
      bytes_of(scales, groups_per_row);
    }
  }
  // Values i..i + 7 of a row as f16 (i a multiple of 8, head_dim too): int8 levels times their group's
  // scale (as load), rounded to f16.
  __device__ uint4 halves8(size_t row, int i) const {
    if (halves != nullptr) return *reinterpret_cast<const uint4*>(halves + row * head_dim + i);
    const uint2 packed = *reinterpret_cast<const uint2*>(levels + row * head_dim + i);
    const auto* eight = reinterpret_cast<const int8_t*>(&packed);
    const float scale = scales[row * groups_per_row + i / kInt8GroupSize];
    uint4 result;
    auto* pairs = reinterpret_cast<__half2*>(&result);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      pairs[k] =
          __floats2half2_rn(static_cast<float>(eight[2 * k]) * scale, static_cast<float>(eight[2 * k + 1]) * scale);
    }
    return result;
  }
};

// How q and k heads are prepared before use (strata_qk_prepare): RMS norm with a gain where one is given,
// then the NEOX rotation of the first 2 * half values (half == 0: none).
struct HeadPrep {
  const float* q_gain;
  const float* k_gain;
  float eps;
  int half;
  float theta_scale;
};

// Asks L2 for the Q and K head norms' gains (weights, so before the wait): warp 0 the key's, warp 1 the query's.
__device__ inline void prefetch_gains(const HeadPrep& prep, int head_dim, int warp) {
  const float* gain = warp == 0 ? prep.k_gain : warp == 1 ? prep.q_gain : nullptr;
  if (gain != nullptr) {
    sdk::cuda::prefetch_lines(reinterpret_cast<const uint8_t*>(gain), head_dim * sizeof(float),
                              threadIdx.x % sdk::cuda::kWarp, sdk::cuda::kWarp);
  }
}

// A head of head_dim values (at most kMaxValuesPerLane * 32) in shared memory, prepared in place by one warp as
// the rms_norm and rope_neox kernels (elementwise.cu) would: the same angles and products, the sum of squares
// taken in another order, so fused and separate ops agree within rounding. (A warp per head: the per-token
// kernels prepare the key and the query on two warps at once, the prompt kernel's warps rows of their own.)
// A lane's gains are loaded together with its sum's values, all in flight at once. Not inlined: the decode
// kernels call it for the key and for the query, and one copy of it (its rotation's range reduction is most
// of it) is code a kernel run once per layer fetches once instead of twice.
__device__ __noinline__ inline void prepare_head(float* head, int head_dim, const float* gain, float eps, int half,
                                                 float theta_scale, int position) {
  const int lane = threadIdx.x % sdk::cuda::kWarp;
  if (gain != nullptr) {
    float gains[kMaxValuesPerLane];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxValuesPerLane; ++k) {
      const int i = lane + k * sdk::cuda::kWarp;
      if (i < head_dim) {
        gains[k] = gain[i];
        sum += head[i] * head[i];
      }
    }
    const float scale = 1.0f / sqrtf(sdk::cuda::warp_sum(sum) / static_cast<float>(head_dim) + eps);
#pragma unroll
    for (int k = 0; k < kMaxValuesPerLane; ++k) {
      const int i = lane + k * sdk::cuda::kWarp;
      if (i < head_dim) head[i] = head[i] * scale * gains[k];
    }
    __syncwarp();
  }
  rotate_head(head, half, position, theta_scale, lane, sdk::cuda::kWarp);
  __syncwarp();
}

// What the tensor-core kernels (the prompt kernel, the grouped split decode kernel) share: K/V tiles of f16
// rows in shared memory, padded by kHalfPad halves per row (16 bytes, so that the 8 rows an ldmatrix reads
// hit distinct banks), and the online softmax state of a lane's rows.
inline constexpr int kHalfPad = 8;

// Values i .. i + 7 of a cache row into shared memory as f16: an f16 row by an asynchronous copy (complete
// after wait_async_copies), an int8 row dequantized now, and zero outside the tile's rows (a zero value row
// keeps masked products at 0 whatever the cache holds there).
__device__ inline void load_chunk(const KvView& source, size_t row, int i, bool inside, __half* destination) {
  if (inside && source.halves != nullptr) {
    sdk::cuda::copy16_async(destination, source.halves + row * source.head_dim + i, 16);
    return;
  }
  *reinterpret_cast<uint4*>(destination) = inside ? source.halves8(row, i) : make_uint4(0, 0, 0, 0);
}

// Cache rows first_row .. first_row + count - 1 of the keys and the values into a stage's tiles of tile_rows
// rows (the rest zero), the block's threads taking 16 bytes at a time.
__device__ inline void load_stage(const KvView& keys, const KvView& values, size_t first_row, int count, int tile_rows,
                                  __half* k_tile, __half* v_tile, int stride) {
  const int chunks = keys.head_dim / 8;
  for (int item = threadIdx.x; item < tile_rows * chunks; item += blockDim.x) {
    const int r = item / chunks, i = 8 * (item % chunks);
    load_chunk(keys, first_row + r, i, r < count, k_tile + r * stride + i);
    load_chunk(values, first_row + r, i, r < count, v_tile + r * stride + i);
  }
}

// The softmax state of a lane's two rows, g and g + 8 of its warp's 16 (lane 4g + t): the running maxima
// and the lane's part of each running sum (its quad's four parts add up to the row's sum).
struct RowState {
  float max[2] = {-INFINITY, -INFINITY};
  float partial_sum[2] = {0.0f, 0.0f};

  // Takes keys_max (the largest visible score of row h in a slice of keys) into the row's maximum; returns
  // the base the slice's weights are taken against (0 while the row has seen nothing) and sets correction,
  // the factor that rescales the row's earlier sums and outputs (0 while it had seen nothing).
  __device__ float advance(int h, float keys_max, float& correction) {
    const float new_max = fmaxf(max[h], keys_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    correction = expf(max[h] - base);
    max[h] = new_max;
    return base;
  }
};

// A warp's output accumulators (kTiles of 16 x 8) rescaled by their rows' factors: a lane's elements 0-1
// are row g's, 2-3 row g + 8's.
template <int kTiles>
__device__ void rescale_rows(float (&output)[kTiles][4], const float (&factor)[2]) {
#pragma unroll
  for (int c = 0; c < kTiles; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) output[c][e] *= factor[e / 2];
  }
}

// Whether key first_key + 8 j + 2 t + e (accumulator j's element e of lane 4g + t) is visible to a row at position.
__device__ inline bool key_visible(int first_key, int j, int e, int position) {
  return first_key + 8 * j + 2 * static_cast<int>(threadIdx.x % 4) + e <= position;
}

// The largest visible score of row h (of a lane's two) over kTiles x 8 keys from first_key, across the quad
// that holds the row; -inf where none is visible.
template <int kTiles>
__device__ float visible_max(const float (&scores)[kTiles][4], int h, int first_key, int position) {
  float result = -INFINITY;
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (key_visible(first_key, j, e, position)) result = fmaxf(result, scores[j][2 * h + e]);
    }
  }
  result = fmaxf(result, __shfl_xor_sync(0xffffffffu, result, 1));
  return fmaxf(result, __shfl_xor_sync(0xffffffffu, result, 2));
}

// Steps of at least this many tokens may take the prompt kernel; smaller ones (decode) the per-token one.
inline constexpr int kPromptAttentionMinTokens = 16;

// Launches the prompt attention kernel (prompt_attention.cu) for a step whose K/V rows are already in the
// cache, or returns false where it cannot take the shape (head_dim not a multiple of 16 or above 256, or more
// shared memory than the device gives a block), leaving the step to the per-token kernel.
bool launch_prompt_attention(cudaStream_t stream, const KvView& keys, const KvView& values, const float* q,
                             const HeadPrep& prep, const int32_t* positions, float* out, int n_tokens, int layer,
                             int n_head, int n_head_kv, int n_ctx, float scale);

}  // namespace strata::cuda
