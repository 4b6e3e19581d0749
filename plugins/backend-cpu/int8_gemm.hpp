// The prompt path's int8 matrix kernel (AVX-512 VNNI): a tile of weight rows is decoded once into int8
// levels and per-32 scales by its type (strata_quant_type::cpu_rows_to_int8) and then meets every token of
// the call, instead of each block being decoded again for every 16 tokens as the dot kernels do.
//
// Activations are the Q8_K rows the dot kernels read (the same rounding), re-laid out once per call for
// `vpdpbusd`, which multiplies unsigned bytes by signed ones: a group of 16 tokens is, for each 4 values k..k+3,
// 64 bytes (token i's 4 bytes at 4i) holding q8 + 128, then one Q8_K scale per 256 values and token. A weight
// row's 4 levels are broadcast against that vector, so one instruction makes 4 products for 16 tokens; the
// +128 adds 128 * (sum of the 32 levels) to each group's integer dot, which the kernel starts from instead of 0.
// Then, for types whose values carry offsets (Q4_K's mins, strata_quant_type::cpu_rows_int8_offsets), each token's
// sum of q8 over each 32 values: per 64 values a vector of 16 tokens' two sums as int16 pairs (vpmaddwd's operand).
#pragma once

#include <cstddef>
#include <cstdint>

#include "isa.hpp"
#include "strata/cpu_dot.hpp"
#include "strata/quant.h"

namespace strata::cpu::int8 {

// Tokens per activation vector (16 int32 lanes).
inline constexpr int64_t kGroupTokens = 16;
// Fewer tokens than this take the dot kernels: a group's lanes would mostly multiply padding.
inline constexpr int64_t kMinTokens = 8;
// Values per Q8_K block: rows must be whole blocks.
inline constexpr int64_t kRowMultiple = 256;

// Whether this build and instruction set level run the kernel.
bool available(CpuIsa isa);

// Bytes of the interleaved activations of n_tokens rows of n values (whole groups, 64-byte multiples).
size_t activation_bytes(int64_t n, int64_t n_tokens);

// Writes token group `group` (tokens 16 * group ..) of n_tokens Q8_K rows of n values, stride bytes apart,
// into its place in `interleaved` (activation_bytes long); tokens past n_tokens are zeros with scale 0. Token t
// is row t, or row rows[t] where rows is set.
void interleave_group(int64_t n, const std::byte* q8k_rows, size_t stride, const int32_t* rows, int64_t n_tokens,
                      int64_t group, std::byte* interleaved);

// Floats of scratch multiply_tile needs for n_rows rows of n values.
size_t tile_scratch_floats(int64_t n, int64_t n_rows);

// A type's row decoders for the kernel: offsets is null for a type without them.
struct RowDecoders {
  sdk::CpuRowsToInt8Fn to_int8 = nullptr;
  sdk::CpuRowsInt8OffsetsFn offsets = nullptr;
};

// out[t * out_stride + r] = dot(weight row r, token t) for r < n_rows, t < n_tokens: the rows (row_bytes
// apart) decoded into scratch, then multiplied with the interleaved activations.
void multiply_tile(const RowDecoders& decoders, int64_t n, int64_t n_rows, const std::byte* rows, size_t row_bytes,
                   const std::byte* interleaved, int64_t n_tokens, float* out, size_t out_stride, float* scratch);

}  // namespace strata::cpu::int8
