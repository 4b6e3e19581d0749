// The merge loop both encoders share. A text starts as its characters (as their UTF-8 lead bytes
// announce them); adjacent symbols are merged best first, leftmost first among equals, until no pair
// merges. priority(left, right) says how good merging two adjacent symbols is (higher is better) or
// nullopt when they do not merge: BPE ranks merge rules, SentencePiece scores the merged token.
#pragma once

#include <algorithm>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "core/tokenizer/utf8.hpp"

namespace strata::tokenizer {

template <class Priority>
std::vector<std::string_view> merge_symbols(std::string_view text, Priority priority) {
  // A run of bytes of the text; merged symbols grow rightwards and leave an empty one behind.
  struct Symbol {
    size_t start = 0, length = 0;
    int previous = -1, next = -1;
  };
  struct Candidate {
    double priority;
    int left, right;
    size_t length;  // of the merged text: a candidate whose symbols changed since is stale
    bool operator<(const Candidate& other) const {
      return priority != other.priority ? priority < other.priority : left > other.left;
    }
  };
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = std::min(utf8::length_from_lead_byte(text[pos]), text.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1, pos + length < text.size() ? index + 1 : -1});
    pos += length;
  }
  const auto text_of = [&](const Symbol& symbol) { return text.substr(symbol.start, symbol.length); };

  std::priority_queue<Candidate> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (const std::optional<double> value = priority(text_of(symbols[left]), text_of(symbols[right]))) {
      queue.push({*value, left, right, symbols[left].length + symbols[right].length});
    }
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

  std::vector<std::string_view> pieces;
  for (const auto& symbol : symbols) {
    if (symbol.length > 0) pieces.push_back(text_of(symbol));
  }
  return pieces;
}

}  // namespace strata::tokenizer
