// A tokenizer's vocabulary as a GGUF file stores it (tokenizer.ggml.*): token texts, scores and types,
// BPE merges, the special token ids and the add-BOS/EOS and space-prefix flags, with the peer engine's
// defaults for keys a file leaves out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gguf/gguf_file.hpp"

namespace strata::tokenizer {

using TokenId = int32_t;

// Token attributes, a bit set: tokenizer.ggml.token_type gives one of the first six, the peer's
// text-based fixups may add more.
namespace attribute {
inline constexpr uint32_t normal = 1u << 0;
inline constexpr uint32_t unknown = 1u << 1;
inline constexpr uint32_t control = 1u << 2;
inline constexpr uint32_t user_defined = 1u << 3;
inline constexpr uint32_t unused = 1u << 4;
inline constexpr uint32_t byte = 1u << 5;
inline constexpr uint32_t strip_space_before = 1u << 6;  // whitespace left of the token is dropped
inline constexpr uint32_t strip_space_after = 1u << 7;   // whitespace right of the token is dropped
}  // namespace attribute

struct Token {
  std::string text;
  float score = 0.0f;
  uint32_t attributes = attribute::normal;
};

struct Vocabulary {
  std::string model;          // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre_tokenizer;  // tokenizer.ggml.pre ("default" when absent)
  std::vector<Token> tokens;
  std::unordered_map<std::string, TokenId> ids;  // text -> id
  std::vector<std::string> merges;               // "left right", rank order (BPE only)

  std::optional<TokenId> bos, eos, eot, unknown, padding;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: a space before the text (and dropped again on decode)

  static Vocabulary from_gguf(const gguf::Model& model);

  std::optional<TokenId> find(const std::string& text) const;
  bool has(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens.size(); }
  const Token& token(TokenId id) const;  // throws strata::Error when out of range
};

}  // namespace strata::tokenizer
