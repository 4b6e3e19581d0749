#include "core/tokenizer/spm_encoder.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "core/tokenizer/utf8.hpp"

namespace strata::tokenizer {
namespace {

const std::string space_marker = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0;;) {
    const size_t found = text.find(from, pos);
    out.append(text.substr(pos, found - pos));
    if (found == std::string_view::npos) break;
    out.append(to);
    pos = found + from.size();
  }
  return out;
}

struct Symbol {
  size_t start = 0;
  size_t length = 0;
  int previous = -1;
  int next = -1;
};

struct Candidate {
  float score;
  int left;
  int right;
  size_t length;  // of the merged text: a candidate whose symbols changed since is stale
  // The queue's top is the highest score, leftmost first, as the peer merges.
  bool operator<(const Candidate& other) const {
    return score != other.score ? score < other.score : left > other.left;
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocabulary& vocabulary) : vocabulary_(vocabulary), byte_tokens_(256) {
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    byte_tokens_[byte] = vocabulary.find(name);
  }
}

void SpmEncoder::encode(std::string_view raw, bool after_special, std::vector<TokenId>& out) const {
  const std::string text =
      replace_all(vocabulary_.add_space_prefix && after_special ? " " + std::string(raw) : std::string(raw), " ", space_marker);

  // Symbols are characters as their lead bytes announce them; no UTF-8 check, the bytes fall back anyway.
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = std::min(utf8::length_from_lead_byte(text[pos]), text.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, length, index - 1, pos + length < text.size() ? index + 1 : -1});
    pos += length;
  }

  std::priority_queue<Candidate> queue;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    if (const auto id = vocabulary_.find(text.substr(symbols[left].start, length))) {
      queue.push({vocabulary_.tokens[*id].score, left, right, length});
    }
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate candidate = queue.top();
    queue.pop();
    auto& left = symbols[candidate.left];
    auto& right = symbols[candidate.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != candidate.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].previous = candidate.left;
    consider(left.previous, candidate.left);
    consider(candidate.left, left.next);
  }

  for (const auto& symbol : symbols) {
    if (symbol.length == 0) continue;
    const std::string piece = text.substr(symbol.start, symbol.length);
    if (const auto id = vocabulary_.find(piece)) {
      out.push_back(*id);
    } else {
      append_bytes(piece, out);
    }
  }
}

void SpmEncoder::append_bytes(std::string_view text, std::vector<TokenId>& out) const {
  for (const char byte : text) {
    if (const auto id = byte_tokens_[static_cast<uint8_t>(byte)]) {
      out.push_back(*id);
    } else if (vocabulary_.unknown) {
      out.push_back(*vocabulary_.unknown);
    }
  }
}

std::string SpmEncoder::normal_token_bytes(const std::string& token_text) const {
  return replace_all(token_text, space_marker, " ");
}

}  // namespace strata::tokenizer
