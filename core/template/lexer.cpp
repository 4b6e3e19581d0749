#include "core/template/lexer.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/template/unicode.hpp"
#include "core/util/error.hpp"

namespace strata::jinja {
namespace {

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Jinja2 normalizes every newline to "\n" and, without keep_trailing_newline, drops one final newline.
std::string normalize_newlines(std::string_view source) {
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source_.size(); ++i) {
      if (source_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit(TokenType::Data, source_.substr(pos_), pos_);
        break;
      }
      const char kind = source_[tag + 1];
      const char sign =
          tag + 2 < source_.size() && (source_[tag + 2] == '-' || source_[tag + 2] == '+') ? source_[tag + 2] : 0;
      std::string text = source_.substr(pos_, tag - pos_);
      strip_before_tag(text, sign, kind != '{');
      if (!text.empty()) emit(TokenType::Data, std::move(text), pos_);
      const size_t after_sign = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment(tag, after_sign);
      } else if (const size_t raw_body = raw_begin_end(after_sign); kind == '%' && raw_body != std::string::npos) {
        lex_raw(tag, raw_body);
      } else {
        lex_tag(tag, after_sign, kind);
      }
    }
    tokens_.push_back({TokenType::End, "", line_of(source_.size()), 1});
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = source_.find('{', from); i != std::string::npos && i + 1 < source_.size();
         i = source_.find('{', i + 1)) {
      const char next = source_[i + 1];
      if (next == '{' || next == '%' || next == '#') return i;
    }
    return std::string::npos;
  }

  // `-` strips all whitespace before the tag; otherwise lstrip_blocks drops the spaces and tabs that
  // begin the tag's line (for block and comment tags, unless `+` asks to keep them).
  void strip_before_tag(std::string& text, char sign, bool is_block_or_comment) const {
    if (sign == '-') {
      while (!text.empty() && is_python_space(text.back())) text.pop_back();
    } else if (sign != '+' && is_block_or_comment) {
      const size_t newline = text.rfind('\n');
      const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
      if ((line_start > 0 || line_starting_) && text.find_first_not_of(" \t", line_start) == std::string::npos) {
        text.resize(line_start);
      }
    }
  }

  // After a tag's closing: `-` eats all following whitespace, `+` keeps it, else trim_blocks drops one
  // newline (block and comment tags only).
  void finish_tag(size_t pos, char sign, bool trims_newline) {
    if (sign == '-') {
      while (pos < source_.size() && is_python_space(source_[pos])) ++pos;
    } else if (sign != '+' && trims_newline && pos < source_.size() && source_[pos] == '\n') {
      ++pos;
    }
    line_starting_ = pos > 0 && source_[pos - 1] == '\n';
    pos_ = pos;
  }

  void lex_comment(size_t tag, size_t body) {
    const size_t close = source_.find("#}", body);
    if (close == std::string::npos) fail(tag, "unclosed comment, missing '#}'");
    const char sign = close > body && (source_[close - 1] == '-' || source_[close - 1] == '+') ? source_[close - 1] : 0;
    finish_tag(close + 2, sign, true);
  }

  size_t skip_spaces(size_t pos) const {
    while (pos < source_.size() && is_python_space(source_[pos])) ++pos;
    return pos;
  }

  // Where the body starts if a `{% raw %}` tag begins here (the tag's newline is not trimmed).
  size_t raw_begin_end(size_t after_sign) const {
    size_t pos = skip_spaces(after_sign);
    if (source_.compare(pos, 3, "raw") != 0) return std::string::npos;
    pos = skip_spaces(pos + 3);
    if (source_.compare(pos, 3, "-%}") == 0) return skip_spaces(pos + 3);
    if (source_.compare(pos, 2, "%}") == 0) return pos + 2;
    return std::string::npos;
  }

  void lex_raw(size_t tag, size_t body) {
    line_starting_ = false;
    for (size_t end = source_.find("{%", body); end != std::string::npos; end = source_.find("{%", end + 1)) {
      const char sign =
          end + 2 < source_.size() && (source_[end + 2] == '-' || source_[end + 2] == '+') ? source_[end + 2] : 0;
      size_t pos = skip_spaces(end + 2 + (sign ? 1 : 0));
      if (source_.compare(pos, 6, "endraw") != 0) continue;
      pos = skip_spaces(pos + 6);
      const char close_sign = source_[pos] == '-' || source_[pos] == '+' ? source_[pos] : 0;
      if (source_.compare(pos + (close_sign ? 1 : 0), 2, "%}") != 0) continue;
      std::string text = source_.substr(body, end - body);
      strip_before_tag(text, sign, true);
      if (!text.empty()) emit(TokenType::Data, std::move(text), body);
      finish_tag(pos + (close_sign ? 3 : 2), close_sign, true);
      return;
    }
    fail(tag, "missing '{% endraw %}'");
  }

  void lex_tag(size_t tag, size_t pos, char kind) {
    const bool is_block = kind == '%';
    emit(is_block ? TokenType::BlockBegin : TokenType::VariableBegin, "", tag);
    int bracket_depth = 0;  // Jinja2 only ends a tag where brackets are balanced
    while (true) {
      pos = skip_spaces(pos);
      if (pos >= source_.size())
        fail(tag, std::string("unexpected end of template, missing '") + (is_block ? "%}" : "}}") + "'");
      if (bracket_depth == 0) {
        const char* close = is_block ? "%}" : "}}";
        const char sign = source_[pos] == '-' || (is_block && source_[pos] == '+') ? source_[pos] : 0;
        if (source_.compare(pos + (sign ? 1 : 0), 2, close) == 0) {
          emit(is_block ? TokenType::BlockEnd : TokenType::VariableEnd, "", pos);
          finish_tag(pos + (sign ? 3 : 2), sign, is_block);
          return;
        }
      }
      const char c = source_[pos];
      if (is_name_start(c)) {
        const size_t start = pos;
        while (pos < source_.size() && is_name_char(source_[pos])) ++pos;
        emit(TokenType::Name, source_.substr(start, pos - start), start);
      } else if (is_digit(c)) {
        pos = lex_number(pos);
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        pos = lex_operator(pos, bracket_depth);
      }
    }
  }

  size_t lex_number(size_t start) {
    size_t pos = start;
    auto digits = [&](auto accept) {
      const size_t from = pos;
      while (pos < source_.size() && (accept(source_[pos]) || (source_[pos] == '_' && pos > from))) ++pos;
      return pos > from;
    };
    const char prefix =
        pos + 1 < source_.size() && source_[pos] == '0' ? static_cast<char>(std::tolower(source_[pos + 1])) : 0;
    if (prefix == 'x' || prefix == 'o' || prefix == 'b') {
      pos += 2;
      const int base = prefix == 'x' ? 16 : (prefix == 'o' ? 8 : 2);
      digits([&](char c) {
        const int value =
            is_digit(c) ? c - '0' : (std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10 : base);
        return value < base;
      });
      std::string text = source_.substr(start + 2, pos - start - 2);
      std::erase(text, '_');
      emit(TokenType::Integer, std::to_string(checked_integer(text, base, start)), start);
      return pos;
    }
    digits(is_digit);
    bool is_float = false;
    // A float needs digits after the point, and never follows a `.` (so `a.0.1` stays two lookups).
    const bool after_dot = start > 0 && source_[start - 1] == '.';
    if (!after_dot && pos + 1 < source_.size() && source_[pos] == '.' && is_digit(source_[pos + 1])) {
      ++pos;
      digits(is_digit);
      is_float = true;
    }
    if (!after_dot && pos < source_.size() && (source_[pos] == 'e' || source_[pos] == 'E')) {
      size_t exponent = pos + 1;
      if (exponent < source_.size() && (source_[exponent] == '+' || source_[exponent] == '-')) ++exponent;
      if (exponent < source_.size() && is_digit(source_[exponent])) {
        pos = exponent;
        digits(is_digit);
        is_float = true;
      }
    }
    std::string text = source_.substr(start, pos - start);
    std::erase(text, '_');
    if (!is_float) checked_integer(text, 10, start);
    emit(is_float ? TokenType::Float : TokenType::Integer, std::move(text), start);
    return pos;
  }

  // The value of integer digits in base; integers are 64-bit here (Python's are unbounded).
  int64_t checked_integer(const std::string& digits, int base, size_t start) {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || error == std::errc::invalid_argument || end != digits.data() + digits.size()) {
      fail(start, "invalid integer literal");
    }
    if (error == std::errc::result_out_of_range) fail(start, "integer literal out of the 64-bit range");
    return value;
  }

  // Python's string escapes (Jinja2 decodes literals with "unicode-escape").
  size_t lex_string(size_t start) {
    const char quote = source_[start];
    std::string value;
    size_t pos = start + 1;
    while (true) {
      if (pos >= source_.size()) fail(start, "unterminated string");
      const char c = source_[pos++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos >= source_.size()) fail(start, "unterminated string");
      const char e = source_[pos++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t width = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (pos + width > source_.size() ||
              !std::all_of(source_.begin() + static_cast<std::ptrdiff_t>(pos),
                           source_.begin() + static_cast<std::ptrdiff_t>(pos + width),
                           [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
            fail(start, std::string("truncated \\") + e + " escape in string");
          }
          const auto code = static_cast<char32_t>(std::stoul(source_.substr(pos, width), nullptr, 16));
          if (code > 0x10FFFF) fail(start, "\\U escape past U+10FFFF in string");
          append_utf8(value, code);
          pos += width;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned code = static_cast<unsigned>(e - '0');
            for (int i = 0; i < 2 && pos < source_.size() && source_[pos] >= '0' && source_[pos] <= '7'; ++i) {
              code = code * 8 + static_cast<unsigned>(source_[pos++] - '0');
            }
            append_utf8(value, code);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    emit(TokenType::String, std::move(value), start);
    return pos;
  }

  size_t lex_operator(size_t pos, int& bracket_depth) {
    static constexpr const char* two_char[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two_char) {
      if (source_.compare(pos, 2, op) == 0) {
        emit(TokenType::Operator, op, pos);
        return pos + 2;
      }
    }
    const char c = source_[pos];
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c)) fail(pos, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++bracket_depth;
    if (c == ')' || c == ']' || c == '}') {
      if (bracket_depth == 0) fail(pos, std::string("unexpected '") + c + "'");
      --bracket_depth;
    }
    emit(TokenType::Operator, std::string(1, c), pos);
    return pos + 1;
  }

  int line_of(size_t offset) const {
    return static_cast<int>(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin());
  }

  void emit(TokenType type, std::string text, size_t offset) {
    const int line = line_of(offset);
    tokens_.push_back(
        {type, std::move(text), line, static_cast<int>(offset - line_starts_[static_cast<size_t>(line - 1)]) + 1});
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    const int line = line_of(offset);
    const size_t column = offset - line_starts_[static_cast<size_t>(line - 1)] + 1;
    throw Error("template line " + std::to_string(line) + ": " + message + " (column " + std::to_string(column) + ")");
  }

  std::string source_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the last tag consumed ended a line (lstrip_blocks applies to empty text)
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace strata::jinja
