// What differs between tokenizer models: how plain text becomes ids, and which bytes a normal token
// stands for. Special tokens, BOS/EOS and decoding around them are shared (tokenizer.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/tokenizer/vocabulary.hpp"

namespace strata::tokenizer {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // Appends the ids of a run of plain text; after_special: it starts the text or follows a special token.
  virtual void encode(std::string_view text, bool after_special, std::vector<TokenId>& out) const = 0;
  // The bytes of a normal token's text.
  virtual std::string normal_token_bytes(const std::string& token_text) const = 0;
};

}  // namespace strata::tokenizer
