// The grouped GEMM of strata_cuda_grouped_gemm (quant.h) on the tensor cores, for any Decoder (include
// through strata/cuda_block_kernels.cuh).
#pragma once

#include <mma.h>

#include "strata/cuda_block_common.cuh"

namespace strata::sdk::cuda {

// The grouped GEMM (strata_cuda_grouped_gemm): a block computes one tile of up to 64 tokens against 64
// weight rows. Per step of 32 values it decodes the 64 x 32 weight slice to f16 in shared memory next to
// the tokens' 64 x 32 slice, and its 4 warps (16 tokens each) multiply them on the tensor cores with
// float accumulation.
inline constexpr int kGemmRows = 64, kGemmTokens = STRATA_GEMM_TILE_TOKENS, kGemmStep = 32;
inline constexpr int kGemmPad = 8;  // halves of padding per shared row, against bank conflicts
inline constexpr int kGemmThreads = 128;

template <class Decoder>
__global__ void __launch_bounds__(kGemmThreads) grouped_gemm_kernel(strata_cuda_grouped_gemm args) {
  using namespace nvcuda;
  constexpr int kLd = kGemmStep + kGemmPad;
  __shared__ __align__(32) __half weights[kGemmRows][kLd];
  __shared__ __align__(32) __half tokens[kGemmTokens][kLd];
  __shared__ __align__(32) float staged[kGemmTokens][kGemmRows + 4];
  start_after_previous_kernel();
  if (static_cast<int>(blockIdx.y) >= *args.tile_count) return;
  const int32_t* tile = args.tiles + 3 * blockIdx.y;
  const int expert = tile[0], first = tile[1], count = tile[2];
  const int64_t row0 = int64_t{blockIdx.x} * kGemmRows;
  const int warp = threadIdx.x / kWarp;
  const bool bad_expert = expert < 0 || expert >= args.n_experts;
  const auto* matrix = static_cast<const uint8_t*>(args.weight) + (bad_expert ? 0 : static_cast<size_t>(expert) * args.expert_bytes);
  const auto* x = reinterpret_cast<const __half*>(args.x);

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kGemmRows / 16];
#pragma unroll
  for (int j = 0; j < kGemmRows / 16; ++j) wmma::fill_fragment(acc[j], 0.0f);

  for (int64_t k0 = 0; k0 < args.n; k0 += kGemmStep) {
    // 64 rows x 4 chunks of 8 values each, for weights and tokens: two of each per thread.
    for (int item = threadIdx.x; item < kGemmRows * (kGemmStep / kChunkValues); item += kGemmThreads) {
      const int r = item / (kGemmStep / kChunkValues), c = item % (kGemmStep / kChunkValues);
      __align__(16) __half halves[kChunkValues];
      const int64_t row = row0 + r;
      if (row < args.n_rows) {
        float w[kChunkValues];
        decode_chunk<Decoder>(matrix + row * args.row_bytes, k0 / kChunkValues + c, w);
#pragma unroll
        for (int i = 0; i < kChunkValues; ++i) halves[i] = __float2half_rn(w[i]);
      } else {
#pragma unroll
        for (int i = 0; i < kChunkValues; ++i) halves[i] = __float2half_rn(0.0f);
      }
      *reinterpret_cast<uint4*>(&weights[r][c * kChunkValues]) = *reinterpret_cast<const uint4*>(halves);
      uint4 token_values = make_uint4(0, 0, 0, 0);
      if (r < count) token_values = *reinterpret_cast<const uint4*>(x + (first + r) * args.n + k0 + c * kChunkValues);
      *reinterpret_cast<uint4*>(&tokens[r][c * kChunkValues]) = token_values;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmStep; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::load_matrix_sync(a, &tokens[warp * 16][kk], kLd);
#pragma unroll
      for (int j = 0; j < kGemmRows / 16; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(b, &weights[j * 16][kk], kLd);
        wmma::mma_sync(acc[j], a, b, acc[j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < kGemmRows / 16; ++j) {
    wmma::store_matrix_sync(&staged[warp * 16][j * 16], acc[j], kGemmRows + 4, wmma::mem_row_major);
  }
  __syncthreads();
  for (int item = threadIdx.x; item < count * kGemmRows; item += kGemmThreads) {
    const int t = item / kGemmRows, r = item % kGemmRows;
    if (row0 + r < args.n_rows) {
      args.out[(first + t) * args.n_rows + row0 + r] = bad_expert ? __int_as_float(0x7fc00000) : staged[t][r];
    }
  }
}

}  // namespace strata::sdk::cuda
