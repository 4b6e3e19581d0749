// Finds special tokens in text, as the peer does: user-defined tokens always, control and unknown tokens
// only when asked to parse special text; longer tokens are looked for first.
#pragma once

#include <string_view>
#include <vector>

#include "core/tokenizer/vocabulary.hpp"

namespace strata::tokenizer {

// A run of plain text, or one special token.
struct Fragment {
  std::string_view text;  // empty for a special token
  std::optional<TokenId> special;
};

class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocabulary& vocabulary);  // keeps a reference

  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  // Cuts each text fragment around the occurrences of one special token.
  std::vector<Fragment> split_on(const std::vector<Fragment>& fragments, TokenId id) const;

  const Vocabulary& vocabulary_;
  std::vector<TokenId> specials_by_length_;  // control, user-defined and unknown tokens, longest first
};

}  // namespace strata::tokenizer
