#include "core/model/model_weights.hpp"

#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"

namespace strata {
namespace {

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

class WeightLoader {
 public:
  WeightLoader(Backend& backend, const gguf::Model& model, const ExpertStore* store = nullptr)
      : backend_(backend), model_(model), store_(store) {}

  // Loads name, which must have exactly this GGUF shape (ne0 first).
  Weight load(const std::string& name, std::vector<uint64_t> shape) const {
    return load_tensor(model_.tensor(name), name, shape);
  }

  Weight load_tensor(const gguf::TensorInfo& tensor, const std::string& name,
                     const std::vector<uint64_t>& shape) const {
    if (tensor.shape != shape) {
      throw Error(model_.first().path().string() + ": tensor '" + name + "' has shape " + shape_text(tensor.shape) +
                  ", the model's metadata implies " + shape_text(shape));
    }
    // The backend would only say that no plugin gives it the type: name it, or the providers' conflict.
    try {
      backend_.quants().require(tensor.type);
    } catch (const Error& error) {
      throw Error(model_.first().path().string() + ": tensor '" + tensor.name + "': " + error.what());
    }
    strata_weight_desc desc{};
    desc.struct_size = sizeof desc;
    desc.name = tensor.name.c_str();
    desc.type = tensor.type;
    desc.ne0 = static_cast<int64_t>(shape[0]);
    desc.ne1 = shape.size() > 1 ? static_cast<int64_t>(shape[1]) : 1;
    desc.ne2 = shape.size() > 2 ? static_cast<int64_t>(shape[2]) : 1;
    desc.data = store_ != nullptr ? store_->data(tensor) : tensor.data;
    return Weight(backend_, desc);
  }

  const gguf::Model& model() const { return model_; }

 private:
  Backend& backend_;
  const gguf::Model& model_;
  const ExpertStore* store_;  // where the tensors' bytes are, if not in the mapping
};

}  // namespace

ModelWeights load_weights(Backend& backend, const gguf::Model& model, const ModelConfig& c, Backend* expert_backend,
                          const ExpertStore* expert_store) {
  const WeightLoader loader(backend, model);
  const WeightLoader expert_loader(expert_backend != nullptr ? *expert_backend : backend, model, expert_store);
  const auto embd = static_cast<uint64_t>(c.n_embd);
  const auto q_width = static_cast<uint64_t>(c.n_head) * c.head_dim;
  const auto kv_width = static_cast<uint64_t>(c.n_head_kv) * c.head_dim;
  const auto experts = static_cast<uint64_t>(c.n_expert);
  const auto ffn = static_cast<uint64_t>(c.expert_ffn);
  const auto vocab = static_cast<uint64_t>(c.n_vocab);
  const Architecture& arch = *c.architecture;

  ModelWeights weights;
  weights.token_embd = loader.load("token_embd.weight", {embd, vocab});
  weights.output_norm = loader.load("output_norm.weight", {embd});
  const gguf::TensorInfo* output = model.find_tensor("output.weight");
  weights.output = loader.load_tensor(output ? *output : model.tensor("token_embd.weight"),
                                      output ? "output.weight" : "token_embd.weight (tied output)", {embd, vocab});
  weights.output_name = output ? "output.weight" : "token_embd.weight";

  for (int32_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights layer;
    layer.attn_norm = loader.load(p + "attn_norm.weight", {embd});
    layer.attn_q = loader.load(p + "attn_q.weight", {embd, q_width});
    layer.attn_k = loader.load(p + "attn_k.weight", {embd, kv_width});
    layer.attn_v = loader.load(p + "attn_v.weight", {embd, kv_width});
    layer.attn_output = loader.load(p + "attn_output.weight", {q_width, embd});
    if (arch.qkv_bias) {
      layer.attn_q_bias = loader.load(p + "attn_q.bias", {q_width});
      layer.attn_k_bias = loader.load(p + "attn_k.bias", {kv_width});
      layer.attn_v_bias = loader.load(p + "attn_v.bias", {kv_width});
    }
    if (arch.qk_norm) {
      layer.attn_q_norm = loader.load(p + "attn_q_norm.weight", {static_cast<uint64_t>(c.head_dim)});
      layer.attn_k_norm = loader.load(p + "attn_k_norm.weight", {static_cast<uint64_t>(c.head_dim)});
    }
    layer.ffn_norm = loader.load(p + "ffn_norm.weight", {embd});
    layer.router = loader.load(p + "ffn_gate_inp.weight", {embd, experts});
    layer.gate_exps = expert_loader.load(p + "ffn_gate_exps.weight", {embd, ffn, experts});
    layer.up_exps = expert_loader.load(p + "ffn_up_exps.weight", {embd, ffn, experts});
    layer.down_exps = expert_loader.load(p + "ffn_down_exps.weight", {ffn, embd, experts});
    if (arch.shared_expert) {
      const auto shared = static_cast<uint64_t>(c.shared_ffn);
      layer.shared_gate_inp = loader.load(p + "ffn_gate_inp_shexp.weight", {embd});
      layer.shared_gate = loader.load(p + "ffn_gate_shexp.weight", {embd, shared});
      layer.shared_up = loader.load(p + "ffn_up_shexp.weight", {embd, shared});
      layer.shared_down = loader.load(p + "ffn_down_shexp.weight", {shared, embd});
    }
    weights.layers.push_back(std::move(layer));
  }
  return weights;
}

}  // namespace strata
