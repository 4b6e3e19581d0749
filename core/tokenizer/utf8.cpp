#include "core/tokenizer/utf8.hpp"

#include <cstdint>

namespace strata::tokenizer::utf8 {
namespace {

struct LeadByte {
  size_t length = 0;          // 0: not a lead byte
  uint8_t second_min = 0x80;  // the second byte's range, narrower after E0, ED, F0 and F4
  uint8_t second_max = 0xBF;
};

LeadByte classify(uint8_t byte) {
  if (byte < 0x80) return {1};
  if (byte >= 0xC2 && byte <= 0xDF) return {2};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {4};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// How many bytes from text[pos] (at most `available`) follow the rules of the sequence they start.
size_t valid_prefix_length(std::string_view text, size_t pos, size_t available, const LeadByte& lead) {
  size_t length = 1;
  while (length < lead.length && length < available) {
    const auto byte = static_cast<uint8_t>(text[pos + length]);
    const bool ok = length == 1 ? byte >= lead.second_min && byte <= lead.second_max : is_continuation(byte);
    if (!ok) break;
    ++length;
  }
  return length;
}

}  // namespace

size_t length_from_lead_byte(char lead) {
  static constexpr size_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lengths[static_cast<uint8_t>(lead) >> 4];
}

size_t well_formed_length(std::string_view text, size_t pos) {
  const auto lead = classify(static_cast<uint8_t>(text[pos]));
  if (lead.length == 0) return 0;
  const size_t available = text.size() - pos;
  return valid_prefix_length(text, pos, available, lead) == lead.length ? lead.length : 0;
}

size_t incomplete_tail_length(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const size_t pos = text.size() - back;
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (is_continuation(byte)) continue;
    const auto lead = classify(byte);
    const bool incomplete = lead.length > back && valid_prefix_length(text, pos, back, lead) == back;
    return incomplete ? back : 0;
  }
  return 0;
}

std::string replace_invalid(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = well_formed_length(text, pos);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(text, pos, length);
      pos += length;
    }
  }
  return out;
}

std::string encode(char32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return out;
}

char32_t decode(std::string_view text, size_t pos, size_t length) {
  static constexpr uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t code_point = static_cast<uint8_t>(text[pos]) & lead_mask[length];
  for (size_t i = 1; i < length; ++i) code_point = (code_point << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  return code_point;
}

}  // namespace strata::tokenizer::utf8
