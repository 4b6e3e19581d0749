// The peer engine corrects token types that converters get wrong, by token text and model name. Tokenizing
// like the peer needs the same corrections: they decide which text is split out as a special token.
#pragma once

#include <string>

#include "core/tokenizer/vocabulary.hpp"

namespace strata::tokenizer {

// Marks end-of-turn and fill-in-the-middle tokens found by their text ("<|endoftext|>", "<|im_end|>", ...)
// as control tokens, control tokens named "unused" as unused, and applies the per-model exceptions
// (gpt-oss channel tokens, Phi-3's space stripping). model_name is general.name.
void apply_token_attribute_fixups(Vocabulary& vocabulary, const std::string& model_name);

}  // namespace strata::tokenizer
