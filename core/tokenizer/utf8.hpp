// UTF-8 helpers for the tokenizers and the streaming detokenizer. "Well-formed" is Unicode's definition:
// no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::tokenizer::utf8 {

// The length the peer gives the character starting with this byte, from its high bits alone (1 for a
// byte that cannot start one). Tokenizers that work on raw bytes cut characters with it.
size_t length_from_lead_byte(char lead);

// The length of the well-formed character at text[pos], or 0 when the bytes there are not one.
size_t well_formed_length(std::string_view text, size_t pos);

// The number of bytes at the end of text that start a well-formed character but stop before its end.
size_t incomplete_tail_length(std::string_view text);

// text with each byte that does not begin a well-formed character replaced by U+FFFD, as the peer reads text.
std::string replace_invalid(std::string_view text);

std::string encode(char32_t code_point);
// The code point of the well-formed character at text[pos]; the caller knows it is one.
char32_t decode(std::string_view text, size_t pos, size_t length);

}  // namespace strata::tokenizer::utf8
