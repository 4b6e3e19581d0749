#include "cuda_backend.hpp"

#include "ops.hpp"
#include "strata/backend.hpp"

namespace strata::cuda {

const strata_backend_table& cuda_backend_table() {
  static constexpr strata_backend_table kTable =
      ::strata::sdk::with_normed_inputs<&matmul_normed, &route_experts_normed>(
          ::strata::sdk::with_host_memory<&host_alloc, &host_free>(::strata::sdk::with_route_experts<&route_experts>(
              ::strata::sdk::with_concurrency<&concurrent_begin, &concurrent_end>(
                  ::strata::sdk::with_fused_ops<&attention_rope, &add_rms_norm>(
                      STRATA_BACKEND_TABLE_WITH_GRAPHS(::strata::cuda, "cuda"))))));
  return kTable;
}

}  // namespace strata::cuda
