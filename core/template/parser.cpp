#include "core/template/parser.hpp"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "core/template/filters.hpp"
#include "core/template/limits.hpp"
#include "core/template/predicates.hpp"
#include "core/util/error.hpp"

namespace strata::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_template() {
    Body body = parse_body({});
    return body;
  }

 private:
  // Statements until a block tag named in `terminators`; returns with that tag's name as the current token.
  Body parse_body(std::initializer_list<std::string_view> terminators) {
    const auto level = nested(current());
    Body body;
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::End) {
        if (terminators.size() == 0) return body;
        std::string expected;
        for (const auto name : terminators) expected += (expected.empty() ? "'" : " or '") + std::string(name) + "'";
        fail(token, "unexpected end of template, expected " + expected);
      }
      if (token.type == TokenType::Data) {
        auto node = make_node(Node::Kind::Text, token.line);
        node->text = token.text;
        body.push_back(std::move(node));
        advance();
      } else if (token.type == TokenType::VariableBegin) {
        advance();
        auto node = make_node(Node::Kind::Output, token.line);
        node->expr = parse_tuple(true, false);
        expect(TokenType::VariableEnd, "'}}'");
        body.push_back(std::move(node));
      } else if (token.type == TokenType::BlockBegin) {
        advance();
        const Token& name = current();
        if (name.type != TokenType::Name) fail(name, "expected a tag name");
        if (std::find(terminators.begin(), terminators.end(), name.text) != terminators.end()) return body;
        body.push_back(parse_statement());
      } else {
        fail(token, "unexpected token '" + token.text + "'");
      }
    }
  }

  std::unique_ptr<Node> parse_statement() {
    const Token& tag = current();
    const std::string name = tag.text;
    advance();
    if (name == "if") return parse_if(tag.line);
    if (name == "for") return parse_for(tag.line);
    if (name == "set") return parse_set(tag.line);
    if (name == "macro") return parse_macro(tag.line);
    if (name == "call") return parse_call_block(tag.line);
    if (name == "filter") return parse_filter_block(tag.line);
    if (name == "with") return parse_with(tag.line);
    if (name == "generation") {  // Hugging Face's AssistantTracker marks assistant text; it renders its body
      auto node = make_node(Node::Kind::Scope, tag.line);
      end_tag();
      node->body = parse_closing_body("endgeneration");
      return node;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(tag, "'" + name + "' outside of a loop");
      end_tag();
      return make_node(name == "break" ? Node::Kind::Break : Node::Kind::Continue, tag.line);
    }
    fail(tag, "unknown tag '" + name + "'");
  }

  std::unique_ptr<Node> parse_if(int line) {
    auto node = make_node(Node::Kind::If, line);
    auto condition = parse_tuple(true, false);
    end_tag();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      node->branches.emplace_back(std::move(condition), std::move(body));
      const std::string keyword = current().text;
      advance();
      if (keyword == "elif") {
        condition = parse_tuple(true, false);
        end_tag();
        continue;
      }
      end_tag();
      if (keyword == "else") node->else_body = parse_closing_body("endif");
      return node;
    }
  }

  std::unique_ptr<Node> parse_for(int line) {
    auto node = make_node(Node::Kind::For, line);
    node->target = parse_assign_target(false);
    expect_name("in");
    node->expr = parse_tuple(false, false);
    if (current_is_name("if")) {
      advance();
      node->condition = parse_expression();
    }
    if (current_is_name("recursive")) fail(current(), "recursive loops are not supported");
    end_tag();
    ++loop_depth_;
    node->body = parse_body({"endfor", "else"});
    --loop_depth_;
    const bool has_else = current().text == "else";
    advance();
    end_tag();
    if (has_else) node->else_body = parse_closing_body("endfor");
    return node;
  }

  std::unique_ptr<Node> parse_set(int line) {
    AssignTarget target = parse_assign_target(true);
    if (current_is_op("=")) {
      advance();
      auto node = make_node(Node::Kind::Set, line);
      node->target = std::move(target);
      node->expr = parse_tuple(true, false);
      end_tag();
      return node;
    }
    auto node = make_node(Node::Kind::SetBlock, line);
    node->target = std::move(target);
    while (current_is_op("|")) {
      advance();
      node->filters.push_back(parse_filter_call());
    }
    end_tag();
    node->body = parse_closing_body("endset");
    return node;
  }

  std::unique_ptr<Node> parse_macro(int line) {
    auto node = make_node(Node::Kind::Macro, line);
    node->name = expect_name_token().text;
    node->parameters = parse_parameters();
    end_tag();
    node->body = parse_closing_body("endmacro");
    return node;
  }

  std::unique_ptr<Node> parse_call_block(int line) {
    auto node = make_node(Node::Kind::CallBlock, line);
    if (current_is_op("(")) node->parameters = parse_parameters();
    node->expr = parse_expression();
    if (node->expr->kind != Expr::Kind::Call) fail(current(), "expected a call after 'call'");
    end_tag();
    node->body = parse_closing_body("endcall");
    return node;
  }

  std::unique_ptr<Node> parse_filter_block(int line) {
    auto node = make_node(Node::Kind::FilterBlock, line);
    node->filters.push_back(parse_filter_call());
    while (current_is_op("|")) {
      advance();
      node->filters.push_back(parse_filter_call());
    }
    end_tag();
    node->body = parse_closing_body("endfilter");
    return node;
  }

  std::unique_ptr<Node> parse_with(int line) {
    auto node = make_node(Node::Kind::Scope, line);
    while (current().type != TokenType::BlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      std::string name = expect_name_token().text;
      expect_op("=");
      node->assignments.emplace_back(std::move(name), parse_expression());
    }
    end_tag();
    node->body = parse_closing_body("endwith");
    return node;
  }

  Body parse_closing_body(std::string_view closing) {
    Body body = parse_body({closing});
    advance();
    end_tag();
    return body;
  }

  std::vector<Parameter> parse_parameters() {
    std::vector<Parameter> parameters;
    expect_op("(");
    while (!current_is_op(")")) {
      if (!parameters.empty()) expect_op(",");
      Parameter parameter{expect_name_token().text, nullptr};
      if (current_is_op("=")) {
        advance();
        parameter.default_value = parse_expression();
      }
      parameters.push_back(std::move(parameter));
    }
    advance();
    return parameters;
  }

  AssignTarget parse_assign_target(bool allow_namespace) {
    AssignTarget target;
    target.names.push_back(expect_name_token().text);
    if (allow_namespace && current_is_op(".")) {
      advance();
      target.namespace_attribute = expect_name_token().text;
      return target;
    }
    while (current_is_op(",")) {
      advance();
      target.unpack = true;
      if (current().type != TokenType::Name || current().text == "in") break;  // trailing comma
      target.names.push_back(expect_name_token().text);
    }
    return target;
  }

  // Expressions, loosest binding first.

  ExprPtr parse_expression(bool with_conditional = true) { return with_conditional ? parse_conditional() : parse_or(); }

  // Comma-separated expressions make a tuple (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_conditional, bool explicit_parentheses) {
    const int line = current().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end()) break;
      items.push_back(parse_expression(with_conditional));
      if (current_is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return items[0];
      if (!explicit_parentheses) fail(current(), "expected an expression");
    }
    return make_expr(Expr::Kind::Tuple, line, std::move(items));
  }

  bool is_tuple_end() const {
    const Token& token = current();
    return token.type == TokenType::VariableEnd || token.type == TokenType::BlockEnd || current_is_op(")");
  }

  ExprPtr parse_conditional() {
    const auto level = nested(current());  // `a if b else c if d else ...` recurses here
    ExprPtr value = parse_or();
    while (current_is_name("if")) {
      const int line = current().line;
      advance();
      ExprPtr condition = parse_or();
      ExprPtr otherwise;
      if (current_is_name("else")) {
        advance();
        otherwise = parse_conditional();
      }
      value = make_expr(Expr::Kind::Conditional, line, {value, condition, otherwise});
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (current_is_name("or")) {
      const int line = current().line;
      advance();
      left = make_expr(Expr::Kind::Binary, line, {left, parse_and()}, "or");
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (current_is_name("and")) {
      const int line = current().line;
      advance();
      left = make_expr(Expr::Kind::Binary, line, {left, parse_not()}, "and");
    }
    return left;
  }

  ExprPtr parse_not() {
    const auto level = nested(current());
    if (current_is_name("not")) {
      const int line = current().line;
      advance();
      return make_expr(Expr::Kind::Unary, line, {parse_not()}, "not");
    }
    return parse_compare();
  }

  // Chained comparisons (a < b < c) become (a < b) and (b < c), as in Python.
  ExprPtr parse_compare() {
    ExprPtr left = parse_math1();
    ExprPtr result;
    while (true) {
      const int line = current().line;
      std::string op;
      if (current().type == TokenType::Operator && is_comparison(current().text)) {
        op = current().text;
        advance();
      } else if (current_is_name("in")) {
        op = "in";
        advance();
      } else if (current_is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        op = "not in";
        advance();
        advance();
      } else {
        break;
      }
      ExprPtr right = parse_math1();
      ExprPtr comparison = make_expr(Expr::Kind::Binary, line, {left, right}, op);
      result = result ? make_expr(Expr::Kind::Binary, line, {result, comparison}, "and") : comparison;
      left = right;
    }
    return result ? result : left;
  }

  static bool is_comparison(const std::string& op) {
    return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
  }

  ExprPtr parse_binary_level(std::initializer_list<std::string_view> operators, ExprPtr (Parser::*next)()) {
    ExprPtr left = (this->*next)();
    while (current().type == TokenType::Operator &&
           std::find(operators.begin(), operators.end(), current().text) != operators.end()) {
      const Token op = current();
      advance();
      left = make_expr(Expr::Kind::Binary, op.line, {left, (this->*next)()}, op.text);
    }
    return left;
  }

  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_filtered_unary); }
  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  // As in Jinja2, `-x|f` is f(-x) and `x is t` binds tighter than any operator.
  ExprPtr parse_unary(bool with_filter) {
    const Token& token = current();
    const auto level = nested(token);
    ExprPtr node;
    if (current_is_op("-") || current_is_op("+")) {
      advance();
      node = make_expr(Expr::Kind::Unary, token.line, {parse_unary(false)}, token.text);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(node);
    if (with_filter) node = parse_filters_and_tests(node);
    return node;
  }

  ExprPtr parse_primary() {
    const Token token = current();
    if (token.type == TokenType::Name) {
      advance();
      if (token.text == "true" || token.text == "True") return make_literal(true, token.line);
      if (token.text == "false" || token.text == "False") return make_literal(false, token.line);
      if (token.text == "none" || token.text == "None") return make_literal(nullptr, token.line);
      return make_expr(Expr::Kind::Variable, token.line, {}, token.text);
    }
    if (token.type == TokenType::String) {
      std::string text;
      while (current().type == TokenType::String) {  // adjacent literals concatenate
        text += current().text;
        advance();
      }
      return make_literal(std::move(text), token.line);
    }
    if (token.type == TokenType::Integer) {
      advance();
      try {
        return make_literal(static_cast<int64_t>(std::stoll(token.text)), token.line);
      } catch (const std::out_of_range&) {
        fail(token, "integer " + token.text + " is too large");
      }
    }
    if (token.type == TokenType::Float) {
      advance();
      return make_literal(std::strtod(token.text.c_str(), nullptr), token.line);  // inf past the range, as Python
    }
    if (current_is_op("(")) {
      advance();
      ExprPtr inner = parse_tuple(true, true);
      expect_op(")");
      return inner;
    }
    if (current_is_op("[")) return parse_sequence("[", "]", Expr::Kind::List);
    if (current_is_op("{")) return parse_sequence("{", "}", Expr::Kind::Dict);
    fail(token, token.type == TokenType::End ? "unexpected end of template" : "unexpected '" + token.text + "'");
  }

  // A list literal, or a dict literal (key: value pairs stored flat).
  ExprPtr parse_sequence(std::string_view open, std::string_view close, Expr::Kind kind) {
    const int line = current().line;
    expect_op(open);
    std::vector<ExprPtr> operands;
    while (!current_is_op(close)) {
      if (!operands.empty()) {
        expect_op(",");
        if (current_is_op(close)) break;
      }
      operands.push_back(parse_expression());
      if (kind == Expr::Kind::Dict) {
        expect_op(":");
        operands.push_back(parse_expression());
      }
    }
    advance();
    return make_expr(kind, line, std::move(operands));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const Token& token = current();
      if (current_is_op(".")) {
        advance();
        const Token attribute = current();
        advance();
        if (attribute.type == TokenType::Name) {
          auto lookup = make_expr(Expr::Kind::Attribute, token.line, {node}, attribute.text);
          lookup->value = Value(attribute.text);  // made once here, not at every lookup
          node = lookup;
        } else if (attribute.type == TokenType::Integer) {
          node = make_expr(Expr::Kind::Subscript, token.line,
                           {node, make_literal(static_cast<int64_t>(std::stoll(attribute.text)), token.line)});
        } else {
          fail(attribute, "expected an attribute name after '.'");
        }
      } else if (current_is_op("[")) {
        advance();
        std::vector<ExprPtr> keys;
        while (!current_is_op("]")) {
          if (!keys.empty()) expect_op(",");
          keys.push_back(parse_subscribed());
        }
        advance();
        if (keys.empty()) fail(token, "expected a subscript");
        ExprPtr key = keys.size() == 1 ? keys[0] : make_expr(Expr::Kind::Tuple, token.line, std::move(keys));
        node = make_expr(Expr::Kind::Subscript, token.line, {node, key});
      } else if (current_is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscribed() {
    const int line = current().line;
    std::vector<ExprPtr> parts;
    if (current_is_op(":")) {
      parts.push_back(nullptr);
    } else {
      ExprPtr start = parse_expression();
      if (!current_is_op(":")) return start;
      parts.push_back(start);
    }
    advance();  // the first ':'
    parts.push_back(current_is_op("]") || current_is_op(",") || current_is_op(":") ? nullptr : parse_expression());
    if (current_is_op(":")) {
      advance();
      parts.push_back(current_is_op("]") || current_is_op(",") ? nullptr : parse_expression());
    } else {
      parts.push_back(nullptr);
    }
    return make_expr(Expr::Kind::Slice, line, std::move(parts));
  }

  ExprPtr parse_call(ExprPtr callee) {
    const int line = current().line;
    Arguments arguments = parse_arguments();
    return make_expr(Expr::Kind::Call, line, {std::move(callee)}, {}, std::move(arguments));
  }

  Arguments parse_arguments() {
    Arguments arguments;
    expect_op("(");
    bool first = true;
    while (!current_is_op(")")) {
      if (!first) {
        expect_op(",");
        if (current_is_op(")")) break;
      }
      first = false;
      if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
        std::string name = current().text;
        advance();
        advance();
        arguments.keyword.emplace_back(std::move(name), parse_expression());
      } else {
        if (!arguments.keyword.empty()) fail(current(), "positional argument follows keyword argument");
        arguments.positional.push_back(parse_expression());
      }
    }
    advance();
    return arguments;
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (current_is_op("|")) {
        advance();
        FilterCall filter = parse_filter_call();
        node = make_expr(Expr::Kind::Filter, filter.line, {node}, filter.name, std::move(filter.arguments));
      } else if (current_is_name("is")) {
        node = parse_test(node);
      } else if (current_is_op("(")) {
        node = parse_call(node);
      } else {
        return node;
      }
    }
  }

  FilterCall parse_filter_call() {
    const Token& token = current();
    FilterCall filter{dotted_name(), {}, token.line};
    if (!has_filter(filter.name)) fail(token, "unknown filter '" + filter.name + "'");
    if (current_is_op("(")) filter.arguments = parse_arguments();
    return filter;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = current().line;
    advance();  // 'is'
    const bool negated = current_is_name("not");
    if (negated) advance();
    const Token& token = current();
    const std::string name = dotted_name();
    if (!has_test(name)) fail(token, "unknown test '" + name + "'");
    Arguments arguments;
    if (current_is_op("(")) {
      arguments = parse_arguments();
    } else if (starts_bare_test_argument()) {  // `is divisibleby 3`, `is equalto 'x'`
      arguments.positional.push_back(parse_postfix(parse_primary()));
    }
    ExprPtr test = make_expr(Expr::Kind::Test, line, {node}, name, std::move(arguments));
    return negated ? make_expr(Expr::Kind::Unary, line, {test}, "not") : test;
  }

  bool starts_bare_test_argument() const {
    const Token& token = current();
    if (token.type == TokenType::Name)
      return token.text != "else" && token.text != "or" && token.text != "and" && token.text != "is";
    return token.type == TokenType::String || token.type == TokenType::Integer || token.type == TokenType::Float ||
           current_is_op("[") || current_is_op("{");
  }

  std::string dotted_name() {
    std::string name = expect_name_token().text;
    while (current_is_op(".")) {
      advance();
      name += "." + expect_name_token().text;
    }
    return name;
  }

  // Tokens.

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool current_is_op(std::string_view op) const {
    return current().type == TokenType::Operator && current().text == op;
  }
  bool current_is_name(std::string_view name) const {
    return current().type == TokenType::Name && current().text == name;
  }

  void expect(TokenType type, const std::string& what) {
    if (current().type != type) fail(current(), "expected " + what + describe_found());
    advance();
  }
  void expect_op(std::string_view op) {
    if (!current_is_op(op)) fail(current(), "expected '" + std::string(op) + "'" + describe_found());
    advance();
  }
  void expect_name(std::string_view name) {
    if (!current_is_name(name)) fail(current(), "expected '" + std::string(name) + "'" + describe_found());
    advance();
  }
  const Token& expect_name_token() {
    if (current().type != TokenType::Name) fail(current(), "expected a name" + describe_found());
    const Token& token = current();
    advance();
    return token;
  }
  void end_tag() { expect(TokenType::BlockEnd, "end of tag '%}'"); }

  std::string describe_found() const {
    switch (current().type) {
      case TokenType::End:
        return ", found end of template";
      case TokenType::BlockEnd:
        return ", found '%}'";
      case TokenType::VariableEnd:
        return ", found '}}'";
      case TokenType::Data:
        return ", found text";
      default:
        return ", found '" + current().text + "'";
    }
  }

  // Every expression node is made here, and the depth of the tree bounded: a chain built by a loop of the
  // parser (`x|f|f|f...`, `a + b + c...`, `a.b.c...`) nests without the parser recursing, and evaluating and
  // freeing the tree recurse as deep as it goes.
  std::shared_ptr<Expr> make_expr(Expr::Kind kind, int line, std::vector<ExprPtr> operands = {}, std::string name = {},
                                  Arguments arguments = {}) {
    auto expr = std::make_shared<Expr>();
    expr->kind = kind;
    expr->line = line;
    expr->operands = std::move(operands);
    expr->name = std::move(name);
    expr->arguments = std::move(arguments);
    int below = 0;
    for (const auto& operand : expr->operands) below = std::max(below, operand ? operand->depth : 0);
    for (const auto& argument : expr->arguments.positional) below = std::max(below, argument->depth);
    for (const auto& [keyword, argument] : expr->arguments.keyword) below = std::max(below, argument->depth);
    expr->depth = below + 1;
    if (expr->depth > kMaxNesting) {
      fail(current(), "expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    return expr;
  }

  static ExprPtr make_literal(Value value, int line) {
    auto expr = std::make_shared<Expr>();
    expr->kind = Expr::Kind::Literal;
    expr->line = line;
    expr->value = std::move(value);
    return expr;
  }

  static std::unique_ptr<Node> make_node(Node::Kind kind, int line) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->line = line;
    return node;
  }

  // One level of nesting (a block body, an operand) for the caller's scope; too deep fails at token.
  NestingLevel nested(const Token& token) {
    try {
      return NestingLevel(nesting_);
    } catch (const RenderFailure& failure) {
      fail(token, failure.what());
    }
  }

  [[noreturn]] static void fail(const Token& token, const std::string& message) {
    throw Error("template line " + std::to_string(token.line) + ": " + message + " (column " +
                std::to_string(token.column) + ")");
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace strata::jinja
