// The CUDA backend's function table, for the plugin descriptor.
#pragma once

#include "strata/backend.h"

namespace strata::cuda {

const strata_backend_table& cuda_backend_table();

}  // namespace strata::cuda
