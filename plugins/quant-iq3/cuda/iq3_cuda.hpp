// The CUDA launchers of IQ3_XXS and IQ3_S (strata_quant_type's cuda_* fields); built only with CUDA.
#pragma once

#include "strata/cuda_launchers.hpp"

namespace strata::iq3::cuda {

STRATA_DECLARE_CUDA_LAUNCHERS(iq3_xxs);
STRATA_DECLARE_CUDA_LAUNCHERS(iq3_s);

}  // namespace strata::iq3::cuda
