// The backend table's entries as C++ functions (strata/backend.hpp declares them) plus the step graph
// entries and the plugin options; cuda_backend.cpp builds the table from them. Defined in:
// backend_instance.cpp (create, destroy, describe, options), memory.cpp (buffers, the named buffer_reads, host memory,
// weights, get_rows), expert_cache.cpp (the named functions weight_alloc, weight_write, weight_writes_done,
// memory_info), attention.cu (kv_create, kv_free, attention, attention_rope), matmul.cu (matmul, matmul_normed),
// route.cu (route, route_experts, route_experts_normed), moe.cu, elementwise.cu (rms_norm, add_rms_norm, rope_neox,
// add, mul, unary, scale_rows), signalled_write.cu (the named signalled_write), graph.cpp and concurrency.cpp.
#pragma once

#include "strata/backend.hpp"

namespace strata::cuda {

STRATA_DECLARE_BACKEND_FUNCTIONS();
STRATA_DECLARE_FUSED_BACKEND_FUNCTIONS();
STRATA_DECLARE_ROUTE_EXPERTS_FUNCTION();
STRATA_DECLARE_HOST_MEMORY_FUNCTIONS();
STRATA_DECLARE_NORMED_INPUT_FUNCTIONS();
STRATA_DECLARE_EXPERT_CACHE_FUNCTIONS();
STRATA_DECLARE_BUFFER_READS_FUNCTION();
STRATA_DECLARE_SIGNALLED_WRITE_FUNCTION();

// The named optional functions (ABI 1.7) by name: cuda_backend.cpp.
strata_proc get_proc_address(strata_backend* backend, const char* name);

// The plugin's options from the manifest (init): defaults under each instance's own options.
void set_plugin_options(const char* options_json);

// graph.cpp
void graph_create(strata_backend* backend, strata_graph** out);
void graph_free(strata_backend* backend, strata_graph* graph);
void graph_begin(strata_backend* backend, strata_graph* graph, const int32_t* positions, int32_t n_positions,
                 int32_t* mode);
void graph_end(strata_backend* backend, strata_graph* graph);
void graph_discard(strata_backend* backend, strata_graph* graph);

// concurrency.cpp
void concurrent_begin(strata_backend* backend);
void concurrent_end(strata_backend* backend);

}  // namespace strata::cuda
