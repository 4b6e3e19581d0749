// A small byte-level BPE vocabulary in the shape of Qwen's (tokenizer.ggml.model "gpt2", pre "qwen2"):
// the 256 byte tokens in GPT-2's byte-to-unicode mapping, tokens learned by BPE merges over a built-in
// English sample, the ChatML special tokens, then [PADn] filler up to the vocabulary size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::synth {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { normal = 1, control = 3, unused = 5 };

struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // "left right", in merge order
  int32_t endoftext_id = -1;        // <|endoftext|>: bos and padding, as in Qwen's files
  int32_t im_start_id = -1;
  int32_t im_end_id = -1;  // <|im_end|>: eos, as in Qwen's chat models
};

// Needs room for the byte tokens and the special tokens; merges fill what the sample text supports.
SynthVocab build_vocab(uint32_t n_vocab);

// GPT-2's byte-to-unicode mapping: the UTF-8 text of the character that stands for byte b.
std::string byte_token(uint8_t b);

// Qwen's ChatML template (with Qwen2's default system message).
const std::string& chatml_template();

}  // namespace strata::synth
