#include "core/tokenizer/streaming_detokenizer.hpp"

#include "core/tokenizer/utf8.hpp"

namespace strata::tokenizer {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamingDetokenizer::push(TokenId id) {
  pending_ += tokenizer_.piece(id, count_++, render_special_);
  const size_t complete = pending_.size() - utf8::incomplete_tail_length(pending_);
  std::string out = utf8::replace_invalid(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDetokenizer::finish() {
  std::string out = utf8::replace_invalid(pending_);
  pending_.clear();
  return out;
}

}  // namespace strata::tokenizer
