#include "cpu_backend.hpp"

#include <array>

#include "backend_objects.hpp"
#include "ops.hpp"
#include "strata/backend.hpp"

namespace strata::cpu {

strata_proc get_proc_address(strata_backend*, const char* name) {
  static const std::array<sdk::NamedFunction, 6> kFunctions{{
      {STRATA_BACKEND_PROC_WEIGHT_ALLOC, sdk::named_entry<&weight_alloc>()},
      {STRATA_BACKEND_PROC_WEIGHT_WRITE, sdk::named_entry<&weight_write>()},
      {STRATA_BACKEND_PROC_WEIGHT_WRITES_DONE, sdk::named_entry<&weight_writes_done>()},
      {STRATA_BACKEND_PROC_MEMORY_INFO, sdk::named_entry<&memory_info>()},
      {STRATA_BACKEND_PROC_SIGNALLED_WRITE, sdk::named_entry<&signalled_write>()},
      {STRATA_BACKEND_PROC_THREAD_COUNT, sdk::named_entry<&thread_count>()},
  }};
  return sdk::find_named_function(kFunctions, name);
}

void thread_count(strata_backend* backend, int32_t* threads) {
  deref(threads, "thread_count") = deref(backend, "backend").pool.size();
}

const strata_backend_table& cpu_backend_table() {
  static constexpr strata_backend_table kTable = ::strata::sdk::with_named_functions<&get_proc_address>(
      ::strata::sdk::with_normed_inputs<&matmul_normed, &route_experts_normed>(
          ::strata::sdk::with_route_experts<&route_experts>(
              ::strata::sdk::with_fused_ops<&attention_rope, &add_rms_norm>(
                  STRATA_BACKEND_TABLE(::strata::cpu, "cpu")))));
  return kTable;
}

}  // namespace strata::cpu
