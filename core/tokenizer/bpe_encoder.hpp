// Byte-level BPE (tokenizer.ggml.model "gpt2"): the pre-tokenizer splits the text, each piece's bytes are
// spelled with GPT-2's byte mapping, and adjacent symbols merge by merge rank, lowest first.
#pragma once

#include <unordered_map>

#include "core/tokenizer/pre_tokenizer.hpp"
#include "core/tokenizer/pre_tokenizer_rules.hpp"
#include "core/tokenizer/text_encoder.hpp"

namespace strata::tokenizer {

class BpeEncoder : public TextEncoder {
 public:
  // Keeps a reference to vocabulary. Throws for an unknown pre-tokenizer or a build without PCRE2.
  explicit BpeEncoder(const Vocabulary& vocabulary);

  void encode(std::string_view text, bool after_special, std::vector<TokenId>& out) const override;
  std::string normal_token_bytes(const std::string& token_text) const override;

 private:
  void encode_piece(const std::string& piece, std::vector<TokenId>& out) const;
  // The rank of merging left and right, or -1 when the vocabulary has no such merge.
  int merge_rank(std::string_view left, std::string_view right) const;

  const Vocabulary& vocabulary_;
  const PreTokenizerRules& rules_;
  PreTokenizer pre_tokenizer_;
  std::unordered_map<std::string, int> merge_ranks_;  // key: merge_key(left, right)
};

}  // namespace strata::tokenizer
