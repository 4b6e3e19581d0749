// The parsed template: expressions and statements, each remembering its source line for errors.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/template/value.hpp"

namespace strata::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  enum class Kind {
    Literal,      // value
    Variable,     // name
    List,         // operands: the items
    Tuple,        // operands: the items
    Dict,         // operands: key, value, key, value, ...
    Attribute,    // operands[0] . name (also in value, as a string)
    Subscript,    // operands[0] [ operands[1] ]
    Slice,        // operands: start, stop, step (each may be null); only inside a subscript
    Call,         // operands[0] ( arguments )
    Filter,       // operands[0] | name ( arguments )
    Test,         // operands[0] is name ( arguments )
    Unary,        // name ("-", "+" or "not") operands[0]
    Binary,       // operands[0] name operands[1]; name is an operator, "and", "or", "in" or "not in"
    Conditional,  // operands: value, condition, otherwise (null when there is no else)
  };

  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> operands;
  Arguments arguments;
  int depth = 1;  // levels of the tree from here down (operands and arguments), at most kMaxNesting
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

// What a `set` or `for` assigns to: one name, several names (tuple unpacking), or `namespace.attribute`.
struct AssignTarget {
  std::vector<std::string> names;
  bool unpack = false;
  std::string namespace_attribute;  // with names[0] the namespace variable
};

struct Parameter {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct FilterCall {
  std::string name;
  Arguments arguments;
  int line = 0;
};

struct Node {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (condition, body), else_body
    For,          // for target in expr [if condition]: body, else_body
    Set,          // set target = expr
    SetBlock,     // set target [| filters]: body
    Macro,        // macro name(parameters): body
    CallBlock,    // call(parameters) expr: body, exposed to the macro as caller()
    FilterBlock,  // filter filters: body
    Scope,        // with assignments: body (also Hugging Face's generation block)
    Break,
    Continue,
  };

  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr condition;
  AssignTarget target;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<Parameter> parameters;
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  std::vector<FilterCall> filters;
  Body body;
  Body else_body;
};

}  // namespace strata::jinja
