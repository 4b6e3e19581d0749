#include "core/tokenizer/token_attribute_fixups.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace strata::tokenizer {
namespace {

// Texts the peer treats as control tokens whatever their stored type: end-of-generation and
// fill-in-the-middle markers of the common model families.
constexpr std::array control_looking_texts = {
    // end of turn / generation
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
    "<|eom_id|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "</s>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "[e~[",
    // fill in the middle
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
};

// gpt-oss: rendered and split like user text markers, not control tokens.
constexpr std::array gpt_oss_user_defined_texts = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

void set_user_defined(Vocabulary& vocabulary, const char* text) {
  if (const auto id = vocabulary.find(text)) vocabulary.tokens[*id].attributes = attribute::user_defined;
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

}  // namespace

void apply_token_attribute_fixups(Vocabulary& vocabulary, const std::string& model_name) {
  for (const char* text : control_looking_texts) {
    if (const auto id = vocabulary.find(text)) vocabulary.tokens[*id].attributes |= attribute::control;
  }
  for (auto& token : vocabulary.tokens) {
    if ((token.attributes & attribute::control) && contains(token.text, "unused"))
      token.attributes |= attribute::unused;
  }
  for (const char* text : gpt_oss_user_defined_texts) set_user_defined(vocabulary, text);
  // o200k_harmony: with <|return|> and <|call|> present, <|end|> separates messages instead of ending generation.
  const bool harmony = (vocabulary.find("<|return|>") && vocabulary.find("<|call|>")) ||
                       (vocabulary.find("<|calls|>") && vocabulary.find("<|flush|>"));
  if (harmony) set_user_defined(vocabulary, "<|end|>");

  std::string lower_name = model_name;
  std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (contains(lower_name, "phi-3") || contains(lower_name, "phi3")) {
    // Phi-3 swallows whitespace after its special tokens, except after these three.
    for (auto& token : vocabulary.tokens) {
      if (token.attributes & (attribute::control | attribute::user_defined | attribute::unknown)) {
        token.attributes |= attribute::strip_space_after;
      }
    }
    if (const auto id = vocabulary.find("</s>")) vocabulary.tokens[*id].attributes |= attribute::strip_space_after;
    for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (const auto id = vocabulary.find(text)) vocabulary.tokens[*id].attributes &= ~attribute::strip_space_after;
    }
  }
}

}  // namespace strata::tokenizer
