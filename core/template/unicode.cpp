#include "core/template/unicode.hpp"

#include <algorithm>

#include "core/template/limits.hpp"

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
  for (size_t i = 1; i < length; ++i)
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += length;
  return code_point;
}

std::vector<std::string> split_code_points(std::string_view text) {
  charge_work(static_cast<int64_t>(text.size() * sizeof(std::string)));
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

std::vector<size_t> code_point_offsets(std::string_view text) {
  charge_work(static_cast<int64_t>(text.size() * sizeof(size_t)));
  std::vector<size_t> offsets;
  for (size_t pos = 0; pos < text.size();) {
    offsets.push_back(pos);
    decode_utf8(text, pos);
  }
  offsets.push_back(text.size());
  return offsets;
}

std::string code_point_at(std::string_view text, size_t index) {
  size_t pos = 0;
  for (size_t i = 0; i < index && pos < text.size(); ++i) decode_utf8(text, pos);
  const size_t start = pos;
  if (pos < text.size()) decode_utf8(text, pos);
  charge_work(static_cast<int64_t>(pos));
  return std::string(text.substr(start, pos - start));
}

namespace {

// Below this length a plain search is at most this many times slower than a linear one.
constexpr size_t kShortNeedle = 8;

// Knuth-Morris-Pratt: where needle (m characters, needle(j)) first occurs in text (n characters, text(i)),
// or npos, in time linear in m + n whatever the two hold (the standard library's searchers are not: its
// Boyer-Moore builds its table in quadratic time).
template <class Needle, class Text>
size_t first_match(size_t m, Needle needle, size_t n, Text text) {
  charge_work(static_cast<int64_t>(m * sizeof(size_t)));
  std::vector<size_t> border(m, 0);  // border[j]: the longest proper prefix of needle[0..j] that is also its suffix
  for (size_t j = 1, k = 0; j < m; ++j) {
    while (k > 0 && needle(j) != needle(k)) k = border[k - 1];
    if (needle(j) == needle(k)) ++k;
    border[j] = k;
  }
  for (size_t i = 0, k = 0; i < n; ++i) {
    while (k > 0 && text(i) != needle(k)) k = border[k - 1];
    if (text(i) == needle(k)) ++k;
    if (k == m) return i + 1 - m;
  }
  return std::string_view::npos;
}

}  // namespace

size_t find_text(std::string_view text, std::string_view needle, size_t from) {
  if (from > text.size() || needle.size() > text.size() - from) return std::string_view::npos;
  size_t found = std::string_view::npos;
  if (needle.size() < kShortNeedle) {
    found = text.find(needle, from);
  } else {
    const size_t match = first_match(
        needle.size(), [&](size_t j) { return needle[j]; }, text.size() - from,
        [&](size_t i) { return text[from + i]; });
    if (match != std::string_view::npos) found = from + match;
  }
  charge_work(static_cast<int64_t>((found == std::string_view::npos ? text.size() : found + needle.size()) - from));
  return found;
}

size_t rfind_text(std::string_view text, std::string_view needle, size_t end) {
  end = std::min(end, text.size());
  if (needle.size() > end) return std::string_view::npos;
  const size_t m = needle.size();
  size_t found = std::string_view::npos;
  if (m < kShortNeedle) {
    found = text.rfind(needle, end - m);
  } else {  // the last occurrence is the first one in the reversed text
    const size_t match = first_match(
        m, [&](size_t j) { return needle[m - 1 - j]; }, end, [&](size_t i) { return text[end - 1 - i]; });
    if (match != std::string_view::npos) found = end - match - m;
  }
  charge_work(static_cast<int64_t>(end - (found == std::string_view::npos ? 0 : found)));
  return found;
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
