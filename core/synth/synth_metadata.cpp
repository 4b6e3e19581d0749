#include "core/synth/synth_metadata.hpp"

#include <string>

namespace strata::synth {
namespace {

gguf::Value u32(uint32_t v) { return gguf::Value{v}; }
gguf::Value i32(int32_t v) { return gguf::Value{v}; }
gguf::Value f32(float v) { return gguf::Value{v}; }
gguf::Value text(std::string v) { return gguf::Value{std::move(v)}; }

template <class T, class Convert>
gguf::Value array_of(gguf::ValueType element_type, const std::vector<T>& items, Convert convert) {
  gguf::Array array{element_type, {}};
  array.items.reserve(items.size());
  for (const auto& item : items) array.items.push_back(convert(item));
  return gguf::Value{std::move(array)};
}

void write_hyperparameters(gguf::Writer& w, const ModelShape& s) {
  const std::string arch(arch_name(s.arch));
  const auto key = [&](const char* name) { return arch + "." + name; };
  w.set(key("block_count"), u32(s.n_layer));
  w.set(key("context_length"), u32(s.n_ctx));
  w.set(key("embedding_length"), u32(s.n_embd));
  w.set(key("feed_forward_length"), u32(s.n_ff));
  w.set(key("attention.head_count"), u32(s.n_head));
  w.set(key("attention.head_count_kv"), u32(s.n_head_kv));
  w.set(key("attention.key_length"), u32(s.head_dim));
  w.set(key("attention.value_length"), u32(s.head_dim));
  w.set(key("rope.freq_base"), f32(s.rope_freq_base));
  w.set(key("attention.layer_norm_rms_epsilon"), f32(s.rms_eps));
  w.set(key("expert_count"), u32(s.n_expert));
  w.set(key("expert_used_count"), u32(s.n_expert_used));
  w.set(key("expert_feed_forward_length"), u32(s.n_ff_exp));
  if (s.arch == Arch::qwen2moe) w.set(key("expert_shared_feed_forward_length"), u32(s.n_ff_shexp));
}

void write_tokenizer(gguf::Writer& w, const SynthVocab& vocab) {
  using gguf::ValueType;
  w.set("tokenizer.ggml.model", text("gpt2"));
  w.set("tokenizer.ggml.pre", text("qwen2"));
  w.set("tokenizer.ggml.tokens", array_of(ValueType::STRING, vocab.tokens, text));
  w.set("tokenizer.ggml.token_type",
        array_of(ValueType::I32, vocab.types, [](TokenType t) { return i32(static_cast<int32_t>(t)); }));
  w.set("tokenizer.ggml.merges", array_of(ValueType::STRING, vocab.merges, text));
  w.set("tokenizer.ggml.eos_token_id", u32(static_cast<uint32_t>(vocab.im_end_id)));
  w.set("tokenizer.ggml.bos_token_id", u32(static_cast<uint32_t>(vocab.endoftext_id)));
  w.set("tokenizer.ggml.padding_token_id", u32(static_cast<uint32_t>(vocab.endoftext_id)));
  w.set("tokenizer.ggml.add_bos_token", gguf::Value{false});
  w.set("tokenizer.chat_template", text(chatml_template()));
}

}  // namespace

void write_metadata(gguf::Writer& w, const ModelShape& shape, QuantMix mix, const SynthVocab& vocab,
                    const Provenance& provenance) {
  const std::string arch(arch_name(shape.arch));
  w.set("general.architecture", text(arch));
  w.set("general.name", text("synth-" + arch + "-" + shape.preset + "-" + std::string(quant_mix_name(mix))));
  write_hyperparameters(w, shape);
  write_tokenizer(w, vocab);
  w.set("general.quantization_version", u32(2));
  w.set("general.file_type", u32(file_type(mix)));
  // Random weights: say so, so that nobody mistakes the file's outputs for a trained model's.
  w.set("strata.synth.seed", gguf::Value{provenance.seed});
  w.set("strata.synth.routing_skew", f32(provenance.routing_skew));
}

}  // namespace strata::synth
