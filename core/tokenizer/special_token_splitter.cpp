#include "core/tokenizer/special_token_splitter.hpp"

#include <algorithm>
#include <cctype>

namespace strata::tokenizer {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocabulary& vocabulary) : vocabulary_(vocabulary) {
  for (TokenId id = 0; id < static_cast<TokenId>(vocabulary.tokens.size()); ++id) {
    if (vocabulary.tokens[id].attributes & (attribute::control | attribute::user_defined | attribute::unknown)) {
      specials_by_length_.push_back(id);
    }
  }
  std::stable_sort(specials_by_length_.begin(), specials_by_length_.end(), [&](TokenId a, TokenId b) {
    return vocabulary.tokens[a].text.size() > vocabulary.tokens[b].text.size();
  });
}

std::vector<Fragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({text, std::nullopt});
  for (const TokenId id : specials_by_length_) {
    // User-defined tokens are split out even from plain text, as Hugging Face's tokenizers do.
    const bool needs_parse_special = vocabulary_.tokens[id].attributes & (attribute::control | attribute::unknown);
    if (needs_parse_special && !parse_special) continue;
    fragments = split_on(fragments, id);
  }
  return fragments;
}

std::vector<Fragment> SpecialTokenSplitter::split_on(const std::vector<Fragment>& fragments, TokenId id) const {
  const auto& token = vocabulary_.tokens[id];
  std::vector<Fragment> out;
  out.reserve(fragments.size());
  for (const auto& fragment : fragments) {
    if (fragment.special) {
      out.push_back(fragment);
      continue;
    }
    std::string_view rest = fragment.text;
    for (size_t found; (found = rest.find(token.text)) != std::string_view::npos;) {
      std::string_view left = rest.substr(0, found);
      if (token.attributes & attribute::strip_space_before) {
        while (!left.empty() && is_space(left.back())) left.remove_suffix(1);
      }
      if (!left.empty()) out.push_back({left, std::nullopt});
      out.push_back({{}, id});
      rest.remove_prefix(found + token.text.size());
      if (token.attributes & attribute::strip_space_after) {
        while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
      }
    }
    if (!rest.empty()) out.push_back({rest, std::nullopt});
  }
  return out;
}

}  // namespace strata::tokenizer
