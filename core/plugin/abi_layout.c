/* The plugin ABI's layouts, pinned: the offset and size of every field of every struct that crosses the boundary
 * (strata/plugin.h, quant.h, backend.h), where each table ends for a plugin of each ABI minor (the struct_size
 * such a plugin reports), and the values of the ABI's constants. A field inserted mid-table, removed, reordered
 * or resized fails the build here, before it can break every plugin built earlier: tables only grow at their
 * end (docs/ARCHITECTURE.md, Plugin ABI). Plain C11, compiled into libstrata-core, so that it also proves the
 * headers are valid C. tests/abi/ checks that a header with two fields swapped fails this file.
 *
 * The numbers are those of LP64 targets (x86-64 and AArch64 Linux), the ones the project builds for. A new minor
 * appends its fields' pins and its end, updates the sizes of the structs it grew and bumps the minor pinned below;
 * no field's pin ever changes. */
#include "strata/backend.h"
#include "strata/plugin.h"
#include "strata/quant.h"

#if !defined(__LP64__)
#error "the plugin ABI's layouts are pinned for LP64 targets only: pin this target's before building for it"
#endif

#define PIN(type, field, offset, size)                                                     \
  _Static_assert(offsetof(type, field) == (offset) && sizeof(((type*)0)->field) == (size), \
                 #type "." #field " moved or changed size: ABI tables only grow at their end")
#define PIN_MINOR_END(type, minor, last_field, bytes)           \
  _Static_assert(STRATA_FIELD_END(type, last_field) == (bytes), \
                 #type " of ABI " minor " no longer ends at " #last_field ", byte " #bytes)
#define PIN_SIZE(type, bytes) _Static_assert(sizeof(type) == (bytes), #type " changed size: pin its new fields")
#define PIN_VALUE(name, value) _Static_assert((name) == (value), #name " changed value: constants are ABI")

PIN_VALUE(STRATA_ABI_MAJOR, 1);
PIN_VALUE(STRATA_ABI_MINOR, 10);

/* strata_error (plugin.h, ABI 1.0) */
PIN(strata_error, message, 0, 8);
PIN(strata_error, capacity, 8, 8);
PIN_SIZE(strata_error, 16);

/* strata_host_services (plugin.h, ABI 1.0) */
PIN(strata_host_services, struct_size, 0, 4);
PIN(strata_host_services, context, 8, 8);
PIN(strata_host_services, log, 16, 8);
PIN_MINOR_END(strata_host_services, "1.0", log, 24);
PIN(strata_host_services, cpu_isa, 24, 8); /* ABI 1.7 */
PIN_MINOR_END(strata_host_services, "1.7", cpu_isa, 32);
PIN_SIZE(strata_host_services, 32);

/* strata_plugin_descriptor (plugin.h, ABI 1.0) */
PIN(strata_plugin_descriptor, struct_size, 0, 4);
PIN(strata_plugin_descriptor, abi_major, 4, 2);
PIN(strata_plugin_descriptor, abi_minor, 6, 2);
PIN(strata_plugin_descriptor, kind, 8, 4);
PIN(strata_plugin_descriptor, name, 16, 8);
PIN(strata_plugin_descriptor, version, 24, 8);
PIN(strata_plugin_descriptor, table, 32, 8);
PIN(strata_plugin_descriptor, probe, 40, 8);
PIN(strata_plugin_descriptor, init, 48, 8);
PIN(strata_plugin_descriptor, shutdown, 56, 8);
PIN_SIZE(strata_plugin_descriptor, 64);

/* strata_quant_table (quant.h, ABI 1.0) */
PIN(strata_quant_table, struct_size, 0, 4);
PIN(strata_quant_table, type_count, 4, 4);
PIN(strata_quant_table, types, 8, 8);
PIN_SIZE(strata_quant_table, 16);

/* strata_quant_type (quant.h): a plugin of each minor has the fields up to that minor's
 * end (a minor that appended nothing here keeps the previous end) */
PIN(strata_quant_type, struct_size, 0, 4);
PIN(strata_quant_type, type_id, 4, 4);
PIN(strata_quant_type, name, 8, 8);
PIN(strata_quant_type, block_elements, 16, 4);
PIN(strata_quant_type, block_bytes, 20, 4);
PIN(strata_quant_type, dequantize, 24, 8);
PIN(strata_quant_type, quantize, 32, 8);
PIN(strata_quant_type, cpu_activation_type, 40, 4);
PIN(strata_quant_type, cpu_dot_rows, 48, 8);
PIN(strata_quant_type, cuda_dequantize_f16, 56, 8);
PIN(strata_quant_type, cuda_matvec, 64, 8);
PIN(strata_quant_type, cpu_dot_rows_multi, 72, 8);
PIN_MINOR_END(strata_quant_type, "1.0", cpu_dot_rows_multi, 80);
PIN(strata_quant_type, cuda_expert_matvec, 80, 8);
PIN(strata_quant_type, cuda_grouped_gemm, 88, 8);
PIN_MINOR_END(strata_quant_type, "1.1", cuda_grouped_gemm, 96);
PIN(strata_quant_type, cuda_matvec_q8, 96, 8);
PIN_MINOR_END(strata_quant_type, "1.2", cuda_matvec_q8, 104);
PIN(strata_quant_type, cuda_matvec_normed, 104, 8);
PIN_MINOR_END(strata_quant_type, "1.5", cuda_matvec_normed, 112);
PIN(strata_quant_type, cuda_repacked, 112, 8);
PIN(strata_quant_type, cuda_repack, 120, 8);
PIN_MINOR_END(strata_quant_type, "1.6", cuda_repack, 128);
PIN(strata_quant_type, cpu_rows_to_int8, 128, 8);
PIN_MINOR_END(strata_quant_type, "1.8", cpu_rows_to_int8, 136);
PIN(strata_quant_type, cpu_repacked, 136, 8);
PIN(strata_quant_type, cpu_repack, 144, 8);
PIN_MINOR_END(strata_quant_type, "1.9", cpu_repack, 152);
PIN(strata_quant_type, cpu_rows_int8_offsets, 152, 8);
PIN_MINOR_END(strata_quant_type, "1.10", cpu_rows_int8_offsets, 160);
PIN_SIZE(strata_quant_type, 160);

/* strata_cuda_expert_matvec (quant.h): a plugin of each minor has the fields up to that minor's
 * end (a minor that appended nothing here keeps the previous end) */
PIN(strata_cuda_expert_matvec, struct_size, 0, 4);
PIN(strata_cuda_expert_matvec, mode, 4, 4);
PIN(strata_cuda_expert_matvec, weight, 8, 8);
PIN(strata_cuda_expert_matvec, weight2, 16, 8);
PIN(strata_cuda_expert_matvec, n, 24, 8);
PIN(strata_cuda_expert_matvec, n_rows, 32, 8);
PIN(strata_cuda_expert_matvec, row_bytes, 40, 8);
PIN(strata_cuda_expert_matvec, expert_bytes, 48, 8);
PIN(strata_cuda_expert_matvec, n_experts, 56, 4);
PIN(strata_cuda_expert_matvec, n_slots, 60, 4);
PIN(strata_cuda_expert_matvec, slots_per_token, 64, 4);
PIN(strata_cuda_expert_matvec, expert_ids, 72, 8);
PIN(strata_cuda_expert_matvec, slot_weights, 80, 8);
PIN(strata_cuda_expert_matvec, x, 88, 8);
PIN(strata_cuda_expert_matvec, out, 96, 8);
PIN_MINOR_END(strata_cuda_expert_matvec, "1.1", out, 104);
PIN(strata_cuda_expert_matvec, x_levels, 104, 8);
PIN(strata_cuda_expert_matvec, x_scales, 112, 8);
PIN_MINOR_END(strata_cuda_expert_matvec, "1.2", x_scales, 120);
PIN_SIZE(strata_cuda_expert_matvec, 120);

/* strata_cuda_grouped_gemm (quant.h, ABI 1.1) */
PIN(strata_cuda_grouped_gemm, struct_size, 0, 4);
PIN(strata_cuda_grouped_gemm, weight, 8, 8);
PIN(strata_cuda_grouped_gemm, n, 16, 8);
PIN(strata_cuda_grouped_gemm, n_rows, 24, 8);
PIN(strata_cuda_grouped_gemm, row_bytes, 32, 8);
PIN(strata_cuda_grouped_gemm, expert_bytes, 40, 8);
PIN(strata_cuda_grouped_gemm, n_experts, 48, 4);
PIN(strata_cuda_grouped_gemm, max_tiles, 52, 4);
PIN(strata_cuda_grouped_gemm, tiles, 56, 8);
PIN(strata_cuda_grouped_gemm, tile_count, 64, 8);
PIN(strata_cuda_grouped_gemm, x, 72, 8);
PIN(strata_cuda_grouped_gemm, out, 80, 8);
PIN_SIZE(strata_cuda_grouped_gemm, 88);

/* strata_cuda_normed_rows (quant.h, ABI 1.5) */
PIN(strata_cuda_normed_rows, struct_size, 0, 4);
PIN(strata_cuda_normed_rows, x, 8, 8);
PIN(strata_cuda_normed_rows, y, 16, 8);
PIN(strata_cuda_normed_rows, gain, 24, 8);
PIN(strata_cuda_normed_rows, eps, 32, 4);
PIN(strata_cuda_normed_rows, sum, 40, 8);
PIN_SIZE(strata_cuda_normed_rows, 48);

/* strata_backend_config (backend.h, ABI 1.0) */
PIN(strata_backend_config, struct_size, 0, 4);
PIN(strata_backend_config, n_threads, 4, 4);
PIN(strata_backend_config, options_json, 8, 8);
PIN(strata_backend_config, quant_context, 16, 8);
PIN(strata_backend_config, find_quant_type, 24, 8);
PIN_SIZE(strata_backend_config, 32);

/* strata_weight_desc (backend.h, ABI 1.0) */
PIN(strata_weight_desc, struct_size, 0, 4);
PIN(strata_weight_desc, name, 8, 8);
PIN(strata_weight_desc, type, 16, 4);
PIN(strata_weight_desc, ne0, 24, 8);
PIN(strata_weight_desc, ne1, 32, 8);
PIN(strata_weight_desc, ne2, 40, 8);
PIN(strata_weight_desc, data, 48, 8);
PIN_SIZE(strata_weight_desc, 56);

/* strata_kv_config (backend.h, ABI 1.0) */
PIN(strata_kv_config, struct_size, 0, 4);
PIN(strata_kv_config, n_layers, 4, 4);
PIN(strata_kv_config, n_ctx, 8, 4);
PIN(strata_kv_config, n_head_kv, 12, 4);
PIN(strata_kv_config, head_dim, 16, 4);
PIN(strata_kv_config, kv_type, 20, 4);
PIN_SIZE(strata_kv_config, 24);

/* strata_attention_params (backend.h, ABI 1.0) */
PIN(strata_attention_params, struct_size, 0, 4);
PIN(strata_attention_params, layer, 4, 4);
PIN(strata_attention_params, n_tokens, 8, 4);
PIN(strata_attention_params, n_head, 12, 4);
PIN(strata_attention_params, n_head_kv, 16, 4);
PIN(strata_attention_params, head_dim, 20, 4);
PIN(strata_attention_params, scale, 24, 4);
PIN(strata_attention_params, positions, 32, 8);
PIN_SIZE(strata_attention_params, 40);

/* strata_qk_prepare (backend.h, ABI 1.2) */
PIN(strata_qk_prepare, struct_size, 0, 4);
PIN(strata_qk_prepare, q_norm, 8, 8);
PIN(strata_qk_prepare, k_norm, 16, 8);
PIN(strata_qk_prepare, norm_eps, 24, 4);
PIN(strata_qk_prepare, n_rot, 28, 4);
PIN(strata_qk_prepare, rope_base, 32, 4);
PIN_SIZE(strata_qk_prepare, 40);

/* strata_normed_input (backend.h, ABI 1.5) */
PIN(strata_normed_input, struct_size, 0, 4);
PIN(strata_normed_input, x, 8, 8);
PIN(strata_normed_input, y, 16, 8);
PIN(strata_normed_input, weight, 24, 8);
PIN(strata_normed_input, eps, 32, 4);
PIN(strata_normed_input, sum, 40, 8);
PIN(strata_normed_input, normed, 48, 8);
PIN_SIZE(strata_normed_input, 56);

/* strata_backend_table (backend.h): a plugin of each minor has the fields up to that minor's
 * end (a minor that appended nothing here keeps the previous end) */
PIN(strata_backend_table, struct_size, 0, 4);
PIN(strata_backend_table, create, 8, 8);
PIN(strata_backend_table, destroy, 16, 8);
PIN(strata_backend_table, describe, 24, 8);
PIN(strata_backend_table, buffer_alloc, 32, 8);
PIN(strata_backend_table, buffer_free, 40, 8);
PIN(strata_backend_table, buffer_write, 48, 8);
PIN(strata_backend_table, buffer_read, 56, 8);
PIN(strata_backend_table, weight_load, 64, 8);
PIN(strata_backend_table, weight_free, 72, 8);
PIN(strata_backend_table, kv_create, 80, 8);
PIN(strata_backend_table, kv_free, 88, 8);
PIN(strata_backend_table, get_rows, 96, 8);
PIN(strata_backend_table, rms_norm, 104, 8);
PIN(strata_backend_table, matmul, 112, 8);
PIN(strata_backend_table, rope_neox, 120, 8);
PIN(strata_backend_table, attention, 128, 8);
PIN(strata_backend_table, route, 136, 8);
PIN(strata_backend_table, moe_ffn, 144, 8);
PIN(strata_backend_table, add, 152, 8);
PIN(strata_backend_table, mul, 160, 8);
PIN(strata_backend_table, unary, 168, 8);
PIN(strata_backend_table, scale_rows, 176, 8);
PIN_MINOR_END(strata_backend_table, "1.0", scale_rows, 184);
PIN(strata_backend_table, graph_create, 184, 8);
PIN(strata_backend_table, graph_free, 192, 8);
PIN(strata_backend_table, graph_begin, 200, 8);
PIN(strata_backend_table, graph_end, 208, 8);
PIN(strata_backend_table, graph_discard, 216, 8);
PIN_MINOR_END(strata_backend_table, "1.1", graph_discard, 224);
PIN(strata_backend_table, attention_rope, 224, 8);
PIN(strata_backend_table, add_rms_norm, 232, 8);
PIN_MINOR_END(strata_backend_table, "1.2", add_rms_norm, 240);
PIN(strata_backend_table, concurrent_begin, 240, 8);
PIN(strata_backend_table, concurrent_end, 248, 8);
PIN(strata_backend_table, route_experts, 256, 8);
PIN_MINOR_END(strata_backend_table, "1.3", route_experts, 264);
PIN(strata_backend_table, host_alloc, 264, 8);
PIN(strata_backend_table, host_free, 272, 8);
PIN_MINOR_END(strata_backend_table, "1.4", host_free, 280);
PIN(strata_backend_table, matmul_normed, 280, 8);
PIN(strata_backend_table, route_experts_normed, 288, 8);
PIN_MINOR_END(strata_backend_table, "1.5", route_experts_normed, 296);
PIN(strata_backend_table, get_proc_address, 296, 8);
PIN_MINOR_END(strata_backend_table, "1.7", get_proc_address, 304);
PIN_SIZE(strata_backend_table, 304);

/* Argument structs of named backend functions (get_proc_address; a name needs no minor) */
PIN(strata_weight_write, struct_size, 0, 4);
PIN(strata_weight_write, matrix, 8, 8);
PIN(strata_weight_write, data, 16, 8);
PIN(strata_weight_write, background, 24, 4);
PIN_SIZE(strata_weight_write, 32);
PIN(strata_memory_info, struct_size, 0, 4);
PIN(strata_memory_info, limit_bytes, 8, 8);
PIN(strata_memory_info, used_bytes, 16, 8);
PIN_SIZE(strata_memory_info, 24);
PIN(strata_buffer_read_item, buffer, 0, 8);
PIN(strata_buffer_read_item, offset, 8, 8);
PIN(strata_buffer_read_item, dst, 16, 8);
PIN(strata_buffer_read_item, bytes, 24, 8);
PIN_SIZE(strata_buffer_read_item, 32);
PIN(strata_buffer_reads, struct_size, 0, 4);
PIN(strata_buffer_reads, count, 4, 4);
PIN(strata_buffer_reads, items, 8, 8);
PIN_SIZE(strata_buffer_reads, 16);
PIN(strata_signalled_write, struct_size, 0, 4);
PIN(strata_signalled_write, buffer, 8, 8);
PIN(strata_signalled_write, offset, 16, 8);
PIN(strata_signalled_write, src, 24, 8);
PIN(strata_signalled_write, bytes, 32, 8);
PIN(strata_signalled_write, signal, 40, 8);
PIN(strata_signalled_write, value, 48, 8);
PIN_SIZE(strata_signalled_write, 56);

/* Constants */
PIN_VALUE(STRATA_OK, 0);
PIN_VALUE(STRATA_E_INVALID_ARGUMENT, 1);
PIN_VALUE(STRATA_E_UNSUPPORTED, 2);
PIN_VALUE(STRATA_E_OUT_OF_MEMORY, 3);
PIN_VALUE(STRATA_E_IO, 4);
PIN_VALUE(STRATA_E_INTERNAL, 5);
PIN_VALUE(STRATA_PLUGIN_KIND_QUANT, 1);
PIN_VALUE(STRATA_PLUGIN_KIND_BACKEND, 2);
PIN_VALUE(STRATA_PLUGIN_KIND_CVEC, 3);
PIN_VALUE(STRATA_PLUGIN_KIND_VISION, 4);
PIN_VALUE(STRATA_LOG_DEBUG, 0);
PIN_VALUE(STRATA_LOG_INFO, 1);
PIN_VALUE(STRATA_LOG_WARN, 2);
PIN_VALUE(STRATA_LOG_ERROR, 3);
PIN_VALUE(STRATA_EXPERT_MATVEC_SWIGLU, 1);
PIN_VALUE(STRATA_EXPERT_MATVEC_WEIGHTED_SUM, 2);
PIN_VALUE(STRATA_GEMM_TILE_TOKENS, 64);
PIN_VALUE(STRATA_REPACKED_TYPE_BIT, 0x80000000u);
PIN_VALUE(STRATA_CPU_INT8_GROUP, 32);
PIN_VALUE(STRATA_CPU_INT8_BLOCK, 256);
PIN_VALUE(STRATA_KV_F16, 1);
PIN_VALUE(STRATA_KV_INT8, 2);
PIN_VALUE(STRATA_ROUTING_SOFTMAX_TOPK, 1);
PIN_VALUE(STRATA_ROUTING_SOFTMAX_TOPK_NORM, 2);
PIN_VALUE(STRATA_UNARY_SILU, 1);
PIN_VALUE(STRATA_UNARY_SIGMOID, 2);
PIN_VALUE(STRATA_GRAPH_RUN, 0);
PIN_VALUE(STRATA_GRAPH_RECORD, 1);
PIN_VALUE(STRATA_GRAPH_REPLAY, 2);
