// Which GGUF type each weight matrix gets for a --type, following llama.cpp's llama_tensor_get_type for a
// quantization run with an importance matrix (as the reference IQ3 files were made).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/synth/model_shape.hpp"

namespace strata::synth {

enum class QuantMix { iq3_s, iq3_xxs, q8_0, f32 };
QuantMix parse_quant_mix(std::string_view name);  // throws strata::Error naming the choices
std::string_view quant_mix_name(QuantMix mix);
// general.file_type: llama.cpp's llama_ftype for the mix.
uint32_t file_type(QuantMix mix);

// The weight matrices the mix distinguishes. Norms, biases and routers are always F32.
enum class MatrixSlot { token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_expert, ffn_shared };

// The GGUF type for a matrix whose rows hold row_elements values. When the rows are not whole blocks of
// the chosen type it falls back to Q8_0 (or F32), as llama.cpp falls back to a type that fits.
uint32_t matrix_type(const ModelShape& shape, QuantMix mix, MatrixSlot slot, uint64_t row_elements);

}  // namespace strata::synth
