#include "core/synth/quant_mix.hpp"

#include <string>

#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"

namespace strata::synth {
namespace t = gguf::type_id;

QuantMix parse_quant_mix(std::string_view name) {
  if (name == "iq3_s") return QuantMix::iq3_s;
  if (name == "iq3_xxs") return QuantMix::iq3_xxs;
  if (name == "q8_0") return QuantMix::q8_0;
  if (name == "f32") return QuantMix::f32;
  throw Error("unknown type '" + std::string(name) + "' (choose iq3_s, iq3_xxs, q8_0 or f32)");
}

std::string_view quant_mix_name(QuantMix mix) {
  switch (mix) {
    case QuantMix::iq3_s:
      return "iq3_s";
    case QuantMix::iq3_xxs:
      return "iq3_xxs";
    case QuantMix::q8_0:
      return "q8_0";
    case QuantMix::f32:
      return "f32";
  }
  return "";
}

uint32_t file_type(QuantMix mix) {
  switch (mix) {
    case QuantMix::iq3_s:
      return 26;  // LLAMA_FTYPE_MOSTLY_IQ3_S
    case QuantMix::iq3_xxs:
      return 23;  // LLAMA_FTYPE_MOSTLY_IQ3_XXS
    case QuantMix::q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case QuantMix::f32:
      return 0;  // LLAMA_FTYPE_ALL_F32
  }
  return 0;
}

namespace {

// The IQ3 mixes. llama.cpp treats 8-expert models (Mixtral-like) specially: attn_k/attn_v go to Q8_0 and
// attn_output to Q5_K, since attention is a small share of such a model. Otherwise attn_v rises to Q4_K
// when grouped-query attention shares a KV head among 4 or more query heads.
uint32_t iq3_type(const ModelShape& shape, QuantMix mix, MatrixSlot slot) {
  const uint32_t base = mix == QuantMix::iq3_s ? t::IQ3_S : t::IQ3_XXS;
  const bool eight_experts = shape.n_expert == 8;
  const bool wide_gqa = shape.n_head / shape.n_head_kv >= 4;
  switch (slot) {
    case MatrixSlot::output:
      return mix == QuantMix::iq3_s ? t::Q6_K : t::Q5_K;
    case MatrixSlot::token_embd:
      return t::IQ3_S;
    case MatrixSlot::attn_k:
      return eight_experts ? t::Q8_0 : base;
    case MatrixSlot::attn_v:
      return eight_experts ? t::Q8_0 : wide_gqa ? t::Q4_K : base;
    case MatrixSlot::attn_output:
      return eight_experts ? t::Q5_K : t::IQ3_S;
    case MatrixSlot::attn_q:
    case MatrixSlot::ffn_expert:
    case MatrixSlot::ffn_shared:
      return base;
  }
  return base;
}

}  // namespace

uint32_t matrix_type(const ModelShape& shape, QuantMix mix, MatrixSlot slot, uint64_t row_elements) {
  const uint32_t wanted = mix == QuantMix::f32 ? t::F32 : mix == QuantMix::q8_0 ? t::Q8_0 : iq3_type(shape, mix, slot);
  for (const uint32_t type : {wanted, t::Q8_0}) {
    if (row_elements % gguf::find_type(type)->block_elements == 0) return type;
  }
  return t::F32;
}

}  // namespace strata::synth
