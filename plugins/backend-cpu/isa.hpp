// The SIMD level of one backend instance's float kernels (the levels and their detection are the SDK's,
// shared with the quant types' dot kernels).
#pragma once

#include <string>

#include "strata/cpu_isa.hpp"

namespace strata::cpu {

using sdk::CpuIsa;

// STRATA_CPU_ISA when set, else from_option (the "isa" option; "auto" when absent): auto, avx512, avx2 or
// scalar (baseline x86-64, for tests and for comparing results). A level this CPU lacks falls back to its
// best, as for the dot kernels; an unknown name throws Failure(INVALID_ARGUMENT).
CpuIsa select_isa(const std::string& from_option);

}  // namespace strata::cpu
