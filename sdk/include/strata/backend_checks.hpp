// Argument checks every backend makes the same way (header-only, for backends written with
// strata/backend.hpp). A backend's strata_buffer offers `bytes` and `base()` (its first byte), its
// strata_weight `name`, `ne0`, `ne1` and `ne2`; the templates here work on either. The checks each throws
// sdk::Failure(STRATA_E_INVALID_ARGUMENT, or UNSUPPORTED for a type nothing decodes) with a message naming the op and
// the values, so that all backends refuse bad calls alike and the core's errors read the same whichever backend runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "strata/backend.h"
#include "strata/plugin.hpp"

namespace strata::sdk {

[[noreturn]] inline void invalid_argument(const std::string& message) {
  throw Failure(STRATA_E_INVALID_ARGUMENT, message);
}

template <class T>
T& deref(T* pointer, const char* what) {
  if (pointer == nullptr) invalid_argument(std::string(what) + " is NULL");
  return *pointer;
}

// The first count elements of a buffer of bytes at data, as T, after checking that they fit.
template <class T>
T* buffer_elements(void* data, size_t bytes, int64_t count, const char* what) {
  if (count < 0 || static_cast<uint64_t>(count) > bytes / sizeof(T)) {
    invalid_argument(std::string(what) + ": a buffer of " + std::to_string(bytes) + " bytes cannot hold " +
                     std::to_string(count) + " values");
  }
  return static_cast<T*>(data);
}

// The first count elements of a buffer as T, after checking that the buffer holds them. Taken through a
// non-const pointer, the buffer is about to be written: a Buffer that keeps derived copies of its contents
// (backend-cuda's 8-bit rows) hears of it through an optional note_write().
template <class T, class Buffer>
T* elements(Buffer* buffer, int64_t count, const char* what) {
  Buffer& checked = deref(buffer, what);
  if constexpr (requires { checked.note_write(); }) checked.note_write();
  return buffer_elements<T>(checked.base(), checked.bytes, count, what);
}
template <class T, class Buffer>
const T* elements(const Buffer* buffer, int64_t count, const char* what) {
  const Buffer& checked = deref(buffer, what);
  return buffer_elements<T>(checked.base(), checked.bytes, count, what);
}
template <class Buffer>
float* floats(Buffer* buffer, int64_t count, const char* what) {
  return elements<float>(buffer, count, what);
}
template <class Buffer>
const float* floats(const Buffer* buffer, int64_t count, const char* what) {
  return elements<float>(buffer, count, what);
}

// buffer_write / buffer_read: bytes [offset, offset + bytes) must lie inside the buffer.
template <class Buffer>
void check_buffer_range(const Buffer& buffer, size_t offset, size_t bytes, const char* what) {
  if (offset > buffer.bytes || bytes > buffer.bytes - offset) {
    invalid_argument(std::string(what) + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
                     std::to_string(bytes) + ") are outside a buffer of " + std::to_string(buffer.bytes) + " bytes");
  }
}

// get_rows: one matrix, ids when any are asked for, and an output of n_ids rows of the table's width.
template <class Weight, class Buffer>
float* get_rows_output(const Weight& table, const int32_t* ids, int32_t n_ids, Buffer* out) {
  if (table.ne2 != 1) invalid_argument("get_rows: " + table.name + " has " + std::to_string(table.ne2) + " matrices");
  if (n_ids < 0 || (n_ids > 0 && ids == nullptr)) invalid_argument("get_rows: no ids");
  return floats(out, n_ids * table.ne0, "get_rows out");
}

// A kv_create config: positive sizes and a known cache type.
inline void check_kv_config(const strata_kv_config& config) {
  if (config.struct_size < sizeof(strata_kv_config)) invalid_argument("kv config: struct_size is too small");
  if (config.n_layers <= 0 || config.n_ctx <= 0 || config.n_head_kv <= 0 || config.head_dim <= 0) {
    invalid_argument("kv config: layers, context, kv heads and head_dim must be positive");
  }
  if (config.kv_type != STRATA_KV_F16 && config.kv_type != STRATA_KV_INT8) {
    invalid_argument("kv config: unknown kv_type " + std::to_string(config.kv_type));
  }
}

// Attention parameters against the cache they read: its layers, kv heads, head size and context.
inline void check_attention_params(const strata_kv_config& config, const strata_attention_params& params) {
  if (params.struct_size < sizeof(strata_attention_params))
    invalid_argument("attention params: struct_size is too small");
  if (params.layer < 0 || params.layer >= config.n_layers) {
    invalid_argument("attention: layer " + std::to_string(params.layer) + " is outside the cache's " +
                     std::to_string(config.n_layers) + " layers");
  }
  if (params.n_head_kv != config.n_head_kv || params.head_dim != config.head_dim) {
    invalid_argument("attention: " + std::to_string(params.n_head_kv) + " kv heads of " +
                     std::to_string(params.head_dim) + " do not match the cache's " + std::to_string(config.n_head_kv) +
                     " of " + std::to_string(config.head_dim));
  }
  if (params.n_tokens < 0 || params.n_head <= 0 || params.n_head % params.n_head_kv != 0) {
    invalid_argument("attention: " + std::to_string(params.n_head) + " query heads are not a multiple of " +
                     std::to_string(params.n_head_kv) + " kv heads");
  }
  if (params.n_tokens > 0 && params.positions == nullptr) invalid_argument("attention: positions is NULL");
  for (int32_t t = 0; t < params.n_tokens; ++t) {
    const int32_t position = params.positions[t];
    if (position < 0 || position >= config.n_ctx) {
      invalid_argument("position " + std::to_string(position) + " is past the context of " +
                       std::to_string(config.n_ctx));
    }
  }
}

inline void check_rope_args(const int32_t* positions, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                            int32_t n_rot) {
  if (n_tokens < 0 || n_heads <= 0 || n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim) {
    invalid_argument("rope_neox: n_rot " + std::to_string(n_rot) + " must be even and at most head_dim " +
                     std::to_string(head_dim));
  }
  if (n_tokens > 0 && positions == nullptr) invalid_argument("rope_neox: positions is NULL");
}

inline void check_route_args(int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing) {
  if (n_tokens < 0 || n_experts <= 0 || n_used <= 0 || n_used > n_experts) {
    invalid_argument("route: cannot pick " + std::to_string(n_used) + " of " + std::to_string(n_experts) + " experts");
  }
  if (routing != STRATA_ROUTING_SOFTMAX_TOPK && routing != STRATA_ROUTING_SOFTMAX_TOPK_NORM) {
    invalid_argument("route: unknown routing " + std::to_string(routing));
  }
}

// The route op's logits and its outputs, ids and weights: n_used of each per token.
struct RouteOperands {
  const float* logits;
  int32_t* ids;
  float* weights;
};

template <class Buffer>
RouteOperands route_operands(const Buffer* logits, int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing,
                             Buffer* ids, Buffer* weights) {
  check_route_args(n_tokens, n_experts, n_used, routing);
  return {floats(logits, int64_t{n_tokens} * n_experts, "route logits"),
          elements<int32_t>(ids, int64_t{n_tokens} * n_used, "route ids"),
          floats(weights, int64_t{n_tokens} * n_used, "route weights")};
}

// "name 2048x768x128", for messages.
template <class Weight>
std::string shape_text(const Weight& weight) {
  return weight.name + " " + std::to_string(weight.ne0) + "x" + std::to_string(weight.ne1) + "x" +
         std::to_string(weight.ne2);
}

// The attention op's activations, checked against the cache and the parameters.
struct AttentionOperands {
  const float *q, *k, *v;
  float* out;
};

// The rows of rms_norm (no y) and add_rms_norm (x += y, written back to x): rows x width floats each.
struct NormOperands {
  const float* x;
  float* x_sum;  // add_rms_norm: where x + y goes (x itself); rms_norm: NULL
  const float* y;
  float* out;
};

// (x is const for rms_norm's sake; add_rms_norm's x is writable in its own signature.)
template <class Buffer>
NormOperands norm_operands(const Buffer* x, std::type_identity_t<const Buffer*> y, int32_t rows, int32_t width,
                           Buffer* out) {
  const bool add = y != nullptr;
  if (rows < 0 || width <= 0) invalid_argument(std::string(add ? "add_rms_norm" : "rms_norm") + ": bad shape");
  if (add && (out == x || out == y)) invalid_argument("add_rms_norm: out must be neither x nor y");
  const int64_t n = int64_t{rows} * width;
  // Writable access (which notes a write) only where the op writes x back.
  const float* x_values = floats(x, n, add ? "add_rms_norm x" : "rms_norm x");
  return {x_values, add ? floats(const_cast<Buffer*>(x), n, "add_rms_norm x") : nullptr,
          add ? floats(y, n, "add_rms_norm y") : nullptr, floats(out, n, add ? "add_rms_norm out" : "rms_norm out")};
}

// An ABI 1.5 normed input (matmul_normed, route_experts_normed) of rows x width, checked: what the op reads
// and writes, each distinct (sum and normed neither x, y nor each other), and its norm weight, which the
// backend reads as its F32 vectors. sum and normed are NULL where the input has none.
struct NormedOperands {
  const float* x;
  const float* y;
  float* sum;
  float* normed;
};

template <class Buffer>
NormedOperands normed_operands(const strata_normed_input* in, int32_t rows, int32_t width, const std::string& what) {
  if (in == nullptr || in->struct_size < sizeof(strata_normed_input))
    invalid_argument(what + ": missing or short normed input");
  if (rows < 0 || width <= 0) invalid_argument(what + ": bad shape");
  if (in->weight == nullptr) invalid_argument(what + ": the normed input has no norm weight");
  const Buffer* outputs[] = {in->sum, in->normed};
  for (const Buffer* output : outputs) {
    if (output != nullptr && (output == in->x || output == in->y)) {
      invalid_argument(what + ": the normed input's sum and normed must be neither x nor y");
    }
  }
  if (in->sum != nullptr && in->sum == in->normed)
    invalid_argument(what + ": the normed input's sum and normed are one buffer");
  const int64_t n = int64_t{rows} * width;
  const std::string x_name = what + " x", y_name = what + " y", sum_name = what + " sum",
                    normed_name = what + " normed";
  return {floats(static_cast<const Buffer*>(in->x), n, x_name.c_str()),
          in->y != nullptr ? floats(static_cast<const Buffer*>(in->y), n, y_name.c_str()) : nullptr,
          in->sum != nullptr ? floats(static_cast<Buffer*>(in->sum), n, sum_name.c_str()) : nullptr,
          in->normed != nullptr ? floats(static_cast<Buffer*>(in->normed), n, normed_name.c_str()) : nullptr};
}

// An output of an op with a normed input (in already checked by normed_operands), which must be none of its
// buffers.
template <class Buffer>
void check_normed_output(const strata_normed_input* in, const Buffer* out, const std::string& what) {
  if (out != nullptr && (out == in->x || out == in->y || out == in->sum || out == in->normed)) {
    invalid_argument(what + ": an output is one of its normed input's buffers");
  }
}

// attention_rope's preparation of q and k, checked against the attention's shape.
inline const strata_qk_prepare& checked_qk_prepare(const strata_qk_prepare* prepare,
                                                   const strata_attention_params& params) {
  const auto& checked = deref(prepare, "qk prepare");
  if (checked.struct_size < sizeof(strata_qk_prepare)) invalid_argument("qk prepare: struct_size is too small");
  check_rope_args(params.positions, params.n_tokens, params.n_head, params.head_dim, checked.n_rot);
  return checked;
}

template <class Buffer>
AttentionOperands attention_operands(const strata_kv_config& config, const strata_attention_params& params,
                                     const Buffer* q, const Buffer* k, const Buffer* v, Buffer* out) {
  check_attention_params(config, params);
  const int64_t q_width = int64_t{params.n_head} * params.head_dim,
                kv_width = int64_t{params.n_head_kv} * params.head_dim;
  const AttentionOperands operands{
      floats(q, params.n_tokens * q_width, "attention q"), floats(k, params.n_tokens * kv_width, "attention k"),
      floats(v, params.n_tokens * kv_width, "attention v"), floats(out, params.n_tokens * q_width, "attention out")};
  if (out == q || out == k || out == v) invalid_argument("attention: out must not be an input");
  return operands;
}

// The matmul op's input and output rows, checked against the weight and the expert index.
struct MatmulOperands {
  const float* x;
  float* out;
};

template <class Weight, class Buffer>
MatmulOperands matmul_operands(const Weight& weight, int32_t expert, const Buffer* x, int32_t n_tokens, Buffer* out) {
  if (expert < 0 || expert >= weight.ne2) {
    invalid_argument("matmul " + weight.name + ": expert " + std::to_string(expert) + " is outside 0.." +
                     std::to_string(weight.ne2 - 1));
  }
  if (n_tokens < 0) invalid_argument("matmul: negative n_tokens");
  if (x == out) invalid_argument("matmul " + weight.name + ": out must not be x");
  return {floats(x, n_tokens * weight.ne0, "matmul x"), floats(out, n_tokens * weight.ne1, "matmul out")};
}

// route_experts' router: one matrix with a row per expert, so that its product is the route's logits.
template <class Weight>
void check_router(const Weight& router, int32_t n_experts) {
  if (router.ne2 != 1 || router.ne1 != n_experts) {
    invalid_argument("route_experts: router " + shape_text(router) + " is not one matrix of " +
                     std::to_string(n_experts) + " expert rows");
  }
}

// The moe_ffn op's operands: gate and up map width -> ffn, down ffn -> width, all with the same number
// of experts; slot t * n_used + j is token t's j-th expert.
struct MoeOperands {
  const float* x;
  const int32_t* ids;
  const float* weights;
  float* out;
  int64_t width, ffn, n_slots;
};

template <class Weight, class Buffer>
MoeOperands moe_operands(const Weight& gate, const Weight& up, const Weight& down, const Buffer* x, int32_t n_tokens,
                         int32_t n_used, const Buffer* ids, const Buffer* weights, Buffer* out) {
  if (up.ne0 != gate.ne0 || up.ne1 != gate.ne1 || up.ne2 != gate.ne2 || down.ne0 != gate.ne1 || down.ne1 != gate.ne0 ||
      down.ne2 != gate.ne2) {
    invalid_argument("moe_ffn: expert shapes do not fit: gate " + shape_text(gate) + ", up " + shape_text(up) +
                     ", down " + shape_text(down));
  }
  if (n_tokens < 0 || n_used <= 0) invalid_argument("moe_ffn: n_tokens and n_used must be positive");
  const int64_t width = gate.ne0, ffn = gate.ne1, n_slots = int64_t{n_tokens} * n_used;
  const MoeOperands operands{floats(x, n_tokens * width, "moe_ffn x"),
                             elements<int32_t>(ids, n_slots, "moe_ffn ids"),
                             floats(weights, n_slots, "moe_ffn weights"),
                             floats(out, n_tokens * width, "moe_ffn out"),
                             width,
                             ffn,
                             n_slots};
  if (out == x) invalid_argument("moe_ffn: out must not be x");
  return operands;
}

// A weight_load description with the type it names (NULL when no plugin provides it): whole rows of
// blocks. Returns the tensor's name for messages.
inline std::string check_weight_desc(const strata_weight_desc& desc, const strata_quant_type* type) {
  if (desc.struct_size < sizeof(strata_weight_desc)) invalid_argument("weight desc: struct_size is too small");
  const std::string name = desc.name != nullptr ? desc.name : "(unnamed)";
  if (type == nullptr || type->dequantize == nullptr) {
    throw Failure(STRATA_E_UNSUPPORTED,
                  "weight " + name + ": no quant plugin provides type " + std::to_string(desc.type));
  }
  if (desc.ne0 <= 0 || desc.ne1 <= 0 || desc.ne2 <= 0 || desc.ne0 % type->block_elements != 0) {
    invalid_argument("weight " + name + ": shape " + std::to_string(desc.ne0) + " x " + std::to_string(desc.ne1) +
                     " x " + std::to_string(desc.ne2) + " is not whole rows of " + type->name + " blocks of " +
                     std::to_string(type->block_elements));
  }
  return name;
}

}  // namespace strata::sdk
