// What distinguishes the MoE transformer architectures this engine runs. An architecture is this small
// description plus the forward in model/session.cpp; adding a variant of the same family is one entry in
// architecture.cpp.
#pragma once

#include <string_view>

#include "strata/backend.h"

namespace strata {

struct Architecture {
  std::string_view name;  // general.architecture
  bool qk_norm;           // RMS-norm each head of Q and K before RoPE (qwen3moe)
  bool qkv_bias;          // Q, K and V projections have biases (qwen2moe)
  bool shared_expert;     // a dense expert every token uses, behind a sigmoid gate (qwen2moe)
  int32_t routing;        // STRATA_ROUTING_*: whether the top-k weights are renormalized
};

// nullptr when the engine does not know the architecture.
const Architecture* find_architecture(std::string_view name);
// "qwen3moe, qwen2moe": for messages.
std::string_view known_architectures();

}  // namespace strata
