// A model's hyperparameters, read from GGUF metadata and checked against its tensors.
#pragma once

#include <cstdint>

#include "core/gguf/gguf_file.hpp"
#include "core/model/architecture.hpp"

namespace strata {

struct ModelConfig {
  const Architecture* architecture = nullptr;
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_rot = 0;  // rotated dimensions per head
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t expert_ffn = 0;
  int32_t shared_ffn = 0;  // 0 without a shared expert
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;  // the context the model was trained for (ARCH.context_length); 0: not given
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;

  // Throws strata::Error naming the file and the missing or inconsistent key.
  static ModelConfig from_gguf(const gguf::Model& model);
};

}  // namespace strata
