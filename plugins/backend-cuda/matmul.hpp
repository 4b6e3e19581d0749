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

}  // namespace strata::cuda
