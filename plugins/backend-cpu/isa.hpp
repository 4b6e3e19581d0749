// The SIMD level of one backend instance's float kernels (the levels and their detection are the SDK's,
// shared with the quant types' dot kernels).
#pragma once

#include <string>

#include "strata/cpu_isa.hpp"

namespace strata::cpu {

using sdk::CpuIsa;

// Throws Failure(INVALID_ARGUMENT) naming source and the names allowed unless name is auto, avx512, avx2 or
// scalar.
void check_isa_name(const std::string& name, const std::string& source);

// The first request of: the host's (--cpu-isa), STRATA_CPU_ISA, instance_option (the instance's "isa", empty
// when absent), manifest_option (the manifest's, likewise); none: auto. scalar is baseline x86-64, for tests
// and for comparing results. A level this CPU lacks falls back to its best, as for the dot kernels; an unknown
// name throws Failure(INVALID_ARGUMENT) naming where it came from.
CpuIsa select_isa(const std::string& instance_option, const std::string& manifest_option);

}  // namespace strata::cpu
