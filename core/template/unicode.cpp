#include "core/template/unicode.hpp"

namespace strata::jinja {

namespace {

size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace

char32_t decode_utf8(std::string_view text, size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t length = sequence_length(lead);
  if (length == 1 || pos + length > text.size()) {
    ++pos;
    return lead;
  }
  static constexpr unsigned char lead_masks[] = {0, 0, 0x1F, 0x0F, 0x07};
  char32_t code_point = lead & lead_masks[length];
  for (size_t i = 1; i < length; ++i) code_point = (code_point << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += length;
  return code_point;
}

std::vector<std::string> split_code_points(std::string_view text) {
  std::vector<std::string> pieces;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    decode_utf8(text, pos);
    pieces.emplace_back(text.substr(start, pos - start));
  }
  return pieces;
}

// Counted as split_code_points splits (invalid bytes count one each), so that an index below the count
// is always a valid piece.
size_t code_point_count(std::string_view text) {
  size_t count = 0;
  for (size_t pos = 0; pos < text.size(); ++count) decode_utf8(text, pos);
  return count;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

}  // namespace strata::jinja
