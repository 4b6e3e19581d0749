// From a conversation to prompt text with the chat template stored in the model file, and the tokens
// that end a reply.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/gguf/gguf_file.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

// Renders messages (a JSON array of {"role", "content"}) with tokenizer.chat_template, as Hugging Face's
// apply_chat_template does; tools (an array of OpenAI tool definitions, or null for none) become the template's
// `tools`. Throws strata::Error when the model has no template, and when it fails to compile or render (naming the
// model file and the template's line).
std::string format_chat(const gguf::Model& model, const tokenizer::Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& tools = nullptr);

// EOS and EOT, and the control tokens chat models end a turn with (<|im_end|>, <|eot_id|>, <|end|>).
std::set<int32_t> end_of_generation_tokens(const tokenizer::Vocabulary& vocabulary);

}  // namespace strata
