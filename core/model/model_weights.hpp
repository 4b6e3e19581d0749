// A model's tensors, handed to a backend. Each tensor's shape is checked against the configuration, so a
// file that does not match its metadata fails at load with the tensor's name, not later with a crash.
#pragma once

#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/expert_store.hpp"
#include "core/model/model_config.hpp"

namespace strata {

struct LayerWeights {
  Weight attn_norm, attn_q, attn_k, attn_v, attn_output;
  Weight attn_q_bias, attn_k_bias, attn_v_bias;  // qkv_bias architectures
  Weight attn_q_norm, attn_k_norm;               // qk_norm architectures
  Weight ffn_norm, router;
  Weight gate_exps, up_exps, down_exps;                         // on the expert pool's backend in a hybrid placement
  Weight shared_gate_inp, shared_gate, shared_up, shared_down;  // shared_expert architectures
};

struct ModelWeights {
  Weight token_embd, output_norm, output;  // output is token_embd's data when the file ties them
  std::string output_name;                 // "output.weight", or "token_embd.weight" when tied
  std::vector<LayerWeights> layers;
};

// Every tensor on backend, but the routed experts (ffn_{gate,up,down}_exps) on expert_backend where one is given,
// from expert_store's bytes: the CPU expert pool of a hybrid placement (core/model/hybrid_experts.hpp).
ModelWeights load_weights(Backend& backend, const gguf::Model& model, const ModelConfig& config,
                          Backend* expert_backend = nullptr, const ExpertStore* expert_store = nullptr);

}  // namespace strata
