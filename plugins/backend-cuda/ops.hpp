// Every entry of the backend table as a C++ function that throws sdk::Failure instead of filling a
// strata_error; cuda_backend.cpp wraps each one with sdk::guarded. Parameters mirror strata/backend.h.
#pragma once

#include "strata/backend.h"

namespace strata::cuda {

// backend_instance.cpp
void create(const strata_backend_config* config, strata_backend** out);
void destroy(strata_backend* backend);
const char* describe(strata_backend* backend);
// The plugin's options from the manifest (init): defaults under each instance's own options.
void set_plugin_options(const char* options_json);

// memory.cpp
void buffer_alloc(strata_backend* backend, size_t bytes, strata_buffer** out);
void buffer_free(strata_backend* backend, strata_buffer* buffer);
void buffer_write(strata_backend* backend, strata_buffer* buffer, size_t offset, const void* src, size_t bytes);
void buffer_read(strata_backend* backend, strata_buffer* buffer, size_t offset, void* dst, size_t bytes);
void weight_load(strata_backend* backend, const strata_weight_desc* desc, strata_weight** out);
void weight_free(strata_backend* backend, strata_weight* weight);
void get_rows(strata_backend* backend, const strata_weight* table, const int32_t* ids, int32_t n_ids,
              strata_buffer* out);

// attention.cu
void kv_create(strata_backend* backend, const strata_kv_config* config, strata_kv_cache** out);
void kv_free(strata_backend* backend, strata_kv_cache* cache);
void attention(strata_backend* backend, strata_kv_cache* cache, const strata_attention_params* params,
               const strata_buffer* q, const strata_buffer* k, const strata_buffer* v, strata_buffer* out);

// matmul.cu
void matmul(strata_backend* backend, const strata_weight* w, int32_t expert, const strata_buffer* x,
            int32_t n_tokens, const strata_weight* bias, strata_buffer* out);

// route.cu
void route(strata_backend* backend, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,
           int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights);

// moe.cu
void moe_ffn(strata_backend* backend, const strata_buffer* x, int32_t n_tokens, int32_t n_used,
             const strata_buffer* ids, const strata_buffer* weights, const strata_weight* gate,
             const strata_weight* up, const strata_weight* down, strata_buffer* out);

// elementwise.cu
void rms_norm(strata_backend* backend, const strata_buffer* x, const strata_weight* weight, int32_t rows,
              int32_t width, float eps, strata_buffer* out);
void rope_neox(strata_backend* backend, strata_buffer* x, const int32_t* positions, int32_t n_tokens,
               int32_t n_heads, int32_t head_dim, int32_t n_rot, float base);
void add(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out);
void mul(strata_backend* backend, const strata_buffer* a, const strata_buffer* b, int64_t n, strata_buffer* out);
void unary(strata_backend* backend, int32_t op, const strata_buffer* x, int64_t n, strata_buffer* out);
void scale_rows(strata_backend* backend, strata_buffer* x, const strata_buffer* scale, int32_t rows, int32_t width);

// graph.cpp
void graph_create(strata_backend* backend, strata_graph** out);
void graph_free(strata_backend* backend, strata_graph* graph);
void graph_begin(strata_backend* backend, strata_graph* graph, const int32_t* positions, int32_t n_positions,
                 int32_t* mode);
void graph_end(strata_backend* backend, strata_graph* graph);
void graph_discard(strata_backend* backend, strata_graph* graph);

}  // namespace strata::cuda
