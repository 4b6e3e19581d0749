// Builds the syntax tree from tokens with Jinja2's grammar and operator precedence. Unknown filters,
// tests and tags are syntax errors here, as they are when Jinja2 compiles a template.
#pragma once

#include <vector>

#include "core/template/ast.hpp"
#include "core/template/lexer.hpp"

namespace strata::jinja {

// Throws strata::Error "template line N: ..." on malformed templates.
Body parse(std::vector<Token> tokens);

}  // namespace strata::jinja
