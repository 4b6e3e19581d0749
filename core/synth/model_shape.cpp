#include "core/synth/model_shape.hpp"

#include "core/util/error.hpp"

namespace strata::synth {

std::string_view arch_name(Arch arch) { return arch == Arch::qwen3moe ? "qwen3moe" : "qwen2moe"; }

Arch parse_arch(std::string_view name) {
  if (name == "qwen3moe") return Arch::qwen3moe;
  if (name == "qwen2moe") return Arch::qwen2moe;
  throw Error("unknown architecture '" + std::string(name) + "' (choose qwen3moe or qwen2moe)");
}

std::vector<std::string> preset_names() { return {"tiny", "cpu-bench", "qwen3-30b-a3b"}; }

namespace {

// Qwen's MoE models size the shared expert as the routed experts a token uses together
// (Qwen1.5-MoE-A2.7B: 4 x 1408 = 5632; Qwen2-57B-A14B: 8 x 2560 = 20480).
uint32_t shared_expert_size(const ModelShape& shape) { return shape.n_expert_used * shape.n_ff_exp; }

}  // namespace

ModelShape preset_shape(Arch arch, std::string_view preset) {
  ModelShape shape;
  shape.arch = arch;
  shape.preset = std::string(preset);
  const bool qwen2 = arch == Arch::qwen2moe;
  if (preset == "tiny") {
    // The reference models' shape (qwen2moe: 4 experts and a shared expert of 256).
    shape.n_layer = 2, shape.n_embd = 256, shape.n_ff = 512, shape.n_head = 4, shape.n_head_kv = 2;
    shape.head_dim = 64, shape.n_expert = qwen2 ? 4 : 8, shape.n_expert_used = 2, shape.n_ff_exp = 256;
    shape.n_vocab = 512, shape.n_ctx = 4096;
    shape.n_ff_shexp = qwen2 ? 256 : 0;
  } else if (preset == "cpu-bench") {
    // A 1/4-width Qwen3-30B-A3B: small enough for a laptop's RAM, same vocabulary (the lm head stays real).
    shape.n_layer = 12, shape.n_embd = 1024, shape.n_ff = 3072, shape.n_head = 16, shape.n_head_kv = 4;
    shape.head_dim = 64, shape.n_expert = 32, shape.n_expert_used = 4, shape.n_ff_exp = 512;
    shape.n_vocab = 151936, shape.n_ctx = 32768;
    shape.n_ff_shexp = qwen2 ? shared_expert_size(shape) : 0;
  } else if (preset == "qwen3-30b-a3b") {
    // Qwen3-30B-A3B's config. qwen2moe keeps n_head * head_dim == n_embd, so it gets 16 heads of 128.
    shape.n_layer = 48, shape.n_embd = 2048, shape.n_ff = 6144, shape.n_head = qwen2 ? 16 : 32, shape.n_head_kv = 4;
    shape.head_dim = 128, shape.n_expert = 128, shape.n_expert_used = 8, shape.n_ff_exp = 768;
    shape.n_vocab = 151936, shape.n_ctx = 40960;
    shape.n_ff_shexp = qwen2 ? shared_expert_size(shape) : 0;
  } else {
    throw Error("unknown preset '" + std::string(preset) + "' (choose tiny, cpu-bench or qwen3-30b-a3b)");
  }
  validate_shape(shape);
  return shape;
}

void validate_shape(const ModelShape& shape) {
  const auto fail = [&](const std::string& what) {
    throw Error("synthetic " + std::string(arch_name(shape.arch)) + " shape: " + what);
  };
  if (shape.n_layer == 0 || shape.n_embd == 0 || shape.n_head == 0 || shape.head_dim == 0 || shape.n_expert == 0 ||
      shape.n_ff_exp == 0 || shape.n_vocab == 0) {
    fail("every size must be positive");
  }
  if (shape.n_head_kv == 0 || shape.n_head % shape.n_head_kv != 0)
    fail("head_count must be a multiple of head_count_kv");
  if (shape.n_expert_used == 0 || shape.n_expert_used > shape.n_expert)
    fail("expert_used_count must be in 1..expert_count");
  if (shape.arch == Arch::qwen2moe) {
    if (shape.q_dim() != shape.n_embd) fail("qwen2moe needs head_count * key_length == embedding_length");
    if (shape.n_ff_shexp == 0) fail("qwen2moe needs a shared expert");
  } else if (shape.n_ff_shexp != 0) {
    fail("qwen3moe has no shared expert");
  }
}

}  // namespace strata::synth
