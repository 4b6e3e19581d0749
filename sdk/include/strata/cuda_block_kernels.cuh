// CUDA kernels for block-quantized weights, shared by quant plugins and backends (include from .cu files).
// A block format is described by a Decoder:
//   static constexpr int block_elements, block_bytes;        // block_elements a multiple of 8
//   __device__ static void decode8(const uint8_t* block, int chunk, float values[8]);
//   static strata_status prepare(strata_error*);              // optional: runs before each launch
// decode8 writes values 8*chunk .. 8*chunk+7 of one block, with the same float operations as the format's
// CPU dequantizer (use __fmul_rn / __fsub_rn where the compiler could otherwise fuse them into an FMA).
// STRATA_DEFINE_CUDA_LAUNCHERS turns a Decoder into the two launchers of strata_quant_type.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "strata/plugin.hpp"

namespace strata::sdk::cuda {

inline constexpr int kChunkValues = 8;
inline constexpr int kMaxMatvecTokens = 8;
inline constexpr int kMatvecRowsPerBlock = 4;  // one warp per row
inline constexpr int kWarp = 32;

// Blocks are packed back to back (34, 98, 110 bytes...), so multi-byte fields are read a byte at a time.
__device__ inline uint32_t load_u16(const uint8_t* p) { return p[0] | (uint32_t{p[1]} << 8); }
__device__ inline uint32_t load_u32(const uint8_t* p) { return load_u16(p) | (load_u16(p + 2) << 16); }
__device__ inline float load_f16(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(load_u16(p))));
}

__device__ inline float warp_sum(float value) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <class Decoder>
__global__ void dequantize_f16_kernel(const uint8_t* blocks, __half* out, int64_t n_chunks) {
  constexpr int kChunksPerBlock = Decoder::block_elements / kChunkValues;
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

// One warp per weight row; lane l decodes chunks l, l + 32, ... and meets every token's activations there.
template <class Decoder>
__global__ void __launch_bounds__(kWarp* kMatvecRowsPerBlock)
    matvec_kernel(const uint8_t* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x, int n_tokens,
                  float* out) {
  constexpr int kChunksPerBlock = Decoder::block_elements / kChunkValues;
  const int lane = threadIdx.x % kWarp;
  const int64_t row = blockIdx.x * int64_t{kMatvecRowsPerBlock} + threadIdx.x / kWarp;
  if (row >= n_rows) return;
  const uint8_t* weight_row = weight + row * row_bytes;
  const int64_t n_chunks = n / kChunkValues;
  float sums[kMaxMatvecTokens] = {};
  for (int64_t chunk = lane; chunk < n_chunks; chunk += kWarp) {
    float w[kChunkValues];
    Decoder::decode8(weight_row + chunk / kChunksPerBlock * Decoder::block_bytes,
                     static_cast<int>(chunk % kChunksPerBlock), w);
#pragma unroll
    for (int t = 0; t < kMaxMatvecTokens; ++t) {
      if (t < n_tokens) {
        const float4* xs = reinterpret_cast<const float4*>(x + t * n + chunk * kChunkValues);
        const float4 a = xs[0], b = xs[1];
        sums[t] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y + w[6] * b.z +
                   w[7] * b.w;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxMatvecTokens; ++t) {
    if (t < n_tokens) {
      const float sum = warp_sum(sums[t]);
      if (lane == 0) out[t * n_rows + row] = sum;
    }
  }
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
  dequantize_f16_kernel<Decoder><<<static_cast<unsigned>((n_chunks + kThreads - 1) / kThreads), kThreads, 0,
                                   static_cast<cudaStream_t>(stream)>>>(static_cast<const uint8_t*>(blocks),
                                                                        reinterpret_cast<__half*>(out), n_chunks);
  return launch_status(error, "dequantize_f16 launch");
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
  const auto grid = static_cast<unsigned>((n_rows + kMatvecRowsPerBlock - 1) / kMatvecRowsPerBlock);
  matvec_kernel<Decoder><<<grid, kWarp * kMatvecRowsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint8_t*>(weight), n, n_rows, row_bytes, x, static_cast<int>(n_tokens), out);
  return launch_status(error, "matvec launch");
}

}  // namespace strata::sdk::cuda

// Defines NAME_dequantize_f16 and NAME_matvec (strata/cuda_launchers.hpp) from a Decoder.
#define STRATA_DEFINE_CUDA_LAUNCHERS(NAME, DECODER)                                                            \
  strata_status NAME##_dequantize_f16(const void* blocks, uint16_t* out, int64_t n_blocks, void* stream,       \
                                      strata_error* error) {                                                  \
    return ::strata::sdk::cuda::launch_dequantize_f16<DECODER>(blocks, out, n_blocks, stream, error);         \
  }                                                                                                            \
  strata_status NAME##_matvec(const void* weight, int64_t n, int64_t n_rows, size_t row_bytes, const float* x, \
                              int64_t n_tokens, float* out, void* stream, strata_error* error) {              \
    return ::strata::sdk::cuda::launch_matvec<DECODER>(weight, n, n_rows, row_bytes, x, n_tokens, out, stream, \
                                                       error);                                                \
  }
