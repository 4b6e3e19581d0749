// The CUDA launchers of IQ3_XXS, IQ3_S and IQ3_S as 4-bit levels (strata_quant_type's cuda_* fields); built only with
// CUDA.
#pragma once

#include "strata/cuda/launchers.hpp"

namespace strata::iq3::cuda {

STRATA_DECLARE_CUDA_LAUNCHERS(iq3_xxs);
STRATA_DECLARE_CUDA_LAUNCHERS(iq3_s);
STRATA_DECLARE_CUDA_LAUNCHERS(iq3_s_nibbles);

}  // namespace strata::iq3::cuda
