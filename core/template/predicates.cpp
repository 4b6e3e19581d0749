#include "core/template/predicates.hpp"

#include <functional>
#include <map>

#include "core/template/filters.hpp"
#include "core/template/limits.hpp"
#include "core/template/methods.hpp"
#include "core/template/operations.hpp"

namespace strata::jinja {
namespace {

using Test = std::function<bool(const Value& value, const CallArgs& args)>;

Test comparison(std::string_view op) {
  return [op](const Value& value, const CallArgs& args) {
    return binary_operation(op, value, args.get(0, "other")).truthy();
  };
}

int64_t integer_of(const Value& value) {
  if (value.is_undefined()) fail_undefined(value);
  if (!value.is_number() || value.is_float()) throw RenderFailure("expected an integer, got " + value.type_name());
  return value.as_int();
}

const std::map<std::string, Test, std::less<>>& tests() {
  static const std::map<std::string, Test, std::less<>> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, const CallArgs&) { return v.is_float(); }},
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_mapping(); }},
      // Undefined is iterable (it iterates as empty); sequences have a length and items.
      {"iterable",
       [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list_or_tuple() || v.is_mapping();
       }},
      {"sequence",
       [](const Value& v, const CallArgs&) { return v.is_string() || v.is_list_or_tuple() || v.is_mapping(); }},
      // Undefined counts: Jinja2 gives it a __call__ (that raises).
      {"callable", [](const Value& v, const CallArgs&) { return v.is_callable() || v.is_undefined(); }},
      {"even", [](const Value& v, const CallArgs&) { return integer_of(v) % 2 == 0; }},
      {"odd", [](const Value& v, const CallArgs&) { return integer_of(v) % 2 != 0; }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const int64_t value = integer_of(v);
         const int64_t divisor = integer_of(a.get(0, "num"));
         if (divisor == 0) throw RenderFailure("integer modulo by zero");
         return divisor == -1 || value % divisor == 0;  // INT64_MIN % -1 would trap
       }},
      {"eq", comparison("==")},
      {"equalto", comparison("==")},
      {"==", comparison("==")},
      {"ne", comparison("!=")},
      {"!=", comparison("!=")},
      {"lt", comparison("<")},
      {"lessthan", comparison("<")},
      {"<", comparison("<")},
      {"le", comparison("<=")},
      {"<=", comparison("<=")},
      {"gt", comparison(">")},
      {"greaterthan", comparison(">")},
      {">", comparison(">")},
      {"ge", comparison(">=")},
      {">=", comparison(">=")},
      {"in", [](const Value& v, const CallArgs& a) { return contains(a.get(0, "seq"), v); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value other = a.get(0, "other");
         if (v.identity() || other.identity()) return v.identity() == other.identity();
         return v.type_name() == other.type_name() && v == other;
       }},
      {"lower", [](const Value& v, const CallArgs&) { return python_is_single_case(v.str(), false); }},
      {"upper", [](const Value& v, const CallArgs&) { return python_is_single_case(v.str(), true); }},
      {"escaped", [](const Value&, const CallArgs&) { return false; }},  // nothing is Markup without autoescape
      {"filter", [](const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.as_string()); }},
      {"test", [](const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); }},
  };
  return table;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) > 0; }

bool apply_test(std::string_view name, const Value& value, const CallArgs& args) {
  const auto found = tests().find(name);
  if (found == tests().end()) throw RenderFailure("unknown test '" + std::string(name) + "'");
  return found->second(value, args);
}

}  // namespace strata::jinja
