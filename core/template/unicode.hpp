// Strings are UTF-8 bytes; Python counts, indexes and slices them by code point. These helpers give the
// code point view where Python's semantics need it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja {

std::vector<std::string> split_code_points(std::string_view text);
size_t code_point_count(std::string_view text);
void append_utf8(std::string& out, char32_t code_point);
// The code point that starts at `pos`; `pos` moves past it. Malformed bytes decode as themselves.
char32_t decode_utf8(std::string_view text, size_t& pos);

// Python's str.isspace for the ASCII range (the only whitespace templates meet in practice).
bool is_python_space(char c);

}  // namespace strata::jinja
