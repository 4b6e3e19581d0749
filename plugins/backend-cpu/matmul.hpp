// Matrix products against weights in their stored format, shared by the matmul op and moe_ffn.
#pragma once

#include <cstdint>
#include <span>

#include "backend_objects.hpp"

namespace strata::cpu {

// out[t][o] = sum_i W[expert][o][i] * x[row(t)][i] for t < n_tokens, o < ne1; x and out are dense rows of ne0
// and ne1 floats. row(t) is t, or x_rows[t] where x_rows is set: a grouped expert's tokens read in place from
// x's x_row_count rows, whose conversion for the int8 kernel the tasks reading the same x then share (a prompt's
// rows are converted once, not once per expert that a token chose).
struct MatmulTask {
  const strata_weight* weight;
  int64_t expert;
  const float* x;
  int64_t n_tokens;
  float* out;
  const int32_t* x_rows = nullptr;
  int64_t x_row_count = 0;
};

// Computes every task in one pass of the pool over the tiles of all their weights, so several small
// products (a token's experts) share one fork-join. Results do not depend on the thread count.
void run_matmuls(strata_backend& backend, std::span<const MatmulTask> tasks);

}  // namespace strata::cpu
