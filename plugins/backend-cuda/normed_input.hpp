// ABI 1.5's normed inputs (strata_normed_input) on this backend: the checked operands, and the norm as a
// kernel of its own for an op that cannot compute it inside its kernels (elementwise.cu).
#pragma once

#include <cstdint>
#include <string>

#include "backend_objects.hpp"

namespace strata::cuda {

struct NormedInput {
  sdk::NormedOperands rows;
  const float* gain;
  float eps;
  strata_buffer* normed;  // the input's normed buffer, or nullptr
};

NormedInput normed_input(const strata_normed_input* in, int32_t rows, int32_t width, const std::string& what);

// Queues the norm kernel on the current lane: x + y into the input's sum (the lane's scratch where it has
// none; without y, a copy of x into its sum), the norm into its normed buffer (the lane's scratch buffer where it has
// none), also rounded to 8 bits for a decode step as add_rms_norm's output is. Returns the buffer holding the norm.
const strata_buffer& normalize_first(strata_backend& backend, const NormedInput& input, int32_t rows, int32_t width);

}  // namespace strata::cuda
