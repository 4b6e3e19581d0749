// What each byte-level BPE pre-tokenizer (tokenizer.ggml.pre) does, as the peer engine defines it: the
// splitting regexes, applied in sequence, and the flags that come with the name.
#pragma once

#include <string>
#include <vector>

namespace strata::tokenizer {

struct PreTokenizerRules {
  std::vector<std::string> patterns;  // PCRE2 syntax; each one splits every piece of the one before
  bool ignore_merges = false;         // a piece that is a token as a whole is taken without merging
  bool add_bos = false;               // default of tokenizer.ggml.add_bos_token
};

// The rules for a tokenizer.ggml.pre value; throws strata::Error naming an unknown one.
const PreTokenizerRules& pre_tokenizer_rules(const std::string& name);

}  // namespace strata::tokenizer
