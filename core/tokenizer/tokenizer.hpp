// Text to token ids and back, for the vocabulary a GGUF file carries: byte-level BPE ("gpt2") or
// SentencePiece-style ("llama"), special tokens, BOS/EOS, as the peer engine tokenizes.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "core/tokenizer/special_token_splitter.hpp"
#include "core/tokenizer/text_encoder.hpp"
#include "core/tokenizer/vocabulary.hpp"

namespace strata::tokenizer {

struct EncodeOptions {
  bool add_special = false;    // BOS / EOS as tokenizer.ggml.add_bos_token / add_eos_token say
  bool parse_special = false;  // control tokens written in the text become their ids
};

class Tokenizer {
 public:
  // Throws strata::Error for a missing or unsupported vocabulary, an unknown pre-tokenizer, or a byte-level
  // BPE vocabulary in a build without PCRE2.
  explicit Tokenizer(const gguf::Model& model);
  explicit Tokenizer(Vocabulary vocabulary);

  const Vocabulary& vocabulary() const { return *vocabulary_; }

  std::vector<TokenId> encode(std::string_view text, EncodeOptions options = {}) const;

  // The bytes token `id` stands for at position `index` of a sequence: SentencePiece drops the space it
  // put before the text from the first token. Control and unknown tokens give their text only when
  // render_special. Throws for an id outside the vocabulary.
  std::string piece(TokenId id, size_t index, bool render_special) const;
  // All pieces, concatenated: the bytes may end inside a UTF-8 character (see StreamingDetokenizer).
  std::string decode(std::span<const TokenId> ids, bool render_special = true) const;

 private:
  std::unique_ptr<const Vocabulary> vocabulary_;  // on the heap: the encoders keep references into it
  std::unique_ptr<const TextEncoder> encoder_;
  SpecialTokenSplitter special_tokens_;
};

}  // namespace strata::tokenizer
