#include "cuda_backend.hpp"

#include <array>

#include "ops.hpp"
#include "strata/backend.hpp"

namespace strata::cuda {

// Every instance offers the same names: an expert cache (and the reads of a split layer) work on any device the
// backend runs on.
strata_proc get_proc_address(strata_backend*, const char* name) {
  static const std::array kFunctions = {
      sdk::NamedFunction{STRATA_BACKEND_PROC_WEIGHT_ALLOC, sdk::named_entry<&weight_alloc>()},
      sdk::NamedFunction{STRATA_BACKEND_PROC_WEIGHT_WRITE, sdk::named_entry<&weight_write>()},
      sdk::NamedFunction{STRATA_BACKEND_PROC_WEIGHT_WRITES_DONE, sdk::named_entry<&weight_writes_done>()},
      sdk::NamedFunction{STRATA_BACKEND_PROC_MEMORY_INFO, sdk::named_entry<&memory_info>()},
      sdk::NamedFunction{STRATA_BACKEND_PROC_BUFFER_READS, sdk::named_entry<&buffer_reads>()},
      sdk::NamedFunction{STRATA_BACKEND_PROC_SIGNALLED_WRITE, sdk::named_entry<&signalled_write>()}};
  return sdk::find_named_function(kFunctions, name);
}

const strata_backend_table& cuda_backend_table() {
  static constexpr strata_backend_table kTable = ::strata::sdk::with_named_functions<&get_proc_address>(
      ::strata::sdk::with_normed_inputs<&matmul_normed, &route_experts_normed>(
          ::strata::sdk::with_host_memory<&host_alloc, &host_free>(::strata::sdk::with_route_experts<&route_experts>(
              ::strata::sdk::with_concurrency<&concurrent_begin, &concurrent_end>(
                  ::strata::sdk::with_fused_ops<&attention_rope, &add_rms_norm>(
                      STRATA_BACKEND_TABLE_WITH_GRAPHS(::strata::cuda, "cuda")))))));
  return kTable;
}

}  // namespace strata::cuda
