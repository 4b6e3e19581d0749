// GPT-2's reversible mapping between bytes and printable characters: byte-level BPE vocabularies spell
// every byte as one character (a space is "Ġ", a newline "Ċ"), so that tokens are printable text.
#pragma once

#include <string>
#include <string_view>

namespace strata::tokenizer::byte_level {

// Each byte of text replaced by the UTF-8 of the character that stands for it.
std::string encode(std::string_view bytes);

// The reverse, character by character; a character outside the mapping is kept as it is.
std::string decode(std::string_view mapped);

}  // namespace strata::tokenizer::byte_level
