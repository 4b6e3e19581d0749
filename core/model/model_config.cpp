#include "core/model/model_config.hpp"

#include "core/util/error.hpp"

namespace strata {
namespace {

class MetadataReader {
 public:
  MetadataReader(const gguf::Model& model, std::string prefix) : model_(model), prefix_(std::move(prefix)) {}

  int32_t integer(const std::string& key, std::optional<int32_t> fallback = std::nullopt) const {
    const gguf::Value* value = model_.find(prefix_ + key);
    if (value == nullptr) {
      if (fallback) return *fallback;
      fail(prefix_ + key + " is missing");
    }
    const auto number = value->as_int();
    if (!number || *number < 0 || *number > (int64_t{1} << 30)) fail(prefix_ + key + " is not a plausible integer");
    return static_cast<int32_t>(*number);
  }

  float real(const std::string& key, float fallback) const {
    const gguf::Value* value = model_.find(prefix_ + key);
    if (value == nullptr) return fallback;
    const auto number = value->as_float();
    if (!number) fail(prefix_ + key + " is not a number");
    return static_cast<float>(*number);
  }

  [[noreturn]] void fail(const std::string& what) const { throw Error(model_.first().path().string() + ": " + what); }

 private:
  const gguf::Model& model_;
  std::string prefix_;
};

// The tokenizer's tokens and the rows of the embeddings and the output must be the same list: a token without
// a row, or a row without a token, would only show up mid-generation. The peer refuses such files at load too.
void check_vocabulary_rows(const gguf::Model& model, const MetadataReader& meta) {
  const gguf::Value* tokens = model.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->as_array() == nullptr) return;  // no tokenizer: token ids only
  const uint64_t count = tokens->as_array()->items.size();
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    const gguf::TensorInfo* tensor = model.find_tensor(name);
    if (tensor != nullptr && tensor->shape.size() == 2 && tensor->shape[1] != count) {
      meta.fail("tokenizer.ggml.tokens holds " + std::to_string(count) + " tokens, but " + name + " has " +
                std::to_string(tensor->shape[1]) + " rows (one per token): the vocabulary does not match the model");
    }
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::Model& model) {
  const std::string file = model.first().path().string();
  const gguf::Value* arch_value = model.find("general.architecture");
  if (arch_value == nullptr || arch_value->as_string() == nullptr)
    throw Error(file + ": general.architecture is missing");
  const std::string& arch_name = *arch_value->as_string();
  ModelConfig config;
  config.architecture = find_architecture(arch_name);
  if (config.architecture == nullptr) {
    throw Error(file + ": architecture '" + arch_name +
                "' is not supported (known: " + std::string(known_architectures()) + ")");
  }
  const MetadataReader meta(model, arch_name + ".");
  config.n_layer = meta.integer("block_count");
  config.n_embd = meta.integer("embedding_length");
  config.n_head = meta.integer("attention.head_count");
  config.n_head_kv = meta.integer("attention.head_count_kv", config.n_head);
  config.head_dim = meta.integer("attention.key_length", config.n_head > 0 ? config.n_embd / config.n_head : 0);
  if (meta.integer("attention.value_length", config.head_dim) != config.head_dim) {
    meta.fail(arch_name + ".attention.value_length differs from key_length, which this engine does not support");
  }
  config.n_rot = meta.integer("rope.dimension_count", config.head_dim);
  config.n_expert = meta.integer("expert_count");
  config.n_expert_used = meta.integer("expert_used_count");
  config.expert_ffn = meta.integer("expert_feed_forward_length");
  config.shared_ffn = config.architecture->shared_expert ? meta.integer("expert_shared_feed_forward_length") : 0;
  config.n_ctx_train = meta.integer("context_length", 0);
  config.rope_base = meta.real("rope.freq_base", 10000.0f);
  config.rms_eps = meta.real("attention.layer_norm_rms_epsilon", 1e-6f);

  if (config.n_layer < 1 || config.n_embd < 1 || config.n_head < 1 || config.head_dim < 1) {
    meta.fail("block_count, embedding_length, head_count and key_length must be positive");
  }
  if (config.n_head_kv < 1 || config.n_head % config.n_head_kv != 0) {
    meta.fail(arch_name + ".attention.head_count " + std::to_string(config.n_head) +
              " is not a multiple of head_count_kv " + std::to_string(config.n_head_kv));
  }
  if (config.n_rot < 2 || config.n_rot > config.head_dim || config.n_rot % 2 != 0) {
    meta.fail(arch_name + ".rope.dimension_count " + std::to_string(config.n_rot) + " does not fit the head dimension");
  }
  if (config.n_expert < 1 || config.n_expert_used < 1 || config.n_expert_used > config.n_expert) {
    meta.fail(arch_name + ".expert_used_count " + std::to_string(config.n_expert_used) + " must be 1.." +
              std::to_string(config.n_expert) + " (expert_count)");
  }
  const gguf::TensorInfo& embeddings = model.tensor("token_embd.weight");
  if (embeddings.shape.size() != 2 || embeddings.shape[0] != static_cast<uint64_t>(config.n_embd)) {
    meta.fail("token_embd.weight does not have embedding_length " + std::to_string(config.n_embd) + " columns");
  }
  config.n_vocab = static_cast<int32_t>(embeddings.shape[1]);
  check_vocabulary_rows(model, meta);
  return config;
}

}  // namespace strata
