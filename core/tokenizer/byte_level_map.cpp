#include "core/tokenizer/byte_level_map.hpp"

#include <array>
#include <cstdint>

#include "core/tokenizer/utf8.hpp"

namespace strata::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> code_point_to_byte;  // -1: not a mapped character; every mapped one is below 324
};

// Printable Latin-1 bytes stand for themselves; the others, in byte order, take U+0100, U+0101, ...
const Tables& tables() {
  static const Tables built = [] {
    Tables t;
    t.code_point_to_byte.fill(-1);
    char32_t next_extra = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      const char32_t code_point = printable ? static_cast<char32_t>(byte) : next_extra++;
      t.byte_to_text[byte] = utf8::encode(code_point);
      t.code_point_to_byte[code_point] = static_cast<int16_t>(byte);
    }
    return t;
  }();
  return built;
}

}  // namespace

std::string encode(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) out += t.byte_to_text[static_cast<uint8_t>(byte)];
  return out;
}

std::string decode(std::string_view mapped) {
  const auto& t = tables();
  std::string out;
  out.reserve(mapped.size());
  for (size_t pos = 0; pos < mapped.size();) {
    const size_t length = utf8::well_formed_length(mapped, pos);
    if (length == 0) {  // not UTF-8 at all: keep the byte
      out += mapped[pos++];
      continue;
    }
    const char32_t code_point = utf8::decode(mapped, pos, length);
    const int byte = code_point < t.code_point_to_byte.size() ? t.code_point_to_byte[code_point] : -1;
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(mapped, pos, length);
    }
    pos += length;
  }
  return out;
}

}  // namespace strata::tokenizer::byte_level
