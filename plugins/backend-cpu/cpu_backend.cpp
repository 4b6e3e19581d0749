#include "cpu_backend.hpp"

#include "ops.hpp"
#include "strata/backend.hpp"

namespace strata::cpu {

const strata_backend_table& cpu_backend_table() {
  static constexpr strata_backend_table kTable =
      ::strata::sdk::with_normed_inputs<&matmul_normed, &route_experts_normed>(
          ::strata::sdk::with_route_experts<&route_experts>(
              ::strata::sdk::with_fused_ops<&attention_rope, &add_rms_norm>(
                  STRATA_BACKEND_TABLE(::strata::cpu, "cpu"))));
  return kTable;
}

}  // namespace strata::cpu
