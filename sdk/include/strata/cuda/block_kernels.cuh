// CUDA kernels for block-quantized weights, shared by quant plugins and backends (include from .cu files).
// A block format is described by a Decoder:
//   static constexpr int block_elements, block_bytes;        // block_elements a multiple of 8
//   __device__ static void decode8(const uint8_t* block, int chunk, float values[8]);
//   static strata_status prepare(strata_error*);              // optional: runs before each launch
//   q8_has_min, unpack32                                      // optional: see q8_kernels.cuh
// decode8 writes values 8*chunk .. 8*chunk+7 of one block, with the same float operations as the format's
// CPU dequantizer (use __fmul_rn / __fsub_rn where the compiler could otherwise fuse them into an FMA).
// STRATA_DEFINE_CUDA_LAUNCHERS turns a Decoder into the launchers of strata_quant_type. Decode steps take
// the 8-bit activation kernels where the Decoder can unpack and the activations fit in shared memory,
// else the float kernels below; prompts take the grouped GEMM (gemm_kernel.cuh).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>

#include "strata/cuda/block_common.cuh"
#include "strata/cuda/device_limits.cuh"
#include "strata/cuda/gemm_kernel.cuh"
#include "strata/cuda/q8_kernels.cuh"
#include "strata/plugin.hpp"

namespace strata::sdk::cuda {

template <class Decoder>
__global__ void dequantize_f16_kernel(const uint8_t* blocks, __half* out, int64_t n_chunks) {
  constexpr int kChunksPerBlock = Decoder::block_elements / kChunkValues;
  start_after_previous_kernel();
  const int64_t chunk = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (chunk >= n_chunks) return;
  float values[kChunkValues];
  Decoder::decode8(blocks + chunk / kChunksPerBlock * Decoder::block_bytes, static_cast<int>(chunk % kChunksPerBlock),
                   values);
  __align__(16) __half halves[kChunkValues];
#pragma unroll
  for (int i = 0; i < kChunkValues; ++i) halves[i] = __float2half_rn(values[i]);
  reinterpret_cast<uint4*>(out)[chunk] = *reinterpret_cast<const uint4*>(halves);
}

// One warp per weight row; lane l decodes chunks l, l + 32, ..., kChunksInFlight at a time (past the end it
// decodes the last chunk again and drops it, so that the loads stay unconditional), and meets every
// token's activations there.
template <class Decoder>
__global__ void __launch_bounds__(kWarp* kMatvecRowsPerBlock)
    matvec_kernel(const uint8_t* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x, int n_tokens,
                  float* out) {
  let_next_kernel_launch();
  const int lane = threadIdx.x % kWarp;
  const int64_t row = blockIdx.x * int64_t{kMatvecRowsPerBlock} + threadIdx.x / kWarp;
  const uint8_t* weight_row = weight + row * row_bytes;
  if (row < n_rows) prefetch_lines(weight_row, row_bytes, lane, kWarp);
  wait_for_previous_kernel();
  if (row >= n_rows) return;
  const int64_t n_chunks = n / kChunkValues;
  float sums[kMaxMatvecTokens] = {};
  for (int64_t base = lane; base < n_chunks; base += kChunksInFlight * kWarp) {
    float w[kChunksInFlight][kChunkValues];
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u)
      decode_chunk<Decoder>(weight_row, min(base + u * kWarp, n_chunks - 1), w[u]);
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u) {
      const int64_t chunk = base + u * kWarp;
      if (chunk >= n_chunks) break;
#pragma unroll
      for (int t = 0; t < kMaxMatvecTokens; ++t) {
        if (t < n_tokens) sums[t] += dot8(w[u], x + t * n, chunk);
      }
    }
  }
  store_token_sums(sums, n_tokens, n_rows, row, lane, out);
}

// One warp per (output row, blockIdx.y): blockIdx.y is the slot (SWIGLU) or the token (WEIGHTED_SUM).
// SWIGLU walks the gate and the up row together; WEIGHTED_SUM walks the token's k expert rows as one run
// of k * n_chunks chunks, each chunk's product scaled by its slot's weight.
template <class Decoder, int kMode>
__global__ void __launch_bounds__(kWarp* kMatvecRowsPerBlock) expert_matvec_kernel(strata_cuda_expert_matvec args) {
  start_after_previous_kernel();
  const int lane = threadIdx.x % kWarp;
  const int64_t row = blockIdx.x * int64_t{kMatvecRowsPerBlock} + threadIdx.x / kWarp;
  if (row >= args.n_rows) return;
  const int n_chunks = static_cast<int>(args.n / kChunkValues);
  const size_t row_offset = static_cast<size_t>(row) * args.row_bytes;
  const auto* weight = static_cast<const uint8_t*>(args.weight);
  const int k = args.slots_per_token;
  const auto valid = [&](int expert) { return expert >= 0 && expert < args.n_experts; };
  float result = 0.0f;
  bool bad_id = false;
  if constexpr (kMode == STRATA_EXPERT_MATVEC_SWIGLU) {
    const int slot = blockIdx.y;
    const int expert = args.expert_ids[slot];
    bad_id = !valid(expert);
    if (!bad_id) {
      const size_t offset = static_cast<size_t>(expert) * args.expert_bytes + row_offset;
      const uint8_t* gate_row = weight + offset;
      const uint8_t* up_row = static_cast<const uint8_t*>(args.weight2) + offset;
      const float* x = args.x + static_cast<int64_t>(slot / k) * args.n;
      float gate = 0.0f, up = 0.0f;
      for (int base = lane; base < n_chunks; base += kChunksInFlight * kWarp) {
        float g[kChunksInFlight][kChunkValues], u_values[kChunksInFlight][kChunkValues];
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
          const int chunk = min(base + u * kWarp, n_chunks - 1);
          decode_chunk<Decoder>(gate_row, chunk, g[u]);
          decode_chunk<Decoder>(up_row, chunk, u_values[u]);
        }
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
          const int chunk = base + u * kWarp;
          if (chunk >= n_chunks) break;
          gate += dot8(g[u], x, chunk);
          up += dot8(u_values[u], x, chunk);
        }
      }
      gate = warp_sum(gate), up = warp_sum(up);
      result = gate / (1.0f + expf(-gate)) * up;
    }
  } else {
    const int token = blockIdx.y;
    const int32_t* ids = args.expert_ids + token * k;
    for (int j = 0; j < k; ++j) bad_id = bad_id || !valid(ids[j]);
    if (!bad_id) {
      const int total = k * n_chunks;
      for (int base = lane; base < total; base += kChunksInFlight * kWarp) {
        float w[kChunksInFlight][kChunkValues];
        int slot_of[kChunksInFlight], chunk_of[kChunksInFlight];
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
          const int flat = min(base + u * kWarp, total - 1);
          const int j = flat / n_chunks;
          slot_of[u] = token * k + j;
          chunk_of[u] = flat - j * n_chunks;
          decode_chunk<Decoder>(weight + static_cast<size_t>(ids[j]) * args.expert_bytes + row_offset, chunk_of[u],
                                w[u]);
        }
#pragma unroll
        for (int u = 0; u < kChunksInFlight; ++u) {
          if (base + u * kWarp >= total) break;
          result += args.slot_weights[slot_of[u]] *
                    dot8(w[u], args.x + static_cast<int64_t>(slot_of[u]) * args.n, chunk_of[u]);
        }
      }
      result = warp_sum(result);
    }
  }
  if (lane == 0)
    args.out[static_cast<int64_t>(blockIdx.y) * args.n_rows + row] = bad_id ? __int_as_float(0x7fc00000) : result;
}

inline strata_status fail(strata_error* error, strata_status status, const std::string& message) {
  write_error(error, message.c_str());
  return status;
}

inline strata_status launch_status(strata_error* error, const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return STRATA_OK;
  return fail(error, STRATA_E_INTERNAL, std::string(what) + ": " + cudaGetErrorString(status));
}

template <class Decoder>
strata_status prepare(strata_error* error) {
  if constexpr (requires { Decoder::prepare(error); }) {
    return Decoder::prepare(error);
  } else {
    return STRATA_OK;
  }
}

template <class Decoder>
strata_status launch_dequantize_f16(const void* blocks, uint16_t* out, int64_t n_blocks, void* stream,
                                    strata_error* error) {
  if (n_blocks <= 0) return STRATA_OK;
  if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
  constexpr int kThreads = 256;
  const int64_t n_chunks = n_blocks * (Decoder::block_elements / kChunkValues);
  launch_after_previous(dequantize_f16_kernel<Decoder>, static_cast<unsigned>((n_chunks + kThreads - 1) / kThreads),
                        kThreads, 0, static_cast<cudaStream_t>(stream), static_cast<const uint8_t*>(blocks),
                        reinterpret_cast<__half*>(out), n_chunks);
  return launch_status(error, "dequantize_f16 launch");
}

// How many blocks of kernel (kQ8Warps warps, shared_bytes of shared memory) the current device holds at
// once over all its SMs.
inline int64_t resident_blocks(const void* kernel, size_t shared_bytes) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  const int sms = multiprocessor_count();
  return asked_once<std::tuple<const void*, int, size_t>, int64_t>({kernel, device, shared_bytes}, [&] {
    int per_sm = 1;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarp * kQ8Warps, shared_bytes) != cudaSuccess) {
      per_sm = 1;
      (void)cudaGetLastError();
    }
    return int64_t{std::max(per_sm, 1)} * sms;
  });
}

// Rows per warp of the 8-bit decode kernels (matvec_q8_kernel, expert_swiglu_q8_kernel; kernel_of(rows) is
// the instance): a divisor of n_rows, as many as keep a lane's groups in flight (rows x groups per lane x
// matrices) within 8 and rows x tokens within the kernel's 8 accumulators, while the grid (grid_y launches
// of the rows) fits in one wave of resident blocks and still has a block for half of the SMs. A grid too
// large for one wave anyway (an output head of 150k rows) keeps one row per warp and the most warps.
// Measured on the H200 with qwen3-30b-a3b shapes, one token, kernels alone: q (4096 rows of 2048) 8.2 ->
// 6.8 us with 4 rows per warp, gate and up of 8 experts (768 rows each) 15.5 -> 11.6 us with 2.
template <class KernelOf>
int q8_rows_per_warp(int64_t n_rows, int64_t n, int64_t n_tokens, int matrices, int64_t grid_y, int max_rows,
                     size_t shared_bytes, KernelOf kernel_of) {
  const int64_t groups_per_lane = (n / kQ8Group + kWarp - 1) / kWarp * matrices;
  const auto blocks = [&](int rows) { return (n_rows + kQ8Warps * rows - 1) / (kQ8Warps * rows) * grid_y; };
  const int sms = multiprocessor_count();
  const auto fits = [&](int rows) {
    return blocks(rows) <= resident_blocks(reinterpret_cast<const void*>(kernel_of(rows)), shared_bytes) &&
           2 * blocks(rows) >= sms;
  };
  int rows = max_rows;
  while (rows > 1 &&
         (n_rows % rows != 0 || rows * groups_per_lane > 8 || rows * n_tokens > kMaxMatvecTokens || !fits(rows))) {
    rows /= 2;
  }
  return rows;
}

// The matvec_q8_kernel instance of rows per warp (1, 2 or 4) for one token, or for as many as it holds, on
// normed or on other activations.
template <class Decoder, bool kOneToken, bool kNormed>
auto matvec_q8_kernel_of(int rows) {
  constexpr auto tokens = [](int rows_per_warp) { return kOneToken ? 1 : kMaxMatvecTokens / rows_per_warp; };
  return rows == 4   ? matvec_q8_kernel<Decoder, 4, tokens(4), kNormed>
         : rows == 2 ? matvec_q8_kernel<Decoder, 2, tokens(2), kNormed>
                     : matvec_q8_kernel<Decoder, 1, tokens(1), kNormed>;
}

// The instance above for a step of n_tokens.
template <class Decoder, bool kNormed>
auto matvec_q8_kernel_for(int64_t n_tokens, int rows) {
  return n_tokens == 1 ? matvec_q8_kernel_of<Decoder, true, kNormed>(rows)
                       : matvec_q8_kernel_of<Decoder, false, kNormed>(rows);
}

// matvec_q8_kernel with the rows per warp above, on float activations, on rounded ones (levels, scales) or on
// the norm of x (norm.gain), staged in shared_bytes of shared memory.
template <class Decoder>
void launch_matvec_q8_rows(const uint8_t* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x,
                           const int8_t* levels, const float* scales, const NormedRows& norm, int64_t n_tokens,
                           float* out, size_t shared_bytes, cudaStream_t stream) {
  const bool normed = norm.gain != nullptr;
  const auto kernel_of = [n_tokens, normed](int rows) {
    return normed ? matvec_q8_kernel_for<Decoder, true>(n_tokens, rows)
                  : matvec_q8_kernel_for<Decoder, false>(n_tokens, rows);
  };
  const int rows = q8_rows_per_warp(n_rows, n, n_tokens, 1, 1, kMaxRowsPerWarp, shared_bytes, kernel_of);
  const auto kernel = kernel_of(rows);
  const auto grid = static_cast<unsigned>((n_rows + kQ8Warps * rows - 1) / (kQ8Warps * rows));
  // The weight rows go to shared memory where the copy overlaps the kernel before (a programmatic launch:
  // sm_90 and later), they are copied 16 bytes at a time within the 48 KiB, and every block is resident at
  // once (an output head of 150k rows is many waves and keeps the L2 prefetch). Without the overlap the copy
  // would only add a trip through shared memory.
  const size_t with_rows = q8_staged_weights_offset(n_tokens, n) + size_t{kQ8Warps} * rows * row_bytes;
  const bool weights_to_shared = kernel_waits_for_previous(reinterpret_cast<const void*>(kernel)) &&
                                 is_16_byte_aligned(weight) && row_bytes % 16 == 0 &&
                                 fits_shared_memory(reinterpret_cast<const void*>(kernel), with_rows) &&
                                 grid <= resident_blocks(reinterpret_cast<const void*>(kernel), with_rows);
  launch_after_previous(kernel, grid, kWarp * kQ8Warps, weights_to_shared ? with_rows : shared_bytes, stream, weight,
                        static_cast<int>(n), n_rows, row_bytes, x, levels, scales, norm, static_cast<int>(n_tokens),
                        out, weights_to_shared);
}

template <class Decoder>
strata_status launch_matvec(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x,
                            int64_t n_tokens, float* out, void* stream, strata_error* error) {
  if (n_tokens < 1 || n_tokens > kMaxMatvecTokens || n % Decoder::block_elements != 0) {
    return fail(error, STRATA_E_INVALID_ARGUMENT,
                "matvec: " + std::to_string(n_tokens) + " tokens of " + std::to_string(n) +
                    " values (1 to 8 tokens of whole blocks of " + std::to_string(Decoder::block_elements) + ")");
  }
  if (n_rows <= 0) return STRATA_OK;
  if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  if constexpr (HasQ8Unpack<Decoder>) {
    const size_t shared = q8_shared_bytes(n_tokens, n);
    if (fits_shared_memory(reinterpret_cast<const void*>(matvec_q8_kernel<Decoder, 1>), shared)) {
      launch_matvec_q8_rows<Decoder>(static_cast<const uint8_t*>(weight), n, n_rows, row_bytes, x, nullptr, nullptr,
                                     NormedRows{}, n_tokens, out, shared, cuda_stream);
      return launch_status(error, "matvec launch");
    }
  }
  const auto grid = static_cast<unsigned>((n_rows + kMatvecRowsPerBlock - 1) / kMatvecRowsPerBlock);
  launch_after_previous(matvec_kernel<Decoder>, grid, kWarp * kMatvecRowsPerBlock, 0, cuda_stream,
                        static_cast<const uint8_t*>(weight), n, n_rows, row_bytes, x, static_cast<int>(n_tokens), out);
  return launch_status(error, "matvec launch");
}

// cuda_matvec_q8: the activations come rounded; a Decoder without unpack32 declines (the caller then passes
// float activations to the matvec above).
template <class Decoder>
strata_status launch_matvec_q8(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const int8_t* levels,
                               const float* scales, int64_t n_tokens, float* out, void* stream, strata_error* error) {
  if constexpr (!HasQ8Unpack<Decoder>) {
    return fail(error, STRATA_E_UNSUPPORTED, "matvec_q8: this type has no 8-bit decode kernel");
  } else {
    if (n_tokens < 1 || n_tokens > kMaxMatvecTokens || n % Decoder::block_elements != 0 || levels == nullptr ||
        scales == nullptr) {
      return fail(error, STRATA_E_INVALID_ARGUMENT,
                  "matvec_q8: " + std::to_string(n_tokens) + " tokens of " + std::to_string(n) +
                      " rounded values (1 to 8 tokens of whole blocks of " + std::to_string(Decoder::block_elements) +
                      ", levels and scales given)");
    }
    if (n_rows <= 0) return STRATA_OK;
    const size_t shared = q8_shared_bytes(n_tokens, n);
    if (!fits_shared_memory(reinterpret_cast<const void*>(matvec_q8_kernel<Decoder, 1>), shared)) {
      return fail(error, STRATA_E_UNSUPPORTED, "matvec_q8: the rounded rows do not fit in shared memory");
    }
    if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
    launch_matvec_q8_rows<Decoder>(static_cast<const uint8_t*>(weight), n, n_rows, row_bytes, nullptr, levels, scales,
                                   NormedRows{}, n_tokens, out, shared, static_cast<cudaStream_t>(stream));
    return launch_status(error, "matvec_q8 launch");
  }
}

// cuda_matvec_normed: the 8-bit kernel normalizing its activations in every block; declined where the Decoder
// has no unpack32 or the rows are longer than normalize_rows holds (the caller then normalizes first).
template <class Decoder>
strata_status launch_matvec_normed(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes,
                                   const strata_cuda_normed_rows* x, int64_t n_tokens, float* out, void* stream,
                                   strata_error* error) {
  if constexpr (!HasQ8Unpack<Decoder>) {
    return fail(error, STRATA_E_UNSUPPORTED, "matvec_normed: this type has no 8-bit decode kernel");
  } else {
    if (x == nullptr || x->struct_size < sizeof(strata_cuda_normed_rows) || x->x == nullptr || x->gain == nullptr ||
        n_tokens < 1 || n_tokens > kMaxMatvecTokens || n % Decoder::block_elements != 0) {
      return fail(error, STRATA_E_INVALID_ARGUMENT,
                  "matvec_normed: " + std::to_string(n_tokens) + " tokens of " + std::to_string(n) +
                      " values (1 to 8 tokens of whole blocks of " + std::to_string(Decoder::block_elements) +
                      ", with x and the norm's gain)");
    }
    const size_t shared = q8_shared_bytes(n_tokens, n);
    const bool aligned = is_16_byte_aligned(x->x) && is_16_byte_aligned(x->gain) &&
                         (x->y == nullptr || is_16_byte_aligned(x->y)) &&
                         (x->sum == nullptr || is_16_byte_aligned(x->sum));
    if (!aligned || !fits_normalize_rows(n, kWarp * kQ8Warps) ||
        !fits_shared_memory(reinterpret_cast<const void*>(matvec_q8_kernel<Decoder, 1>), shared)) {
      return fail(error, STRATA_E_UNSUPPORTED,
                  "matvec_normed: rows of " + std::to_string(n) + " values are not normalized in the kernel");
    }
    if (n_rows <= 0) return STRATA_OK;
    if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
    launch_matvec_q8_rows<Decoder>(static_cast<const uint8_t*>(weight), n, n_rows, row_bytes, x->x, nullptr, nullptr,
                                   NormedRows{x->y, x->gain, x->eps, x->sum}, n_tokens, out, shared,
                                   static_cast<cudaStream_t>(stream));
    return launch_status(error, "matvec_normed launch");
  }
}

template <class Decoder>
strata_status launch_expert_matvec(const strata_cuda_expert_matvec* args, void* stream, strata_error* error) {
  if (args == nullptr || !STRATA_HAS_FIELD(args, out)) {
    return fail(error, STRATA_E_INVALID_ARGUMENT, "expert_matvec: missing or short arguments");
  }
  // Fields of a newer ABI than the caller's are absent (the rounded input of ABI 1.2).
  strata_cuda_expert_matvec a{};
  std::memcpy(&a, args, std::min<size_t>(args->struct_size, sizeof a));
  const bool swiglu = a.mode == STRATA_EXPERT_MATVEC_SWIGLU;
  if (!swiglu && a.mode != STRATA_EXPERT_MATVEC_WEIGHTED_SUM) {
    return fail(error, STRATA_E_INVALID_ARGUMENT, "expert_matvec: unknown mode " + std::to_string(a.mode));
  }
  if (a.n % Decoder::block_elements != 0 || a.n_rows < 0 || a.n_slots < 0 || a.slots_per_token <= 0 ||
      a.n_slots % a.slots_per_token != 0 || (swiglu ? a.weight2 == nullptr : a.slot_weights == nullptr)) {
    return fail(error, STRATA_E_INVALID_ARGUMENT,
                "expert_matvec: " + std::to_string(a.n_slots) + " slots of " + std::to_string(a.slots_per_token) +
                    " per token over rows of " + std::to_string(a.n) + " values (whole blocks of " +
                    std::to_string(Decoder::block_elements) + ") with the inputs its mode needs");
  }
  if (a.n_rows == 0 || a.n_slots == 0) return STRATA_OK;
  if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  const auto grid_y = static_cast<unsigned>(swiglu ? a.n_slots : a.n_slots / a.slots_per_token);
  if constexpr (HasQ8Unpack<Decoder>) {
    const bool rounded = a.x_levels != nullptr && a.x_scales != nullptr;
    if (!rounded) a.x_levels = nullptr;
    const size_t shared = q8_shared_bytes(swiglu ? 1 : a.slots_per_token, a.n);
    const auto swiglu_of = [](int rows) {
      return rows == 2 ? expert_swiglu_q8_kernel<Decoder, 2> : expert_swiglu_q8_kernel<Decoder, 1>;
    };
    const int rows = swiglu ? q8_rows_per_warp(a.n_rows, a.n, 1, 2, grid_y, 2, shared, swiglu_of) : 1;
    const auto kernel = swiglu ? swiglu_of(rows) : expert_weighted_sum_q8_kernel<Decoder>;
    if (fits_shared_memory(reinterpret_cast<const void*>(kernel), shared)) {
      const dim3 grid(static_cast<unsigned>((a.n_rows + kQ8Warps * rows - 1) / (kQ8Warps * rows)), grid_y);
      launch_after_previous(kernel, grid, kWarp * (swiglu ? kQ8Warps : kWeightedSumWarps), shared, cuda_stream, a);
      return launch_status(error, "expert_matvec launch");
    }
  }
  const dim3 grid(static_cast<unsigned>((a.n_rows + kMatvecRowsPerBlock - 1) / kMatvecRowsPerBlock), grid_y);
  launch_after_previous(swiglu ? expert_matvec_kernel<Decoder, STRATA_EXPERT_MATVEC_SWIGLU>
                               : expert_matvec_kernel<Decoder, STRATA_EXPERT_MATVEC_WEIGHTED_SUM>,
                        grid, kWarp * kMatvecRowsPerBlock, 0, cuda_stream, a);
  return launch_status(error, "expert_matvec launch");
}

template <class Decoder>
strata_status launch_grouped_gemm(const strata_cuda_grouped_gemm* args, void* stream, strata_error* error) {
  if (args == nullptr || args->struct_size < sizeof(strata_cuda_grouped_gemm)) {
    return fail(error, STRATA_E_INVALID_ARGUMENT, "grouped_gemm: missing or short arguments");
  }
  const strata_cuda_grouped_gemm& a = *args;
  if (a.n % kGemmStep != 0 || a.n % Decoder::block_elements != 0 || a.n_rows < 0 || a.max_tiles < 0 ||
      a.tiles == nullptr || a.tile_count == nullptr) {
    return fail(error, STRATA_E_INVALID_ARGUMENT,
                "grouped_gemm: rows of " + std::to_string(a.n) + " values (whole blocks of " +
                    std::to_string(Decoder::block_elements) + " and a multiple of 32) with a tile list");
  }
  if (a.max_tiles > 65535) return fail(error, STRATA_E_UNSUPPORTED, "grouped_gemm: more than 65535 tiles");
  if (a.n_rows == 0 || a.max_tiles == 0) return STRATA_OK;
  if (const strata_status status = prepare<Decoder>(error); status != STRATA_OK) return status;
  const dim3 grid(static_cast<unsigned>((a.n_rows + kGemmRows - 1) / kGemmRows), static_cast<unsigned>(a.max_tiles));
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  if constexpr (HasQ8Unpack<Decoder>) {
    if (a.n % kStagedUnitValues<Decoder> == 0 && is_16_byte_aligned(a.weight) && is_16_byte_aligned(a.x)) {
      // Beyond 48 KiB a kernel must opt in; a device that gives a block less takes decode8 below.
      const auto kernel = grouped_gemm_staged_kernel<Decoder>;
      constexpr size_t kBytes = StagedGemmLayout<Decoder>::kBytes;
      if (opt_in_shared_memory(reinterpret_cast<const void*>(kernel), kBytes)) {
        launch_after_previous(kernel, grid, kGemmThreads, kBytes, cuda_stream, a);
        return launch_status(error, "grouped_gemm launch");
      }
    }
  }
  launch_after_previous(grouped_gemm_kernel<Decoder>, grid, kGemmThreads, 0, cuda_stream, a);
  return launch_status(error, "grouped_gemm launch");
}

}  // namespace strata::sdk::cuda

// Defines NAME_dequantize_f16, NAME_matvec, NAME_expert_matvec, NAME_grouped_gemm, NAME_matvec_q8 and
// NAME_matvec_normed (strata/cuda/launchers.hpp) from a Decoder.
#define STRATA_DEFINE_CUDA_LAUNCHERS(NAME, DECODER)                                                                    \
  strata_status NAME##_dequantize_f16(const void* blocks, uint16_t* out, int64_t n_blocks, void* stream,               \
                                      strata_error* error) {                                                           \
    return ::strata::sdk::cuda::launch_dequantize_f16<DECODER>(blocks, out, n_blocks, stream, error);                  \
  }                                                                                                                    \
  strata_status NAME##_matvec(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x,         \
                              int64_t n_tokens, float* out, void* stream, strata_error* error) {                       \
    return ::strata::sdk::cuda::launch_matvec<DECODER>(weight, n, n_rows, row_bytes, x, n_tokens, out, stream, error); \
  }                                                                                                                    \
  strata_status NAME##_expert_matvec(const strata_cuda_expert_matvec* args, void* stream, strata_error* error) {       \
    return ::strata::sdk::cuda::launch_expert_matvec<DECODER>(args, stream, error);                                    \
  }                                                                                                                    \
  strata_status NAME##_grouped_gemm(const strata_cuda_grouped_gemm* args, void* stream, strata_error* error) {         \
    return ::strata::sdk::cuda::launch_grouped_gemm<DECODER>(args, stream, error);                                     \
  }                                                                                                                    \
  [[maybe_unused]] strata_status NAME##_matvec_q8(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes,     \
                                                  const int8_t* levels, const float* scales, int64_t n_tokens,         \
                                                  float* out, void* stream, strata_error* error) {                     \
    return ::strata::sdk::cuda::launch_matvec_q8<DECODER>(weight, n, n_rows, row_bytes, levels, scales, n_tokens, out, \
                                                          stream, error);                                              \
  }                                                                                                                    \
  [[maybe_unused]] strata_status NAME##_matvec_normed(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, \
                                                      const strata_cuda_normed_rows* x, int64_t n_tokens, float* out,  \
                                                      void* stream, strata_error* error) {                             \
    return ::strata::sdk::cuda::launch_matvec_normed<DECODER>(weight, n, n_rows, row_bytes, x, n_tokens, out, stream,  \
                                                              error);                                                  \
  }
