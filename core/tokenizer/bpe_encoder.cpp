#include "core/tokenizer/bpe_encoder.hpp"

#include <algorithm>
#include <queue>

#include "core/tokenizer/byte_level_map.hpp"
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

// A run of bytes of the piece; merged symbols grow rightwards and leave an empty one behind.
struct Symbol {
  size_t start = 0;
  size_t length = 0;
  int previous = -1;
  int next = -1;
};

struct Candidate {
  int rank;
  int left;
  int right;
  size_t length;  // of the merged text: a candidate whose symbols changed since is stale
  // The queue's top is the lowest rank, leftmost first, as the peer merges.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

}  // namespace

BpeEncoder::BpeEncoder(const Vocabulary& vocabulary)
    : vocabulary_(vocabulary),
      rules_(pre_tokenizer_rules(vocabulary.pre_tokenizer)),
      pre_tokenizer_(rules_.patterns) {
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
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t length = std::min(utf8::length_from_lead_byte(piece[pos]), piece.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1, pos + length < piece.size() ? index + 1 : -1});
    pos += length;
  }
  const auto text_of = [&](const Symbol& symbol) { return std::string_view(piece).substr(symbol.start, symbol.length); };

  std::priority_queue<Candidate> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = merge_rank(text_of(symbols[left]), text_of(symbols[right]));
    if (rank >= 0) queue.push({rank, left, right, symbols[left].length + symbols[right].length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    auto& left = symbols[candidate.left];
    auto& right = symbols[candidate.right];
    if (left.length == 0 || right.length == 0 || left.next != candidate.right ||
        left.length + right.length != candidate.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].previous = candidate.left;
    consider(left.previous, candidate.left);
    consider(candidate.left, left.next);
  }

  for (const auto& symbol : symbols) {
    if (symbol.length == 0) continue;
    const std::string text(text_of(symbol));
    if (const auto id = vocabulary_.find(text)) {
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
