// The CPU backend's function table, for the plugin descriptor and for tests that use it without loading
// the plugin.
#pragma once

#include "strata/backend.h"

namespace strata::cpu {

const strata_backend_table& cpu_backend_table();

}  // namespace strata::cpu
