// Turns ids into text one id at a time, for printing while generating: only whole UTF-8 characters come
// out; the start of a character split across tokens waits for the next id.
#pragma once

#include <string>

#include "core/tokenizer/tokenizer.hpp"

namespace strata::tokenizer {

class StreamingDetokenizer {
 public:
  // Keeps a reference to tokenizer.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = true);

  // The complete characters the text has gained with id (possibly none). Bytes that can never be part
  // of a character come out as U+FFFD, so the result is always well-formed UTF-8.
  std::string push(TokenId id);
  // What is still held back, at the end of the sequence: an unfinished character, as U+FFFD.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  size_t count_ = 0;
  std::string pending_;  // bytes of a character not finished yet
};

}  // namespace strata::tokenizer
