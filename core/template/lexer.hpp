// Splits template source into tokens the way Jinja2's lexer does under Hugging Face's settings:
// trim_blocks (one newline after a block or comment tag is dropped), lstrip_blocks (spaces and tabs
// before a block or comment tag that starts a line are dropped), `-` / `+` whitespace control on tags,
// raw blocks, comments, and keep_trailing_newline off.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja {

enum class TokenType {
  Data,
  VariableBegin,
  VariableEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Operator,
  End
};

struct Token {
  TokenType type;
  std::string text;  // data, name, decoded string, number digits or operator
  int line = 1;
  int column = 1;
};

// Throws strata::Error naming the line for malformed tags, strings or characters.
std::vector<Token> tokenize(std::string_view source);

}  // namespace strata::jinja
