// The grouped GEMM of strata_cuda_grouped_gemm (quant.h) on the tensor cores, for any Decoder (include
// through strata/cuda/block_kernels.cuh).
#pragma once

#include <mma.h>

#include "strata/cuda/block_common.cuh"
#include "strata/cuda/q8_kernels.cuh"

namespace strata::sdk::cuda {

// The grouped GEMM (strata_cuda_grouped_gemm): a block computes one tile of up to 64 tokens against 64
// weight rows. Per step it decodes the 64-row weight slice to f16 in shared memory next to the tokens'
// slice, and its 4 warps (16 tokens each) multiply them on the tensor cores with float accumulation.
// Decoding dominates (a prompt's experts hold few tokens each, so every decoded value meets few tokens):
// a Decoder with unpack32 (q8_kernels.cuh) takes the staged kernel, steps of 64 values, each thread
// unpacking one 32-value group of a row from shared lookup tables and scaling its levels (in f16 pairs where
// the format allows it exactly), a fraction of the instructions of decode8's 8 values at a time (which the
// other Decoders take, in steps of 32). Both give the same f16 weights: d * level - m rounded once is what
// decode8 computes too. The staged kernel's raw blocks and tokens come ahead into shared memory by
// asynchronous copies and its steps overlap (see grouped_gemm_staged_kernel), so that a step waits neither
// on scattered global loads nor on a second barrier.
inline constexpr int kGemmRows = 64, kGemmTokens = STRATA_GEMM_TILE_TOKENS, kGemmStep = 32;
inline constexpr int kGemmPad = 8;  // halves of padding per shared row, against bank conflicts
inline constexpr int kGemmThreads = 128;

// Four int8 levels (a word of unpack32) as two f16 pairs of level * multiplier * base. A byte's level + 1152
// is exact in f16 as the bits 0x6400 | (byte ^ 0x80), so a byte permute makes two halves and one FMA
// (level + 1152) * multiplier - 1152 * multiplier the exact level * multiplier (F16Scale promises it fits);
// the multiply by base is then the one rounding, the same rounding of the same product as the float way.
__device__ inline uint2 scale_levels_f16(int32_t levels, __half2 multiplier, __half2 offset, __half2 base) {
  const uint32_t biased = static_cast<uint32_t>(levels) ^ 0x80808080u;
  uint32_t pairs[2] = {__byte_perm(biased, 0x64646464u, 0x5140), __byte_perm(biased, 0x64646464u, 0x7362)};
  uint2 out;
  uint32_t* words = &out.x;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const __half2 value = __hmul2(__hfma2(*reinterpret_cast<const __half2*>(&pairs[i]), multiplier, offset), base);
    words[i] = *reinterpret_cast<const uint32_t*>(&value);
  }
  return out;
}

// The 32 values of group g of a row as f16, from unpack32: value i = d[i / 16] * level i - m, each the exact
// product rounded to f16 once, as decode8's values are. A Decoder with f16_scale (q8_kernels.cuh) scales
// in f16 pairs, 6 instructions per 4 values; the others in float, 14.
template <class Decoder>
__device__ inline void unpack_group_f16(const uint8_t* row, int g, __half* out) {
  int32_t levels[8];
  float d[2], m = 0.0f;
  unpack_group<Decoder>(row, g, levels, d, m);
  if constexpr (requires { Decoder::f16_scale(row, g); }) {
    constexpr int kGroupsPerBlock = Decoder::block_elements / kQ8Group;
    const F16Scale scale = Decoder::f16_scale(row + g / kGroupsPerBlock * Decoder::block_bytes, g % kGroupsPerBlock);
    const __half2 multiplier = __half2half2(scale.multiplier), base = __half2half2(scale.base);
    const __half2 offset = __hneg2(__hmul2(__half2half2(__ushort_as_half(0x6480)), multiplier));  // -1152 * multiplier
#pragma unroll
    for (int word = 0; word < 8; ++word) {
      *reinterpret_cast<uint2*>(out + 4 * word) = scale_levels_f16(levels[word], multiplier, offset, base);
    }
    return;
  }
  const auto value = [&](int word, int i) {
    const float scaled = __fmul_rn(d[word / 4], static_cast<float>(static_cast<int8_t>(levels[word] >> (8 * i))));
    return Decoder::q8_has_min ? __fsub_rn(scaled, m) : scaled;
  };
#pragma unroll
  for (int word = 0; word < 8; ++word) {
    const __half2 low = __floats2half2_rn(value(word, 0), value(word, 1));
    const __half2 high = __floats2half2_rn(value(word, 2), value(word, 3));
    *reinterpret_cast<uint2*>(out + 4 * word) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&low), *reinterpret_cast<const uint32_t*>(&high));
  }
}

// The staged kernel's unit: whole blocks of at least 128 values (one block of the 256-value formats, four of
// Q8_0's 32), so that a unit spans at least two 64-value steps and its copy, issued at the previous unit's
// first step, has a whole step to land. In shared memory a slot per row holds the unit copied in 16-byte
// pieces from the 16-byte boundary at or below its start (blocks start at even offsets: up to 14 bytes
// before it). The slot is an odd number of 16-byte pieces, so that the 16 rows a warp reads at once fall in
// different banks (an even number, 128 bytes for IQ3_S, made that a 16-way conflict).
template <class Decoder>
inline constexpr int kStagedUnitValues =
    Decoder::block_elements > 4 * kQ8Group ? Decoder::block_elements : 4 * kQ8Group;
template <class Decoder>
inline constexpr int kStagedUnitBytes = kStagedUnitValues<Decoder> / Decoder::block_elements* Decoder::block_bytes;
template <class Decoder>
inline constexpr int kStagedSlotBytes = ((kStagedUnitBytes<Decoder> + 14 + 15) / 16 | 1) * 16;

// Where a block's tile comes from and goes to: the tile list's entry blockIdx.y against rows row0 ...
struct GemmTile {
  int expert, first, count;
  int64_t row0;
  bool bad_expert;
  const uint8_t* matrix;

  __device__ explicit GemmTile(const strata_cuda_grouped_gemm& args) {
    const int32_t* tile = args.tiles + 3 * blockIdx.y;
    expert = tile[0], first = tile[1], count = tile[2];
    row0 = int64_t{blockIdx.x} * kGemmRows;
    bad_expert = expert < 0 || expert >= args.n_experts;
    matrix =
        static_cast<const uint8_t*>(args.weight) + (bad_expert ? 0 : static_cast<size_t>(expert) * args.expert_bytes);
  }
};

using GemmAccumulators = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>[kGemmRows / 16];

// One step's product on the tensor cores: warp w multiplies its 16 tokens' kStep values by all 64 rows'. A
// warp whose tokens are all past the tile's count skips it: a prompt's experts fill their tiles about half
// (32 tokens each for 512 x 8 choices over 128 experts), and the fragment loads are what fills the shared
// memory's bandwidth.
template <int kStep, int kLd>
__device__ inline void multiply_step(const __half (*tokens)[kLd], const __half (*weights)[kLd], int count,
                                     GemmAccumulators& acc) {
  using namespace nvcuda;
  const int warp = threadIdx.x / kWarp;
  if (warp * 16 >= count) return;
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
}

// Bytes of shared memory write_tile takes for its results.
inline constexpr size_t kGemmResultBytes = sizeof(float) * kGemmTokens * (kGemmRows + 4);

// The tile's sums into the tokens' output rows, through `results` (kGemmResultBytes of shared memory that
// the block no longer reads otherwise: the caller's barrier comes first). A bad expert id gives NaN.
__device__ inline void write_tile(const strata_cuda_grouped_gemm& args, const GemmTile& tile, GemmAccumulators& acc,
                                  unsigned char* results) {
  using namespace nvcuda;
  auto& staged = *reinterpret_cast<float(*)[kGemmTokens][kGemmRows + 4]>(results);
  const int warp = threadIdx.x / kWarp;
#pragma unroll
  for (int j = 0; j < kGemmRows / 16; ++j) {
    wmma::store_matrix_sync(&staged[warp * 16][j * 16], acc[j], kGemmRows + 4, wmma::mem_row_major);
  }
  __syncthreads();
  for (int item = threadIdx.x; item < tile.count * kGemmRows; item += kGemmThreads) {
    const int t = item / kGemmRows, r = item % kGemmRows;
    if (tile.row0 + r < args.n_rows) {
      args.out[(tile.first + t) * args.n_rows + tile.row0 + r] =
          tile.bad_expert ? __int_as_float(0x7fc00000) : staged[t][r];
    }
  }
}

// Steps of 32 values by decode8 straight from global memory, for Decoders without unpack32 (or weights the
// staged kernel does not take): per step the 64 rows' slice decoded and the tokens' slice loaded into shared
// memory, a barrier, the product, a barrier.
template <class Decoder>
__global__ void __launch_bounds__(kGemmThreads) grouped_gemm_kernel(strata_cuda_grouped_gemm args) {
  constexpr int kStep = kGemmStep, kLd = kStep + kGemmPad, kChunksPerRow = kStep / kChunkValues;
  __shared__ __align__(32) __half weights[kGemmRows][kLd];
  __shared__ __align__(32) __half tokens[kGemmTokens][kLd];
  __shared__ __align__(32) unsigned char results[kGemmResultBytes];
  let_next_kernel_launch();
  wait_for_previous_kernel();
  if (static_cast<int>(blockIdx.y) >= *args.tile_count) return;
  const GemmTile tile(args);
  const auto* x = reinterpret_cast<const __half*>(args.x);
  GemmAccumulators acc;
#pragma unroll
  for (int j = 0; j < kGemmRows / 16; ++j) nvcuda::wmma::fill_fragment(acc[j], 0.0f);
  for (int64_t k0 = 0; k0 < args.n; k0 += kStep) {
    for (int item = threadIdx.x; item < kGemmRows * kChunksPerRow; item += kGemmThreads) {
      const int r = item / kChunksPerRow, c = item % kChunksPerRow;
      __align__(16) __half halves[kChunkValues];
      const int64_t row = tile.row0 + r;
      float w[kChunkValues] = {};
      if (row < args.n_rows) decode_chunk<Decoder>(tile.matrix + row * args.row_bytes, k0 / kChunkValues + c, w);
#pragma unroll
      for (int i = 0; i < kChunkValues; ++i) halves[i] = __float2half_rn(w[i]);
      *reinterpret_cast<uint4*>(&weights[r][c * kChunkValues]) = *reinterpret_cast<const uint4*>(halves);
    }
    for (int item = threadIdx.x; item < kGemmTokens * kChunksPerRow; item += kGemmThreads) {
      const int t = item / kChunksPerRow, c = item % kChunksPerRow;
      uint4 token_values = make_uint4(0, 0, 0, 0);
      if (t < tile.count)
        token_values = *reinterpret_cast<const uint4*>(x + (tile.first + t) * args.n + k0 + c * kChunkValues);
      *reinterpret_cast<uint4*>(&tokens[t][c * kChunkValues]) = token_values;
    }
    __syncthreads();
    multiply_step<kStep, kLd>(tokens, weights, tile.count, acc);
    __syncthreads();
  }
  write_tile(args, tile, acc, results);
}

// The staged kernel's dynamic shared memory: two stages each of the weight slice (f16), the token slice
// (f16) and the rows' raw units; after the loop the results in the same bytes.
template <class Decoder>
struct StagedGemmLayout {
  static constexpr int kStep = 2 * kQ8Group, kLd = kStep + kGemmPad;
  static constexpr size_t kTokensOffset = size_t{2} * kGemmRows * kLd * sizeof(__half);
  static constexpr size_t kRawOffset = kTokensOffset + size_t{2} * kGemmTokens * kLd * sizeof(__half);
  static constexpr size_t kLoopBytes = kRawOffset + size_t{2} * kGemmRows * kStagedSlotBytes<Decoder>;
  static constexpr size_t kBytes = kLoopBytes > kGemmResultBytes ? kLoopBytes : kGemmResultBytes;
};

// Decoders with unpack32 (rows of whole units, weights and tokens 16-byte aligned), in steps of 64 values,
// software-pipelined with one barrier per step. Step s multiplies the slices of stage s % 2 while the
// threads unpack step s + 1's weights into the other stage (a 32-value group each, from its row's raw unit in
// shared memory) and asynchronous copies bring step s + 1's tokens and, at a unit's first step, the next unit's
// raw blocks. The barrier at the top of a step both publishes what the last step wrote and frees what it read.
template <class Decoder>
__global__ void __launch_bounds__(kGemmThreads) grouped_gemm_staged_kernel(strata_cuda_grouped_gemm args) {
  using Layout = StagedGemmLayout<Decoder>;
  constexpr int kStep = Layout::kStep, kLd = Layout::kLd, kChunksPerRow = kStep / kChunkValues;
  constexpr int kSlot = kStagedSlotBytes<Decoder>, kUnitValues = kStagedUnitValues<Decoder>;
  constexpr int kStepsPerUnit = kUnitValues / kStep;
  static_assert(kStepsPerUnit >= 2, "a unit's copy gets a whole step to land");
  extern __shared__ __align__(16) unsigned char shared[];
  auto& weights = *reinterpret_cast<__half(*)[2][kGemmRows][kLd]>(shared);
  auto& tokens = *reinterpret_cast<__half(*)[2][kGemmTokens][kLd]>(shared + Layout::kTokensOffset);
  auto& raw = *reinterpret_cast<uint8_t(*)[2][kGemmRows][kSlot]>(shared + Layout::kRawOffset);
  let_next_kernel_launch();
  load_decoder_tables<Decoder>();
  wait_for_previous_kernel();
  if (static_cast<int>(blockIdx.y) >= *args.tile_count) return;
  const GemmTile tile(args);
  const auto* matrix_end =
      static_cast<const uint8_t*>(args.weight) + static_cast<size_t>(args.n_experts) * args.expert_bytes;
  const auto* x = reinterpret_cast<const __half*>(args.x);
  const int steps = static_cast<int>(args.n / kStep);
  // Where unit u of the block's row r starts in global memory (rows past the end repeat the last row).
  const auto unit_start = [&](int r, int u) {
    return tile.matrix + min(tile.row0 + r, args.n_rows - 1) * args.row_bytes + int64_t{u} * kStagedUnitBytes<Decoder>;
  };
  const auto stage_unit = [&](int u) {
    constexpr int kPieces = kSlot / 16;
    for (int item = threadIdx.x; item < kGemmRows * kPieces; item += kGemmThreads) {
      const int r = item / kPieces, piece = item % kPieces;
      const auto* aligned =
          reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(unit_start(r, u)) & ~uintptr_t{15});
      const uint8_t* source = aligned + 16 * piece;
      const auto bytes = static_cast<int>(max(int64_t{0}, min(int64_t{16}, static_cast<int64_t>(matrix_end - source))));
      copy16_async(&raw[u % 2][r][16 * piece], bytes > 0 ? source : aligned, bytes);
    }
  };
  // Tokens past the tile's count are zeros (their copies read nothing), up to the last warp that multiplies.
  const int staged_tokens = (tile.count + 15) / 16 * 16;
  const auto stage_tokens = [&](int step) {
    for (int item = threadIdx.x; item < staged_tokens * kChunksPerRow; item += kGemmThreads) {
      const int t = item / kChunksPerRow, c = item % kChunksPerRow;
      const __half* source =
          x + (tile.first + (t < tile.count ? t : 0)) * args.n + int64_t{step} * kStep + c * kChunkValues;
      copy16_async(&tokens[step % 2][t][c * kChunkValues], source, t < tile.count ? 16 : 0);
    }
  };
  // 64 rows x 2 groups of the step: a group per thread.
  const auto unpack_step = [&](int step) {
    const int r = threadIdx.x / 2, half = threadIdx.x % 2, u = step / kStepsPerUnit;
    const uint8_t* unit = &raw[u % 2][r][0] + (reinterpret_cast<uintptr_t>(unit_start(r, u)) & 15);
    unpack_group_f16<Decoder>(unit, step % kStepsPerUnit * (kStep / kQ8Group) + half,
                              &weights[step % 2][r][half * kQ8Group]);
  };

  GemmAccumulators acc;
#pragma unroll
  for (int j = 0; j < kGemmRows / 16; ++j) nvcuda::wmma::fill_fragment(acc[j], 0.0f);
  stage_unit(0);
  stage_tokens(0);
  commit_async_copies();
  wait_async_copies<0>();
  __syncthreads();  // the unit's bytes and the decoder's tables
  unpack_step(0);
  for (int step = 0; step < steps; ++step) {
    wait_async_copies<0>();
    __syncthreads();
    if (step + 1 < steps) stage_tokens(step + 1);
    if (const int u = step / kStepsPerUnit; step % kStepsPerUnit == 0 && (u + 1) * kUnitValues < args.n)
      stage_unit(u + 1);
    commit_async_copies();
    multiply_step<kStep, kLd>(tokens[step % 2], weights[step % 2], tile.count, acc);
    if (step + 1 < steps) unpack_step(step + 1);
  }
  __syncthreads();
  write_tile(args, tile, acc, shared);
}

}  // namespace strata::sdk::cuda
