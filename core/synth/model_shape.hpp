// The hyperparameters of a synthetic model and the named presets that fill them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::synth {

enum class Arch { qwen3moe, qwen2moe };
std::string_view arch_name(Arch arch);
Arch parse_arch(std::string_view name);  // throws strata::Error naming the choices

struct ModelShape {
  Arch arch = Arch::qwen3moe;
  std::string preset;
  uint32_t n_layer = 0;
  uint32_t n_embd = 0;
  uint32_t n_ff = 0;  // the dense FFN size llama.cpp records as feed_forward_length (unused by MoE blocks)
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  uint32_t n_ff_shexp = 0;  // qwen2moe's shared expert; 0 for qwen3moe
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;
  float rope_freq_base = 1e6f;
  float rms_eps = 1e-6f;

  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Names accepted by preset_shape: "tiny", "cpu-bench", "qwen3-30b-a3b".
std::vector<std::string> preset_names();
// The preset's shape for arch; throws strata::Error for an unknown preset.
ModelShape preset_shape(Arch arch, std::string_view preset);

// Throws strata::Error when the shape cannot form a valid model of its arch (e.g. qwen2moe needs
// n_head * head_dim == n_embd, as llama.cpp builds its attention weights square).
void validate_shape(const ModelShape& shape);

}  // namespace strata::synth
