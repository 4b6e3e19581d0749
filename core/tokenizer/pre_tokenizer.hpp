// Splits text into the pieces byte-level BPE merges within, with the pre-tokenizer's regexes compiled
// once (PCRE2, UTF and Unicode properties, JIT when available). Builds without PCRE2 throw on construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tokenizer {

class PreTokenizer {
 public:
  // Throws strata::Error naming a pattern PCRE2 rejects, or saying that this build has no PCRE2.
  explicit PreTokenizer(const std::vector<std::string>& patterns);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // text must be well-formed UTF-8. Each pattern splits every piece of the previous one into its matches
  // and the text between them (nothing is dropped); a pattern sees only its piece, so lookaheads and $
  // stop at the piece's end. The pieces view text.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> patterns_;
};

}  // namespace strata::tokenizer
