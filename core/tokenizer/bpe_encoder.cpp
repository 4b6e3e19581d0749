#include "core/tokenizer/bpe_encoder.hpp"

#include <optional>

#include "core/tokenizer/byte_level_map.hpp"
#include "core/tokenizer/symbol_merges.hpp"
#include "core/tokenizer/utf8.hpp"

namespace strata::tokenizer {
namespace {

// Unambiguous even if a token held a space: the left part's length comes first.
std::string merge_key(std::string_view left, std::string_view right) {
  std::string key = std::to_string(left.size());
  key += ':';
  key += left;
  key += right;
  return key;
}

}  // namespace

BpeEncoder::BpeEncoder(const Vocabulary& vocabulary)
    : vocabulary_(vocabulary), rules_(pre_tokenizer_rules(vocabulary.pre_tokenizer)), pre_tokenizer_(rules_.patterns) {
  merge_ranks_.reserve(vocabulary.merges.size());
  for (size_t rank = 0; rank < vocabulary.merges.size(); ++rank) {
    const auto& merge = vocabulary.merges[rank];
    const size_t space = merge.find(' ', 1);  // from 1: a left part may itself be a space
    if (space == std::string::npos) continue;
    merge_ranks_.emplace(merge_key(std::string_view(merge).substr(0, space), std::string_view(merge).substr(space + 1)),
                         static_cast<int>(rank));
  }
}

int BpeEncoder::merge_rank(std::string_view left, std::string_view right) const {
  const auto found = merge_ranks_.find(merge_key(left, right));
  return found == merge_ranks_.end() ? -1 : found->second;
}

void BpeEncoder::encode(std::string_view text, bool /*after_special*/, std::vector<TokenId>& out) const {
  // The peer reads text as code points, with U+FFFD for bytes that are not UTF-8.
  const std::string clean = utf8::replace_invalid(text);
  for (const auto piece : pre_tokenizer_.split(clean)) encode_piece(byte_level::encode(piece), out);
}

void BpeEncoder::encode_piece(const std::string& piece, std::vector<TokenId>& out) const {
  if (rules_.ignore_merges) {
    if (const auto id = vocabulary_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  // Lower ranks merge first.
  const auto pieces = merge_symbols(piece, [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const int rank = merge_rank(left, right);
    if (rank < 0) return std::nullopt;
    return -static_cast<double>(rank);
  });
  for (const std::string_view text : pieces) {
    if (const auto id = vocabulary_.find(std::string(text))) {
      out.push_back(*id);
      continue;
    }
    // No such token: the peer falls back to one-byte tokens, skipping bytes that have none.
    for (const char byte : text) {
      if (const auto id = vocabulary_.find(std::string(1, byte))) out.push_back(*id);
    }
  }
}

std::string BpeEncoder::normal_token_bytes(const std::string& token_text) const {
  return byte_level::decode(token_text);
}

}  // namespace strata::tokenizer
