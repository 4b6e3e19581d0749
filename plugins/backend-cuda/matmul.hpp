// Products of a weight matrix with float activations, shared by the matmul op and moe_ffn.
#pragma once

#include <cstdint>

#include "backend_objects.hpp"

namespace strata::cuda {

// Decode steps (at most this many tokens) read the quantized weights directly; larger batches go through
// f16 tiles and the tensor cores.
inline constexpr int64_t kMaxMatvecTokens = 8;

// Queues out[t][o] = sum_i W[expert][o][i] * x[t][i] for t < n_tokens, o < ne1; x and out are device rows
// of ne0 and ne1 floats.
void multiply(strata_backend& backend, const strata_weight& weight, int64_t expert, const float* x, int64_t n_tokens,
              float* out);

// Queues the type's grouped GEMM (strata_cuda_grouped_gemm): the tiles (device, 3 ints each, the first
// *tile_count of max_tiles used) of f16 rows of x against their experts' matrices, into float rows of out.
void grouped_gemm(strata_backend& backend, const strata_weight& weight, const int32_t* tiles, const int32_t* tile_count,
                  int32_t max_tiles, const void* x_f16, float* out);

}  // namespace strata::cuda
