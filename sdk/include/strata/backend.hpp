// Header-only helpers for writing a backend plugin in C++: each op is a plain function that throws on
// failure (sdk::Failure for a chosen status), and STRATA_BACKEND_TABLE builds the C table from the
// functions of one namespace, catching exceptions at the boundary.
#pragma once

#include <string_view>

#include "strata/backend.h"
#include "strata/plugin.hpp"

namespace strata::sdk {

// The C entry point of an op `void op(args...)`: the same arguments plus the error buffer.
template <auto Op>
struct BackendEntry;
template <class... Args, void (*Op)(Args...)>
struct BackendEntry<Op> {
  static strata_status call(Args... args, strata_error* error) {
    return guarded(error, [&] { Op(args...); });
  }
};

// A table with the step graph entries (ABI 1.1) of namespace NS filled in: graph_create, graph_free,
// graph_begin, graph_end, graph_discard (see STRATA_BACKEND_GRAPHS).
template <auto Create, auto Free, auto Begin, auto End, auto Discard>
constexpr strata_backend_table with_graphs(strata_backend_table table) {
  table.graph_create = &BackendEntry<Create>::call;
  table.graph_free = Free;
  table.graph_begin = &BackendEntry<Begin>::call;
  table.graph_end = &BackendEntry<End>::call;
  table.graph_discard = Discard;
  return table;
}

// A table with the fused entries (ABI 1.2) of namespace NS filled in: attention_rope and add_rms_norm (see
// STRATA_DECLARE_FUSED_BACKEND_FUNCTIONS).
template <auto AttentionRope, auto AddRmsNorm>
constexpr strata_backend_table with_fused_ops(strata_backend_table table) {
  table.attention_rope = &BackendEntry<AttentionRope>::call;
  table.add_rms_norm = &BackendEntry<AddRmsNorm>::call;
  return table;
}

// A table with the concurrent region entries (ABI 1.3) filled in: concurrent_begin and concurrent_end.
template <auto Begin, auto End>
constexpr strata_backend_table with_concurrency(strata_backend_table table) {
  table.concurrent_begin = &BackendEntry<Begin>::call;
  table.concurrent_end = &BackendEntry<End>::call;
  return table;
}

// A table with the fused router (ABI 1.3) filled in: route_experts (see STRATA_DECLARE_ROUTE_EXPERTS_FUNCTION).
template <auto RouteExperts>
constexpr strata_backend_table with_route_experts(strata_backend_table table) {
  table.route_experts = &BackendEntry<RouteExperts>::call;
  return table;
}

// A table with the host memory entries (ABI 1.4) filled in: host_alloc and host_free.
template <auto Alloc, auto Free>
constexpr strata_backend_table with_host_memory(strata_backend_table table) {
  table.host_alloc = &BackendEntry<Alloc>::call;
  table.host_free = Free;
  return table;
}

// A table with the normed-input ops (ABI 1.5) filled in: matmul_normed and route_experts_normed (see
// STRATA_DECLARE_NORMED_INPUT_FUNCTIONS).
template <auto MatmulNormed, auto RouteExpertsNormed>
constexpr strata_backend_table with_normed_inputs(strata_backend_table table) {
  table.matmul_normed = &BackendEntry<MatmulNormed>::call;
  table.route_experts_normed = &BackendEntry<RouteExpertsNormed>::call;
  return table;
}

// A table whose get_proc_address (ABI 1.7) is GetProcAddress: the backend's named optional functions.
template <auto GetProcAddress>
constexpr strata_backend_table with_named_functions(strata_backend_table table) {
  table.get_proc_address = GetProcAddress;
  return table;
}

// One named optional function: its STRATA_BACKEND_PROC_* name and its C entry.
struct NamedFunction {
  const char* name;
  strata_proc entry;
};

// The C entry of a named function written as `void fn(strata_backend*, args...)` that throws on failure, for a
// NamedFunction: its signature is the name's strata_backend_<name>_fn (the arguments, then strata_error*).
template <auto Fn>
strata_proc named_entry() {
  return reinterpret_cast<strata_proc>(&BackendEntry<Fn>::call);
}

// The entry called name among functions, or NULL: what a backend's get_proc_address answers.
template <class Functions>
strata_proc find_named_function(const Functions& functions, const char* name) {
  if (name == nullptr) return nullptr;
  for (const NamedFunction& function : functions) {
    if (std::string_view(function.name) == name) return function.entry;
  }
  return nullptr;
}

}  // namespace strata::sdk

// The C++ functions a backend namespace defines for STRATA_BACKEND_TABLE: every entry of the table,
// throwing sdk::Failure instead of filling a strata_error; parameters mirror strata/backend.h. Expand it
// inside the backend's namespace.
#define STRATA_DECLARE_BACKEND_FUNCTIONS()                                                                          \
  void create(const strata_backend_config* config, strata_backend** out);                                           \
  void destroy(strata_backend* backend);                                                                            \
  const char* describe(strata_backend* backend);                                                                    \
  void buffer_alloc(strata_backend* backend, size_t bytes, strata_buffer** out);                                    \
  void buffer_free(strata_backend* backend, strata_buffer* buffer);                                                 \
  void buffer_write(strata_backend* backend, strata_buffer* buffer, size_t offset, const void* src, size_t bytes);  \
  void buffer_read(strata_backend* backend, strata_buffer* buffer, size_t offset, void* dst, size_t bytes);         \
  void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out);                   \
  void weight_free(strata_backend* backend, strata_weight* weight);                                                 \
  void kv_create(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out);                   \
  void kv_free(strata_backend* backend, strata_kv_cache* cache);                                                    \
  void get_rows(strata_backend* backend, const strata_weight* table, const int32_t* ids, int32_t n_ids,             \
                strata_buffer* out);                                                                                \
  void rms_norm(strata_backend* backend, const strata_buffer* x, const strata_weight* weight, int32_t rows,         \
                int32_t width, float eps, strata_buffer* out);                                                      \
  void matmul(strata_backend* backend, const strata_weight* w, int32_t expert, const strata_buffer* x,              \
              int32_t n_tokens, const strata_weight* bias, strata_buffer* out);                                     \
  void rope_neox(strata_backend* backend, strata_buffer* x, const int32_t* positions, int32_t n_tokens,             \
                 int32_t n_heads, int32_t head_dim, int32_t n_rot, float base);                                     \
  void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,            \
                 const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out);       \
  void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,             \
             int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights);                          \
  void moe_ffn(strata_backend* backend, const strata_buffer* x, int32_t n_tokens, int32_t n_used,                   \
               const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate,                   \
               const strata_weight* up, const strata_weight* down, strata_buffer* out);                             \
  void add(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out); \
  void mul(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out); \
  void unary(strata_backend* backend, int32_t op, const strata_buffer* x, int64_t n, strata_buffer* out);           \
  void scale_rows(strata_backend* backend, strata_buffer* x, const strata_buffer* scale, int32_t rows, int32_t width)

// The optional fused entries of ABI 1.2, for a backend namespace that has them (see with_fused_ops).
#define STRATA_DECLARE_FUSED_BACKEND_FUNCTIONS()                                                                    \
  void attention_rope(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,       \
                      const strata_qk_prepare* prepare, strata_buffer* q, strata_buffer* k, const strata_buffer* v, \
                      strata_buffer* out);                                                                          \
  void add_rms_norm(strata_backend* backend, strata_buffer* x, const strata_buffer* y, const strata_weight* weight, \
                    int32_t rows, int32_t width, float eps, strata_buffer* out)

// The optional fused router of ABI 1.3, for a backend namespace that has it (see with_route_experts).
#define STRATA_DECLARE_ROUTE_EXPERTS_FUNCTION()                                                                      \
  void route_experts(strata_backend* backend, const strata_buffer* x, const strata_weight* router, int32_t n_tokens, \
                     int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits, strata_buffer* ids,  \
                     strata_buffer* weights)

// The optional host memory entries of ABI 1.4, for a backend namespace that has them (see with_host_memory).
#define STRATA_DECLARE_HOST_MEMORY_FUNCTIONS()                        \
  void host_alloc(strata_backend* backend, size_t bytes, void** out); \
  void host_free(strata_backend* backend, void* memory)

// The named functions of an expert cache (strata/backend.h: weight_alloc, weight_write, weight_writes_done) and
// memory_info, for a backend namespace that has them (see named_entry).
#define STRATA_DECLARE_EXPERT_CACHE_FUNCTIONS()                                                        \
  void weight_alloc(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out);     \
  void weight_write(strata_backend* backend, strata_weight* weight, const strata_weight_write* write); \
  void weight_writes_done(strata_backend* backend, int32_t* done);                                     \
  void memory_info(strata_backend* backend, strata_memory_info* info)

// The named function buffer_reads (strata/backend.h), for a backend namespace that has it.
#define STRATA_DECLARE_BUFFER_READS_FUNCTION() \
  void buffer_reads(strata_backend* backend, const strata_buffer_reads* reads)

// The named function signalled_write (strata/backend.h), for a backend namespace that has it.
#define STRATA_DECLARE_SIGNALLED_WRITE_FUNCTION() \
  void signalled_write(strata_backend* backend, const strata_signalled_write* write)

// The optional normed-input ops of ABI 1.5, for a backend namespace that has them (see with_normed_inputs).
#define STRATA_DECLARE_NORMED_INPUT_FUNCTIONS()                                                                        \
  void matmul_normed(strata_backend* backend, const strata_weight* w, const strata_normed_input* in, int32_t n_tokens, \
                     const strata_weight* bias, strata_buffer* out);                                                   \
  void route_experts_normed(strata_backend* backend, const strata_normed_input* in, const strata_weight* router,       \
                            int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing,                      \
                            strata_buffer* logits, strata_buffer* ids, strata_buffer* weights)

// A strata_backend_table from the functions of namespace NS: create, destroy, describe, buffer_alloc,
// buffer_free, buffer_write, buffer_read, weight_load, weight_free, kv_create, kv_free and every op of
// backend.h under its table name. Release functions (destroy, *_free) cannot fail and are used as they
// are; describe(NULL) answers NAME. The optional entries, step graphs, fused ops, concurrent regions, the
// fused router, host memory and normed inputs, are left NULL (see with_graphs, with_fused_ops,
// with_concurrency, with_route_experts, with_host_memory, with_normed_inputs), and so is get_proc_address.
#define STRATA_BACKEND_TABLE(NS, NAME)                                                                                \
  strata_backend_table {                                                                                              \
    .struct_size = sizeof(strata_backend_table), .create = &::strata::sdk::BackendEntry<NS::create>::call,            \
    .destroy = &NS::destroy,                                                                                          \
    .describe = [](strata_backend* backend) -> const char* {                                                          \
      return backend != nullptr ? NS::describe(backend) : NAME;                                                       \
    },                                                                                                                \
    .buffer_alloc = &::strata::sdk::BackendEntry<NS::buffer_alloc>::call, .buffer_free = &NS::buffer_free,            \
    .buffer_write = &::strata::sdk::BackendEntry<NS::buffer_write>::call,                                             \
    .buffer_read = &::strata::sdk::BackendEntry<NS::buffer_read>::call,                                               \
    .weight_load = &::strata::sdk::BackendEntry<NS::weight_load>::call, .weight_free = &NS::weight_free,              \
    .kv_create = &::strata::sdk::BackendEntry<NS::kv_create>::call, .kv_free = &NS::kv_free,                          \
    .get_rows = &::strata::sdk::BackendEntry<NS::get_rows>::call,                                                     \
    .rms_norm = &::strata::sdk::BackendEntry<NS::rms_norm>::call,                                                     \
    .matmul = &::strata::sdk::BackendEntry<NS::matmul>::call,                                                         \
    .rope_neox = &::strata::sdk::BackendEntry<NS::rope_neox>::call,                                                   \
    .attention = &::strata::sdk::BackendEntry<NS::attention>::call,                                                   \
    .route = &::strata::sdk::BackendEntry<NS::route>::call,                                                           \
    .moe_ffn = &::strata::sdk::BackendEntry<NS::moe_ffn>::call, .add = &::strata::sdk::BackendEntry<NS::add>::call,   \
    .mul = &::strata::sdk::BackendEntry<NS::mul>::call, .unary = &::strata::sdk::BackendEntry<NS::unary>::call,       \
    .scale_rows = &::strata::sdk::BackendEntry<NS::scale_rows>::call, .graph_create = nullptr, .graph_free = nullptr, \
    .graph_begin = nullptr, .graph_end = nullptr, .graph_discard = nullptr, .attention_rope = nullptr,                \
    .add_rms_norm = nullptr, .concurrent_begin = nullptr, .concurrent_end = nullptr, .route_experts = nullptr,        \
    .host_alloc = nullptr, .host_free = nullptr, .matmul_normed = nullptr, .route_experts_normed = nullptr,           \
    .get_proc_address = nullptr                                                                                       \
  }

// STRATA_BACKEND_TABLE(NS, NAME) with NS's step graph entries.
#define STRATA_BACKEND_TABLE_WITH_GRAPHS(NS, NAME)                                                 \
  ::strata::sdk::with_graphs<&NS::graph_create, &NS::graph_free, &NS::graph_begin, &NS::graph_end, \
                             &NS::graph_discard>(STRATA_BACKEND_TABLE(NS, NAME))
