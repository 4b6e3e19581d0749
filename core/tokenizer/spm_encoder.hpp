// SentencePiece-style BPE (tokenizer.ggml.model "llama"), as the peer runs it: spaces become "▁", a
// space is put before text that starts the input or follows a special token (add_space_prefix), adjacent
// pieces merge while their concatenation is a token, highest score first, and what is left without a token
// falls back to <0xXX> byte tokens.
#pragma once

#include "core/tokenizer/text_encoder.hpp"

namespace strata::tokenizer {

class SpmEncoder : public TextEncoder {
 public:
  explicit SpmEncoder(const Vocabulary& vocabulary);  // keeps a reference

  void encode(std::string_view text, bool after_special, std::vector<TokenId>& out) const override;
  std::string normal_token_bytes(const std::string& token_text) const override;

 private:
  void append_bytes(std::string_view text, std::vector<TokenId>& out) const;

  const Vocabulary& vocabulary_;
  std::vector<std::optional<TokenId>> byte_tokens_;  // <0x00> .. <0xFF>
};

}  // namespace strata::tokenizer
