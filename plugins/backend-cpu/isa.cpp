#include "isa.hpp"

#include <cstdlib>

#include "strata/plugin.hpp"

namespace strata::cpu {

CpuIsa select_isa(const std::string& from_option) {
  const char* from_env = std::getenv("STRATA_CPU_ISA");
  const bool env_set = from_env != nullptr && *from_env != '\0';
  const std::string requested = env_set ? from_env : from_option;
  for (const char* known : {"auto", "avx512", "avx2", "scalar"}) {
    if (requested == known) return sdk::choose_cpu_isa(requested.c_str(), sdk::detect_cpu_isa()).isa;
  }
  throw sdk::Failure(STRATA_E_INVALID_ARGUMENT, std::string(env_set ? "STRATA_CPU_ISA" : "backend-cpu option isa") +
                                                    " is \"" + requested + "\", not one of auto, avx512, avx2, scalar");
}

}  // namespace strata::cpu
