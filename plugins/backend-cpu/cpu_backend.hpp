// The CPU backend's function table and its manifest options, for the plugin descriptor and for tests that use
// them without loading the plugin.
#pragma once

#include "strata/backend.h"

namespace strata::cpu {

const strata_backend_table& cpu_backend_table();

// Takes the manifest's options for this plugin (JSON object text): "isa", the instruction set of the float
// kernels of every instance that asks for none (auto, avx512, avx2 or scalar). Throws sdk::Failure naming an
// unknown key or a bad value.
void set_plugin_options(const char* options_json);

}  // namespace strata::cpu
