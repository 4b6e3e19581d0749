// The grouped GEMM of strata_cuda_grouped_gemm (quant.h) on the tensor cores, for any Decoder (include
// through strata/cuda_block_kernels.cuh).
#pragma once

#include <mma.h>

#include "strata/cuda_block_common.cuh"
#include "strata/cuda_q8_kernels.cuh"

namespace strata::sdk::cuda {

// The grouped GEMM (strata_cuda_grouped_gemm): a block computes one tile of up to 64 tokens against 64
// weight rows. Per step it decodes the 64-row weight slice to f16 in shared memory next to the tokens'
// slice, and its 4 warps (16 tokens each) multiply them on the tensor cores with float accumulation.
// Decoding dominates (a prompt's experts hold few tokens each, so every decoded value meets few tokens):
// a Decoder with unpack32 (cuda_q8_kernels.cuh) takes steps of 64 values, each thread unpacking one 32-value
// group of a row from shared lookup tables and scaling its levels, about a third of the instructions of
// decode8's 8 values at a time (which the other Decoders take, in steps of 32). Both give the same f16
// weights: d * level - m is what decode8 computes too.
inline constexpr int kGemmRows = 64, kGemmTokens = STRATA_GEMM_TILE_TOKENS, kGemmStep = 32;
inline constexpr int kGemmPad = 8;  // halves of padding per shared row, against bank conflicts
inline constexpr int kGemmThreads = 128;

// The 32 values of group g of a row as f16, from unpack32: value i = d[i / 16] * level i - m.
template <class Decoder>
__device__ inline void unpack_group_f16(const uint8_t* row, int g, __half* out) {
  int32_t levels[8];
  float d[2], m = 0.0f;
  unpack_group<Decoder>(row, g, levels, d, m);
  const auto value = [&](int word, int i) {
    const float scaled = __fmul_rn(d[word / 4], static_cast<float>(static_cast<int8_t>(levels[word] >> (8 * i))));
    return Decoder::q8_has_min ? __fsub_rn(scaled, m) : scaled;
  };
#pragma unroll
  for (int word = 0; word < 8; ++word) {
    // Two values rounded to f16 by one instruction.
    const __half2 low = __floats2half2_rn(value(word, 0), value(word, 1));
    const __half2 high = __floats2half2_rn(value(word, 2), value(word, 3));
    *reinterpret_cast<uint2*>(out + 4 * word) = make_uint2(*reinterpret_cast<const uint32_t*>(&low),
                                                          *reinterpret_cast<const uint32_t*>(&high));
  }
}

// kUnpack (a Decoder with unpack32, rows of a multiple of 64 values): steps of 64 values by unpack32, else
// steps of 32 by decode8.
template <class Decoder, bool kUnpack>
__global__ void __launch_bounds__(kGemmThreads) grouped_gemm_kernel(strata_cuda_grouped_gemm args) {
  using namespace nvcuda;
  constexpr int kStep = kUnpack ? 2 * kQ8Group : kGemmStep, kLd = kStep + kGemmPad, kChunksPerRow = kStep / kChunkValues;
  __shared__ __align__(32) __half weights[kGemmRows][kLd];
  __shared__ __align__(32) __half tokens[kGemmTokens][kLd];
  __shared__ __align__(32) float staged[kGemmTokens][kGemmRows + 4];
  let_next_kernel_launch();
  if constexpr (kUnpack) {
    load_decoder_tables<Decoder>();
    __syncthreads();
  }
  wait_for_previous_kernel();
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

  for (int64_t k0 = 0; k0 < args.n; k0 += kStep) {
    if constexpr (kUnpack) {
      // 64 rows x 2 groups: a group per thread.
      const int r = threadIdx.x / 2, half = threadIdx.x % 2;
      const int64_t row = min(row0 + r, args.n_rows - 1);  // rows past the end decode the last row, unused
      unpack_group_f16<Decoder>(matrix + row * args.row_bytes, static_cast<int>(k0 / kQ8Group) + half, &weights[r][half * kQ8Group]);
    } else {
      for (int item = threadIdx.x; item < kGemmRows * kChunksPerRow; item += kGemmThreads) {
        const int r = item / kChunksPerRow, c = item % kChunksPerRow;
        __align__(16) __half halves[kChunkValues];
        const int64_t row = row0 + r;
        float w[kChunkValues] = {};
        if (row < args.n_rows) decode_chunk<Decoder>(matrix + row * args.row_bytes, k0 / kChunkValues + c, w);
#pragma unroll
        for (int i = 0; i < kChunkValues; ++i) halves[i] = __float2half_rn(w[i]);
        *reinterpret_cast<uint4*>(&weights[r][c * kChunkValues]) = *reinterpret_cast<const uint4*>(halves);
      }
    }
    for (int item = threadIdx.x; item < kGemmTokens * kChunksPerRow; item += kGemmThreads) {
      const int t = item / kChunksPerRow, c = item % kChunksPerRow;
      uint4 token_values = make_uint4(0, 0, 0, 0);
      if (t < count) token_values = *reinterpret_cast<const uint4*>(x + (first + t) * args.n + k0 + c * kChunkValues);
      *reinterpret_cast<uint4*>(&tokens[t][c * kChunkValues]) = token_values;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStep; kk += 16) {
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
