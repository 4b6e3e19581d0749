// The CUDA launchers of Q4_K, Q5_K and Q6_K (strata_quant_type's cuda_* fields); built only with CUDA.
#pragma once

#include "strata/cuda/launchers.hpp"

namespace strata::quant_k::cuda {

STRATA_DECLARE_CUDA_LAUNCHERS(q4_k);
STRATA_DECLARE_CUDA_LAUNCHERS(q5_k);
STRATA_DECLARE_CUDA_LAUNCHERS(q6_k);

}  // namespace strata::quant_k::cuda
