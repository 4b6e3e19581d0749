// The backend table's entries as C++ functions (strata/backend.hpp declares them); cpu_backend.cpp builds
// the table from them. Defined in: backend_instance.cpp (create, destroy, describe), memory.cpp (buffers,
// weights, the expert cache's functions), kv_cache.cpp (kv_create, kv_free), attention.cpp (attention, attention_rope),
// matmul.cpp, moe.cpp (route, route_experts, moe_ffn), elementwise.cpp (get_rows, rms_norm, add_rms_norm, rope_neox,
// add, mul, unary, scale_rows) and normed_input.cpp (matmul_normed, route_experts_normed).
#pragma once

#include "strata/backend.hpp"

namespace strata::cpu {

STRATA_DECLARE_BACKEND_FUNCTIONS();
STRATA_DECLARE_FUSED_BACKEND_FUNCTIONS();
STRATA_DECLARE_ROUTE_EXPERTS_FUNCTION();
STRATA_DECLARE_NORMED_INPUT_FUNCTIONS();
STRATA_DECLARE_EXPERT_CACHE_FUNCTIONS();
STRATA_DECLARE_SIGNALLED_WRITE_FUNCTION();

// The pool's size (named function thread_count).
void thread_count(strata_backend* backend, int32_t* threads);

// The named functions (strata/backend.h): the expert cache's, memory_info and signalled_write (memory.cpp),
// thread_count.
strata_proc get_proc_address(strata_backend* backend, const char* name);

}  // namespace strata::cpu
