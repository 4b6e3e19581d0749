// Strings are UTF-8 bytes; Python counts, indexes and slices them by code point. These helpers give the
// code point view where Python's semantics need it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja {

std::vector<std::string> split_code_points(std::string_view text);
size_t code_point_count(std::string_view text);
// Where each code point starts, then text.size(): n + 1 offsets for n code points.
std::vector<size_t> code_point_offsets(std::string_view text);
// The code point at `index` (below code_point_count).
std::string code_point_at(std::string_view text, size_t index);
void append_utf8(std::string& out, char32_t code_point);
// The code point that starts at `pos`; `pos` moves past it. Malformed bytes decode as themselves.
char32_t decode_utf8(std::string_view text, size_t& pos);

// The first occurrence of needle at or after `from` / the last one that ends at or before `end`, or npos:
// in time linear in the text and the needle (Knuth-Morris-Pratt for longer needles), so that no needle can
// make a search quadratic. The bytes searched are charged to the render's work.
size_t find_text(std::string_view text, std::string_view needle, size_t from = 0);
size_t rfind_text(std::string_view text, std::string_view needle, size_t end = std::string_view::npos);

// Python's str.isspace for the ASCII range (the only whitespace templates meet in practice).
bool is_python_space(char c);

}  // namespace strata::jinja
