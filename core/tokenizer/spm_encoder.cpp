#include "core/tokenizer/spm_encoder.hpp"

#include <cstdio>
#include <optional>

#include "core/tokenizer/symbol_merges.hpp"

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

}  // namespace

SpmEncoder::SpmEncoder(const Vocabulary& vocabulary) : vocabulary_(vocabulary), byte_tokens_(256) {
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    byte_tokens_[byte] = vocabulary.find(name);
  }
}

void SpmEncoder::encode(std::string_view raw, bool after_special, std::vector<TokenId>& out) const {
  const std::string text = replace_all(
      vocabulary_.add_space_prefix && after_special ? " " + std::string(raw) : std::string(raw), " ", space_marker);

  // No UTF-8 check: bytes that are not characters fall back to byte tokens anyway. Adjacent symbols merge
  // when their concatenation is a token, the highest score first.
  const auto pieces = merge_symbols(text, [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const auto id = vocabulary_.find(std::string(left.data(), left.size() + right.size()));
    if (!id) return std::nullopt;
    return vocabulary_.tokens[*id].score;
  });
  for (const std::string_view piece : pieces) {
    if (const auto id = vocabulary_.find(std::string(piece))) {
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
