// The decode path with 8-bit activations (include through strata/cuda/block_kernels.cuh). A Decoder that
// can hand out a 32-value group of a block as int8 levels offers
//   static constexpr bool q8_has_min;   // whether values carry an offset (Q4_K, Q5_K)
//   __device__ static void unpack32(const uint8_t* block, int group, int32_t levels[8], float d[2], float& m);
// with value i of the group = d[i / 16] * level i - m (m only where q8_has_min). Optionally also
//   __device__ static void load_shared_tables();
// which copies lookup tables unpack32 reads into __shared__ arrays of the Decoder's translation unit (a warp
// gathering 32 random entries of a table meets fewer conflicts in shared memory than in the L1 cache); the
// kernels here call it with all threads of a block, then a barrier, before their wait.
// And optionally, where every group has one d that is an f16 value of the block times a small multiplier,
//   __device__ static F16Scale f16_scale(const uint8_t* block, int group);
// with d = base * multiplier and every |level| * multiplier exact in f16 (an integer below 2048, or such an
// integer over a power of 2, with 1152 * multiplier exact too): the grouped GEMM then scales in f16 pairs.
// Each block of a kernel here first rounds the activations it needs to int8, one float scale per 32 values,
// into shared memory (or reads them rounded already, from global memory); then a weight group meets an
// activation group in 8 __dp4a (4 products each) instead of 32 float products of decoded values. That costs
// the rounding the CPU's dot kernels have too (8-bit activations) and makes the products cheap enough for the
// memory system to be the limit.
#pragma once

#include <cfloat>
#include <cstdint>

#include "strata/cuda/block_common.cuh"

namespace strata::sdk::cuda {

// What f16_scale returns (see above).
struct F16Scale {
  __half base, multiplier;
};

template <class Decoder>
concept HasQ8Unpack = Decoder::block_elements % 32 == 0 &&
                      requires(const uint8_t* block, int32_t* levels, float* d, float& m) {
  Decoder::q8_has_min;
  Decoder::unpack32(block, 0, levels, d, m);
};

inline constexpr int kQ8Group = 32;
inline constexpr int kQ8Warps = 8;
inline constexpr int kMaxRowsPerWarp = 4;
inline constexpr size_t kQ8MaxSharedBytes = 48 * 1024;

// Shared bytes for rows of n activations as int8 plus their scales.
__host__ __device__ inline size_t q8_shared_bytes(int64_t rows, int64_t n) {
  return static_cast<size_t>(rows * n + rows * (n / kQ8Group) * static_cast<int64_t>(sizeof(float)));
}

// Where a decode matvec block's weight rows start in its shared memory when it stages them there: after the
// activations of q8_shared_bytes, on a 16-byte boundary.
__host__ __device__ inline size_t q8_staged_weights_offset(int64_t rows, int64_t n) {
  return (q8_shared_bytes(rows, n) + 15) / 16 * 16;
}

// Whether a kernel's dynamic shared bytes fit next to its static ones (a Decoder's tables) in the 48 KiB a
// block gets without opting in to more.
inline bool fits_shared_memory(const void* kernel, size_t dynamic_bytes) {
  return kernel_attributes(kernel).sharedSizeBytes + dynamic_bytes <= kQ8MaxSharedBytes;
}

// Rows of activations rounded to 8 bits (in shared or global memory): int8 levels [rows][n], and one scale
// per 32 values [rows][n / 32].
struct Q8Rows {
  const int8_t* levels;
  const float* scales;
  int n;
  __device__ const int32_t* group(int row, int g) const {
    return reinterpret_cast<const int32_t*>(levels + static_cast<int64_t>(row) * n + g * kQ8Group);
  }
  __device__ float scale(int row, int g) const { return scales[row * (n / kQ8Group) + g]; }
};

// The scale of a group of 32 activations rounded to 8 bits (quant.h): its largest magnitude maps to 127.
__device__ inline float q8_scale(float amax) { return amax / 127.0f; }

// What a group's values are multiplied by to give their levels, 127 / amax: one division per group, not one
// per value (a float division is a sequence of ~10 instructions with a slow path; rounding spent most of its
// time there). A group whose scale is below the normal floats rounds to zeros (its inverse would overflow).
__device__ inline float q8_inverse_scale(float amax) { return q8_scale(amax) >= FLT_MIN ? 127.0f / amax : 0.0f; }

// A value's level from its group's inverse scale (not the scale: see q8_inverse_scale); q8_round4: four
// values as one word.
__device__ inline int32_t q8_round(float value, float inverse_scale) {
  return __float2int_rn(value * inverse_scale) & 0xff;
}
__device__ inline int32_t q8_round4(float4 v, float inverse_scale) {
  return q8_round(v.x, inverse_scale) | (q8_round(v.y, inverse_scale) << 8) | (q8_round(v.z, inverse_scale) << 16) |
         (q8_round(v.w, inverse_scale) << 24);
}

// The amax of a group of 32 values spread over 8 consecutive lanes (4 each) or 4 lanes (8 each): the
// lanes of the group agree on it. Every lane of the warp must take part.
template <int kLanesPerGroup>
__device__ inline float group_amax(float amax) {
#pragma unroll
  for (int offset = 1; offset < kLanesPerGroup; offset *= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  return amax;
}

// Values 8 * eight .. 8 * eight + 7 of a row of n (a, b) rounded with their group's amax into rows of levels
// and scales (Q8Rows' layout); a group's first eight stores its scale.
__device__ inline void store_rounded_eight(int8_t* levels, float* scales, int n, int row, int eight, float4 a, float4 b,
                                           float amax) {
  const float inverse_scale = q8_inverse_scale(amax);
  int32_t* out = reinterpret_cast<int32_t*>(levels + static_cast<int64_t>(row) * n + 8 * eight);
  out[0] = q8_round4(a, inverse_scale);
  out[1] = q8_round4(b, inverse_scale);
  if (eight % 4 == 0) scales[static_cast<int64_t>(row) * (n / kQ8Group) + eight / 4] = q8_scale(amax);
}

// The amax of the 8 values a, b of a lane whose 4 consecutive lanes hold a group of 32.
__device__ inline float eight_amax(float4 a, float4 b) {
  return group_amax<4>(fmaxf(fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))),
                             fmaxf(fmaxf(fabsf(b.x), fabsf(b.y)), fmaxf(fabsf(b.z), fabsf(b.w)))));
}

// Activations given as the RMS norm of a residual stream (strata_cuda_normed_rows, ABI 1.5): a kernel that
// reads x and y itself and normalizes them in every block, instead of a norm kernel between the one that
// wrote y and it. gain == nullptr: x are the activations as they are.
struct NormedRows {
  const float* y;
  const float* gain;
  float eps;
  float* sum;
};

// Eights of values (8 consecutive) a thread of normalize_rows holds: rows of up to 16 values per thread
// (4096 with 256 threads), kept in registers between the sum of squares and the normalization.
inline constexpr int kNormedEightsPerThread = 2;

// Whether normalize_rows holds rows of n values in a block of threads.
__host__ __device__ inline bool fits_normalize_rows(int64_t n, int threads) {
  return n % kQ8Group == 0 && n <= int64_t{kNormedEightsPerThread} * 8 * threads;
}

// A thread's share of the norm's gains for normalize_rows: weights, which no kernel writes, so a kernel loads
// them before it waits for the previous one (a block of a decode step's norm has nothing else to hide them
// behind).
struct NormGains {
  float4 values[kNormedEightsPerThread][2];
};

__device__ inline NormGains load_norm_gains(const float* gain, int n) {
  NormGains gains;
#pragma unroll
  for (int u = 0; u < kNormedEightsPerThread; ++u) {
    const int eight = threadIdx.x + u * static_cast<int>(blockDim.x);
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const auto* from = reinterpret_cast<const float4*>(gain) + 2 * eight;
    gains.values[u][0] = eight < n / 8 ? from[0] : zero;
    gains.values[u][1] = eight < n / 8 ? from[1] : zero;
  }
  return gains;
}

// Each of the rows (at most kMaxRows) of x (+ norm.y) normalized as the norm kernels do,
// (x + y) * (1 / sqrt(mean((x + y)^2) + eps)) * gain, and handed 8 values at a time to store(row, eight, a, b,
// amax), amax being that of their group of 32 (held by 4 consecutive threads). The eights in [sum_first,
// sum_end) of every row also go to norm.sum as x + y (the caller's share of that output). Every thread of the
// block calls it, with rows that fits_normalize_rows and its gains (load_norm_gains); no barrier at the end.
// Like the norm kernels it reads x and y (the previous kernels' outputs) after the caller's wait.
template <int kMaxRows, class Store>
__device__ inline void normalize_rows(const float* x, const NormedRows& norm, const NormGains& gains, int rows, int n,
                                      int sum_first, int sum_end, Store store) {
  __shared__ float warp_partials[kWarp];
  const int eights = n / 8, stride = static_cast<int>(blockDim.x);
  const int warp_first_eight = threadIdx.x / kWarp * kWarp;
#pragma unroll 1
  for (int row = 0; row < kMaxRows && row < rows; ++row) {
    if (row > 0) __syncthreads();  // the previous row's partials are read
    const int64_t offset = static_cast<int64_t>(row) * n;
    float4 values[kNormedEightsPerThread][2];
    float squares = 0.0f;
#pragma unroll
    for (int u = 0; u < kNormedEightsPerThread; ++u) {
      const int eight = threadIdx.x + u * stride;
      float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
      if (eight < eights) {
        const auto* from = reinterpret_cast<const float4*>(x + offset) + 2 * eight;
        a = from[0], b = from[1];
        if (norm.y != nullptr) {
          const auto* add = reinterpret_cast<const float4*>(norm.y + offset) + 2 * eight;
          const float4 c = add[0], d = add[1];
          a = make_float4(a.x + c.x, a.y + c.y, a.z + c.z, a.w + c.w);
          b = make_float4(b.x + d.x, b.y + d.y, b.z + d.z, b.w + d.w);
        }
        if (norm.sum != nullptr && eight >= sum_first && eight < sum_end) {
          auto* to = reinterpret_cast<float4*>(norm.sum + offset) + 2 * eight;
          to[0] = a, to[1] = b;
        }
        squares += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
      }
      values[u][0] = a, values[u][1] = b;
    }
    const float scale = 1.0f / sqrtf(block_sum(squares, warp_partials) / static_cast<float>(n) + norm.eps);
#pragma unroll
    for (int u = 0; u < kNormedEightsPerThread; ++u) {
      if (warp_first_eight + u * stride >= eights) break;  // whole warps only, for the shuffles of eight_amax
      const int eight = threadIdx.x + u * stride;
      const bool active = eight < eights;
      float4 a = values[u][0], b = values[u][1];
      if (active) {
        const float4 g = gains.values[u][0], h = gains.values[u][1];
        a = make_float4(a.x * scale * g.x, a.y * scale * g.y, a.z * scale * g.z, a.w * scale * g.w);
        b = make_float4(b.x * scale * h.x, b.y * scale * h.y, b.z * scale * h.z, b.w * scale * h.w);
      }
      const float amax = eight_amax(a, b);
      if (active) store(row, eight, a, b, amax);
    }
  }
}

// normalize_rows into 8-bit rows in shared memory (activations_to_shared's layout), block 0 writing the sum;
// the caller's barrier makes them visible.
template <int kMaxRows>
__device__ inline Q8Rows normed_activations_to_shared(const float* x, const NormedRows& norm, const NormGains& gains,
                                                      int rows, int n) {
  extern __shared__ __align__(16) unsigned char shared[];
  auto* levels = reinterpret_cast<int8_t*>(shared);
  auto* scales = reinterpret_cast<float*>(shared + static_cast<int64_t>(rows) * n);
  normalize_rows<kMaxRows>(x, norm, gains, rows, n, 0, blockIdx.x == 0 ? n / 8 : 0,
                           [&](int row, int eight, float4 a, float4 b, float amax) {
                             store_rounded_eight(levels, scales, n, row, eight, a, b, amax);
                           });
  return {levels, scales, n};
}

// Activation rows first_row .. first_row + rows - 1 of n values as 8-bit rows in shared memory, ending with
// a barrier (which the decoder tables need too). Rounded here from the floats x, where each thread takes 8
// consecutive values and the 4 lanes of a group agree on its scale (a block of 256 threads rounds 2048
// values with one load each); or copied, 16 bytes per thread, where they come rounded (levels and scales,
// e.g. a norm's output: strata_quant_type::cuda_matvec_q8). Reading shared memory alone afterwards keeps
// the kernels' activation loads short: a pointer that may be global costs registers and generic loads.
__device__ inline Q8Rows activations_to_shared(const float* x, const int8_t* x_levels, const float* x_scales,
                                               int first_row, int rows, int n) {
  extern __shared__ __align__(16) unsigned char shared[];
  auto* levels = reinterpret_cast<int8_t*>(shared);
  auto* scales = reinterpret_cast<float*>(shared + static_cast<int64_t>(rows) * n);
  const int groups_per_row = n / kQ8Group;
  if (x_levels != nullptr) {
    const auto* from = reinterpret_cast<const int4*>(x_levels + static_cast<int64_t>(first_row) * n);
    for (int i = threadIdx.x; i < rows * n / 16; i += blockDim.x) reinterpret_cast<int4*>(levels)[i] = from[i];
    for (int i = threadIdx.x; i < rows * groups_per_row; i += blockDim.x) {
      scales[i] = x_scales[static_cast<int64_t>(first_row) * groups_per_row + i];
    }
    __syncthreads();
    return {levels, scales, n};
  }
  const int eights_per_row = n / 8, items = rows * eights_per_row;
  const int rounded_items = (items + kWarp - 1) / kWarp * kWarp;  // whole warps, for the shuffles
  for (int item = threadIdx.x; item < rounded_items; item += blockDim.x) {
    const bool active = item < items;
    const int row = active ? item / eights_per_row : 0, eight = item - row * eights_per_row;
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    if (active) {
      const float4* values = reinterpret_cast<const float4*>(x + static_cast<int64_t>(first_row + row) * n + 8 * eight);
      a = values[0], b = values[1];
    }
    const float amax = eight_amax(a, b);
    if (active) store_rounded_eight(levels, scales, n, row, eight, a, b, amax);
  }
  __syncthreads();
  return {levels, scales, n};
}

// The same rows for a kernel whose weight loads should start right after its wait: where they come rounded
// they are read where they are, in global memory, with no copy and no barrier (the kernel publishes its
// decoder tables before its wait: has_decoder_tables); floats are rounded into shared memory as above.
__device__ inline Q8Rows activation_rows(const float* x, const int8_t* x_levels, const float* x_scales, int first_row,
                                         int rows, int n) {
  if (x_levels == nullptr) return activations_to_shared(x, nullptr, nullptr, first_row, rows, n);
  return {x_levels + static_cast<int64_t>(first_row) * n, x_scales + static_cast<int64_t>(first_row) * (n / kQ8Group),
          n};
}

template <class Decoder>
inline constexpr bool has_decoder_tables = requires {
  Decoder::load_shared_tables();
};

template <class Decoder>
__device__ inline void load_decoder_tables() {
  if constexpr (has_decoder_tables<Decoder>) Decoder::load_shared_tables();
}

// One weight group against one activation group: d[0] * (levels 0-15 . x) + d[1] * (levels 16-31 . x)
// - m * sum(x), in units of the activation scale.
template <class Decoder>
__device__ inline float group_dot(const int32_t levels[8], const float d[2], float m, const int32_t* x) {
  const int4 a = reinterpret_cast<const int4*>(x)[0], b = reinterpret_cast<const int4*>(x)[1];
  const int low = __dp4a(levels[3], a.w, __dp4a(levels[2], a.z, __dp4a(levels[1], a.y, __dp4a(levels[0], a.x, 0))));
  const int high = __dp4a(levels[7], b.w, __dp4a(levels[6], b.z, __dp4a(levels[5], b.y, __dp4a(levels[4], b.x, 0))));
  float sum = d[0] * static_cast<float>(low) + d[1] * static_cast<float>(high);
  if constexpr (Decoder::q8_has_min) {
    constexpr int kOnes = 0x01010101;
    const int total = __dp4a(
        b.w, kOnes,
        __dp4a(b.z, kOnes,
               __dp4a(b.y, kOnes,
                      __dp4a(b.x, kOnes,
                             __dp4a(a.w, kOnes, __dp4a(a.z, kOnes, __dp4a(a.y, kOnes, __dp4a(a.x, kOnes, 0))))))));
    sum -= m * static_cast<float>(total);
  }
  return sum;
}

template <class Decoder>
__device__ inline void unpack_group(const uint8_t* row, int g, int32_t levels[8], float d[2], float& m) {
  constexpr int kGroupsPerBlock = Decoder::block_elements / kQ8Group;
  Decoder::unpack32(row + g / kGroupsPerBlock * Decoder::block_bytes, g % kGroupsPerBlock, levels, d, m);
}

// The decode matvec (1 to 8 tokens): kRows consecutive weight rows per warp (n_rows a multiple of kRows), lane l taking
// groups l, l + 32,
// ... of each. With one row per warp a lane of a 2048-value row has 2 groups, too few loads in flight to hide
// their latency; the groups of several rows are independent loads. Each row count has its own register
// budget (kMinBlocks) so that the grid stays within one wave of resident blocks: see q8_rows_per_warp().
// With weights_to_shared the block copies its rows (contiguous: kQ8Warps * kRows of them) into its shared
// memory after the activations while the kernel before it still runs, and the warps decode from there:
// after the wait only the activations come from L2. Without, each warp asks L2 for its rows. kNormed
// instances take the norm of x (+ norm.y) as activations, which every block computes
// (normed_activations_to_shared); the others floats or rounded rows.
// kTokens is the most tokens the instance takes: decode steps of one token take an instance without the
// guarded paths of the others (the code of a kernel that runs once per layer is fetched afresh each time, and
// each activation source is an instance of its own for the same reason).
template <class Decoder, int kRows, int kTokens = kMaxMatvecTokens / kRows, bool kNormed = false>
__global__ void __launch_bounds__(kWarp* kQ8Warps, kRows == 1   ? 3
                                                   : kRows == 2 ? 2
                                                                : 1)
    matvec_q8_kernel(const uint8_t* weight, int n, int64_t n_rows, size_t row_bytes, const float* x,
                     const int8_t* x_levels, const float* x_scales, NormedRows norm, int n_tokens, float* out,
                     bool weights_to_shared) {
  static_assert(kTokens * kRows <= kMaxMatvecTokens);
  let_next_kernel_launch();
  const int lane = threadIdx.x % kWarp;
  const int64_t block_first_row = blockIdx.x * int64_t{kQ8Warps * kRows};
  const int64_t first_row = block_first_row + threadIdx.x / kWarp * kRows;
  extern __shared__ __align__(16) unsigned char shared[];
  uint8_t* staged_rows = shared + q8_staged_weights_offset(n_tokens, n);
  if (weights_to_shared) {
    const int64_t block_rows =
        n_rows - block_first_row < kQ8Warps * kRows ? n_rows - block_first_row : kQ8Warps * kRows;
    copy_to_shared_async(staged_rows, weight + block_first_row * row_bytes, block_rows * row_bytes);
  } else if (first_row < n_rows) {
    prefetch_lines(weight + first_row * row_bytes, kRows * row_bytes, lane, kWarp);
  }
  load_decoder_tables<Decoder>();
  Q8Rows q;
  if constexpr (kNormed) {
    // The norm's loads go out while the staged rows may still be on their way.
    const NormGains gains = load_norm_gains(norm.gain, n);
    wait_for_previous_kernel();
    q = normed_activations_to_shared<kTokens>(x, norm, gains, n_tokens, n);
    wait_async_copies<0>();
    __syncthreads();  // the tables, the staged rows and the rounded activations
  } else {
    wait_async_copies<0>();
    __syncthreads();  // the tables and the staged rows, copied by all threads (weights: no kernel writes them)
    wait_for_previous_kernel();
    q = activation_rows(x, x_levels, x_scales, 0, n_tokens, n);
  }
  if (first_row >= n_rows) return;
  const uint8_t* rows =
      weights_to_shared ? staged_rows + (first_row - block_first_row) * row_bytes : weight + first_row * row_bytes;
  float sums[kRows][kTokens] = {};
#pragma unroll 2
  for (int g = lane; g < n / kQ8Group; g += kWarp) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      int32_t levels[8];
      float d[2], m = 0.0f;
      unpack_group<Decoder>(rows + r * row_bytes, g, levels, d, m);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        if (t < n_tokens) sums[r][t] += q.scale(t, g) * group_dot<Decoder>(levels, d, m, q.group(t, g));
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) store_token_sums(sums[r], n_tokens, n_rows, first_row + r, lane, out);
}

// The result of a slot's or token's rows where an expert id is out of range: NaN, which the caller sees.
__device__ inline float expert_result(bool bad_id, float value) { return bad_id ? __int_as_float(0x7fc00000) : value; }

// strata_cuda_expert_matvec SWIGLU with 8-bit activations: blockIdx.y is the slot (its token's activations
// are rounded), kRows consecutive rows of its expert's gate and up matrices per warp (n_rows a multiple of
// kRows).
template <class Decoder, int kRows>
__global__ void __launch_bounds__(kWarp* kQ8Warps, kRows == 1 ? 4 : 3)
    expert_swiglu_q8_kernel(strata_cuda_expert_matvec args) {
  let_next_kernel_launch();
  load_decoder_tables<Decoder>();
  if constexpr (has_decoder_tables<Decoder>) __syncthreads();  // activation_rows may not have a barrier
  wait_for_previous_kernel();
  const int n = static_cast<int>(args.n), token = static_cast<int>(blockIdx.y) / args.slots_per_token;
  const Q8Rows q = activation_rows(args.x, args.x_levels, args.x_scales, token, 1, n);
  const int lane = threadIdx.x % kWarp;
  const int64_t first_row = (blockIdx.x * int64_t{kQ8Warps} + threadIdx.x / kWarp) * kRows;
  if (first_row >= args.n_rows) return;
  const int expert = args.expert_ids[blockIdx.y];
  const bool bad_id = expert < 0 || expert >= args.n_experts;
  // A bad id reads expert 0 instead (the loop stays unconditional) and its results become NaN.
  const size_t offset =
      static_cast<size_t>(bad_id ? 0 : expert) * args.expert_bytes + static_cast<size_t>(first_row) * args.row_bytes;
  const auto* gate_rows = static_cast<const uint8_t*>(args.weight) + offset;
  const auto* up_rows = static_cast<const uint8_t*>(args.weight2) + offset;
  float gate[kRows] = {}, up[kRows] = {};
  // Not unrolled further: kRows rows of two matrices are enough groups in flight, and more spill registers.
  for (int g = lane; g < n / kQ8Group; g += kWarp) {
    const float scale = q.scale(0, g);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const size_t row_offset = static_cast<size_t>(r) * args.row_bytes;
      int32_t gate_levels[8], up_levels[8];
      float gate_d[2], up_d[2], gate_m = 0.0f, up_m = 0.0f;
      unpack_group<Decoder>(gate_rows + row_offset, g, gate_levels, gate_d, gate_m);
      unpack_group<Decoder>(up_rows + row_offset, g, up_levels, up_d, up_m);
      gate[r] += scale * group_dot<Decoder>(gate_levels, gate_d, gate_m, q.group(0, g));
      up[r] += scale * group_dot<Decoder>(up_levels, up_d, up_m, q.group(0, g));
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float g = warp_sum(gate[r]), u = warp_sum(up[r]);
    if (lane == 0) {
      args.out[static_cast<int64_t>(blockIdx.y) * args.n_rows + first_row + r] =
          expert_result(bad_id, g / (1.0f + expf(-g)) * u);
    }
  }
}

// Warps per output row of the weighted sum, which split the row's run of k x groups between them: with one
// warp per row a decode step's grid (2048 rows) left ~15 warps resident per SM, too few to hide the weight
// loads (ncu on the H200: 38% of the cycles between issues stalled on L1TEX, 23% achieved occupancy).
inline constexpr int kWeightedSumWarpsPerRow = 2;
inline constexpr int kWeightedSumWarps = kQ8Warps * kWeightedSumWarpsPerRow;  // kQ8Warps rows per block

// strata_cuda_expert_matvec WEIGHTED_SUM with 8-bit activations: blockIdx.y is the token (its k slots' rows
// are rounded), kWeightedSumWarpsPerRow warps per output row, whose lanes' groups run over all k experts.
template <class Decoder>
__global__ void __launch_bounds__(kWarp* kWeightedSumWarps)
    expert_weighted_sum_q8_kernel(strata_cuda_expert_matvec args) {
  let_next_kernel_launch();
  load_decoder_tables<Decoder>();
  wait_for_previous_kernel();
  const int n = static_cast<int>(args.n), k = args.slots_per_token, groups = n / kQ8Group;
  const int first_slot = static_cast<int>(blockIdx.y) * k;
  const Q8Rows q = activations_to_shared(args.x, args.x_levels, args.x_scales, first_slot, k, n);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, part = warp % kWeightedSumWarpsPerRow;
  const int64_t row = blockIdx.x * int64_t{kQ8Warps} + warp / kWeightedSumWarpsPerRow;
  const int32_t* ids = args.expert_ids + first_slot;
  bool bad_id = false;
  for (int j = 0; j < k; ++j) bad_id = bad_id || ids[j] < 0 || ids[j] >= args.n_experts;
  float result = 0.0f;
  if (row < args.n_rows && !bad_id) {
    const auto* weight = static_cast<const uint8_t*>(args.weight) + static_cast<size_t>(row) * args.row_bytes;
    // Unrolled by 2, not more: with 6 groups per lane (8 experts of 768 values, when one warp took a row) a
    // deeper unroll measured slower on the H200 (its remainder runs alone); not re-measured at two warps.
#pragma unroll 2
    for (int flat = part * kWarp + lane; flat < k * groups; flat += kWeightedSumWarpsPerRow * kWarp) {
      const int j = flat / groups, g = flat - j * groups;
      int32_t levels[8];
      float d[2], m = 0.0f;
      unpack_group<Decoder>(weight + static_cast<size_t>(ids[j]) * args.expert_bytes, g, levels, d, m);
      result += args.slot_weights[first_slot + j] * q.scale(j, g) * group_dot<Decoder>(levels, d, m, q.group(j, g));
    }
  }
  __shared__ float partial[kWeightedSumWarps];
  result = warp_sum(result);
  if (lane == 0) partial[warp] = result;
  __syncthreads();  // every warp gets here: none returns early
  if (part != 0 || lane != 0 || row >= args.n_rows) return;
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWeightedSumWarpsPerRow; ++w) total += partial[warp + w];
  args.out[static_cast<int64_t>(blockIdx.y) * args.n_rows + row] = expert_result(bad_id, total);
}

}  // namespace strata::sdk::cuda
