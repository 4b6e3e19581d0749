#include "core/template/operations.hpp"

#include <cmath>
#include <limits>

#include "core/template/filters.hpp"
#include "core/template/limits.hpp"
#include "core/template/methods.hpp"
#include "core/template/unicode.hpp"

namespace strata::jinja {

[[noreturn]] void fail_overflow() { throw RenderFailure("integer overflow (integers are 64-bit here)"); }

namespace {

void require_defined(const Value& value) {
  if (value.is_undefined()) fail_undefined(value);
}

[[noreturn]] void fail_operands(std::string_view op, const Value& left, const Value& right) {
  if (op == "+" && left.is_string())
    throw RenderFailure("can only concatenate str (not \"" + right.type_name() + "\") to str");
  throw RenderFailure("unsupported operand type(s) for " + std::string(op) + ": '" + left.type_name() + "' and '" +
                      right.type_name() + "'");
}

// Python's sequence * n; n <= 0 gives an empty sequence.
Value repeat(const Value& sequence, int64_t times) {
  const auto unit =
      static_cast<int64_t>(sequence.is_string() ? sequence.as_string().size() : sequence.list_data().items.size());
  const auto size = static_cast<size_t>(repeated_size(unit, times));
  if (sequence.is_string()) {
    std::string out;
    out.reserve(size);
    for (int64_t i = 0; i < times && size > 0; ++i) out += sequence.as_string();
    return out;
  }
  charge_work(static_cast<int64_t>(size * sizeof(Value)));  // before copying the items
  std::vector<Value> items;
  items.reserve(size);
  for (int64_t i = 0; i < times && size > 0; ++i) {
    items.insert(items.end(), sequence.list_data().items.begin(), sequence.list_data().items.end());
  }
  return sequence.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

// Python's a // b for b != 0.
int64_t floor_divide(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) fail_overflow();
  const int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

int64_t checked_multiply(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) fail_overflow();
  return result;
}

}  // namespace

int64_t checked_integer(std::string_view op, int64_t left, int64_t right) {
  int64_t result = 0;
  if (op == "+" && !__builtin_add_overflow(left, right, &result)) return result;
  if (op == "-" && !__builtin_sub_overflow(left, right, &result)) return result;
  if (op == "*") return checked_multiply(left, right);
  if (op == "//") return floor_divide(left, right);
  if (op == "%") return right == -1 ? 0 : left - right * floor_divide(left, right);
  if (op == "**") {  // right >= 0: by squaring, so huge exponents of 0, 1 and -1 stay quick
    int64_t power = 1, base = left;
    for (int64_t exponent = right; exponent > 0; exponent >>= 1) {
      if (exponent & 1) power = checked_multiply(power, base);
      if (exponent > 1) base = checked_multiply(base, base);
    }
    return power;
  }
  fail_overflow();
}

int64_t checked_negate(int64_t value) {
  if (value == std::numeric_limits<int64_t>::min()) fail_overflow();
  return -value;
}

int64_t float_to_integer(double value) {
  if (std::isnan(value)) throw RenderFailure("cannot convert float NaN to integer");
  if (std::isinf(value)) throw RenderFailure("cannot convert float infinity to integer");
  // Doubles in [-2^63, 2^63) truncate into int64; the upper bound itself does not fit.
  if (!(value >= -9223372036854775808.0 && value < 9223372036854775808.0)) fail_overflow();
  return static_cast<int64_t>(value);
}

namespace {

Value arithmetic(std::string_view op, const Value& left, const Value& right) {
  const bool integral = !left.is_float() && !right.is_float();
  if (op == "+" || op == "-" || op == "*") {
    if (integral) return checked_integer(op, left.as_int(), right.as_int());
    const double a = left.as_double(), b = right.as_double();
    return op == "+" ? a + b : op == "-" ? a - b : a * b;
  }
  if (op == "**") {
    if (integral && right.as_int() >= 0) return checked_integer(op, left.as_int(), right.as_int());
    if (left.as_double() == 0.0 && right.as_double() < 0.0) {
      throw RenderFailure("0.0 cannot be raised to a negative power");
    }
    return std::pow(left.as_double(), right.as_double());
  }
  const bool divisor_zero = integral ? right.as_int() == 0 : right.as_double() == 0.0;
  if (divisor_zero) throw RenderFailure(op == "%" ? "integer modulo by zero" : "division by zero");
  if (op == "/") return left.as_double() / right.as_double();
  if (op == "//") {
    if (integral) return checked_integer(op, left.as_int(), right.as_int());
    return std::floor(left.as_double() / right.as_double());
  }
  // `%`: the result takes the divisor's sign, as in Python.
  if (integral) return checked_integer(op, left.as_int(), right.as_int());
  double remainder = std::fmod(left.as_double(), right.as_double());
  if (remainder != 0.0 && ((remainder < 0) != (right.as_double() < 0))) remainder += right.as_double();
  return remainder;
}

Value concatenate(const Value& left, const Value& right) {
  if (left.is_string() && right.is_string()) {
    check_result_size(static_cast<int64_t>(left.as_string().size() + right.as_string().size()));
    return left.as_string() + right.as_string();
  }
  if (left.is_list_or_tuple() && right.is_list_or_tuple() && left.is_tuple() == right.is_tuple()) {
    check_result_size(static_cast<int64_t>(left.list_data().items.size() + right.list_data().items.size()));
    std::vector<Value> items = left.list_data().items;
    items.insert(items.end(), right.list_data().items.begin(), right.list_data().items.end());
    return left.is_tuple() ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  fail_operands("+", left, right);
}

// Python's slice.indices: clamps the bounds to the sequence for the step's direction. The positions are
// counted first, so that a huge step cannot overflow.
std::vector<size_t> slice_positions(size_t size, const Value& start, const Value& stop, const Value& step) {
  const int64_t n = static_cast<int64_t>(size);
  auto integer = [](const Value& value) {
    if (!value.is_number() || value.is_float()) throw RenderFailure("slice indices must be integers or None");
    return value.as_int();
  };
  const int64_t stride = step.is_none() || step.is_undefined() ? 1 : integer(step);
  if (stride == 0) throw RenderFailure("slice step cannot be zero");
  const int64_t lower = stride > 0 ? 0 : -1;
  const int64_t upper = stride > 0 ? n : n - 1;
  auto bound = [&](const Value& value, int64_t fallback) {
    if (value.is_none() || value.is_undefined()) return fallback;
    int64_t index = integer(value);
    if (index < 0) index += n;
    return std::clamp(index, lower, upper);
  };
  const __int128 first = bound(start, stride > 0 ? lower : upper);
  const __int128 last = bound(stop, stride > 0 ? upper : lower);
  const __int128 span = stride > 0 ? last - first : first - last;
  const __int128 stride_size = stride > 0 ? __int128{stride} : -__int128{stride};
  const auto count = static_cast<int64_t>(span > 0 ? (span + stride_size - 1) / stride_size : 0);
  std::vector<size_t> positions(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    positions[static_cast<size_t>(k)] = static_cast<size_t>(first + __int128{k} * stride);
  }
  return positions;
}

}  // namespace

std::string object_description(const Value& object) {
  if (object.is_none()) return "None";
  return "'" + object.type_name() + " object'";
}

void fail_undefined(const Value& undefined) { throw RenderFailure(undefined.undefined_hint()); }

Value get_attribute(const Value& object, const Value& name) {
  require_defined(object);
  if (auto method = bound_method(object, name.as_string())) return *method;
  if (object.is_dict_or_namespace()) {
    if (const Value* found = object.dict_data().find(name)) return *found;
  }
  return Value::undefined(object_description(object) + " has no attribute '" + name.as_string() + "'");
}

Value get_item(const Value& object, const Value& key) {
  require_defined(object);
  if ((object.is_list_or_tuple() || object.is_string()) && key.is_number() && !key.is_float()) {
    const int64_t size = static_cast<int64_t>(length(object));
    int64_t index = key.as_int();
    if (index < 0) index += size;
    if (index >= 0 && index < size) {
      if (object.is_string()) return code_point_at(object.as_string(), static_cast<size_t>(index));
      return object.list_data().items[static_cast<size_t>(index)];
    }
  } else if (object.is_dict_or_namespace()) {
    if (const Value* found = object.dict_data().find(key)) return *found;
  }
  if (key.is_string()) {
    if (auto method = bound_method(object, key.as_string())) return *method;
    return Value::undefined(object_description(object) + " has no attribute '" + key.as_string() + "'");
  }
  return Value::undefined(object_description(object) + " has no element " + key.repr());
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  require_defined(object);
  if (object.is_string()) {
    const std::string& text = object.as_string();
    const auto offsets = code_point_offsets(text);  // where each character starts, and the end
    std::string out;
    for (const size_t i : slice_positions(offsets.size() - 1, start, stop, step)) {
      out.append(text, offsets[i], offsets[i + 1] - offsets[i]);
    }
    return out;
  }
  if (!object.is_list_or_tuple()) throw RenderFailure("'" + object.type_name() + "' object is not subscriptable");
  const auto& items = object.list_data().items;
  std::vector<Value> picked;
  for (const size_t i : slice_positions(items.size(), start, stop, step)) picked.push_back(items[i]);
  return object.is_tuple() ? Value::tuple(std::move(picked)) : Value::list(std::move(picked));
}

Value binary_operation(std::string_view op, const Value& left, const Value& right) {
  if (op == "==") return left == right;
  if (op == "!=") return !(left == right);
  if (op == "~") return concatenate(Value(left.str()), Value(right.str()));
  if (op == "in") return contains(right, left);
  if (op == "not in") return !contains(right, left);
  require_defined(left);
  require_defined(right);
  if (op == "<") return compare(left, right) < 0;
  if (op == "<=") return compare(left, right) <= 0;
  if (op == ">") return compare(left, right) > 0;
  if (op == ">=") return compare(left, right) >= 0;
  if (left.is_number() && right.is_number()) return arithmetic(op, left, right);
  if (op == "+") return concatenate(left, right);
  if (op == "%" && left.is_string()) {  // printf-style formatting, as the `format` filter does it
    CallArgs args;
    args.positional = right.is_tuple() ? right.list_data().items : std::vector<Value>{right};
    return apply_filter("format", left, args);
  }
  if (op == "*") {
    if ((left.is_string() || left.is_list_or_tuple()) && right.is_number() && !right.is_float())
      return repeat(left, right.as_int());
    if ((right.is_string() || right.is_list_or_tuple()) && left.is_number() && !left.is_float())
      return repeat(right, left.as_int());
  }
  fail_operands(op, left, right);
}

Value unary_operation(std::string_view op, const Value& operand) {
  require_defined(operand);
  if (!operand.is_number())
    throw RenderFailure("bad operand type for unary " + std::string(op) + ": '" + operand.type_name() + "'");
  if (op == "+") return operand.is_float() ? Value(operand.as_double()) : Value(operand.as_int());
  return operand.is_float() ? Value(-operand.as_double()) : Value(checked_negate(operand.as_int()));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string())
      throw RenderFailure("'in <string>' requires string as left operand, not " + item.type_name());
    return find_text(container.as_string(), item.as_string()) != std::string::npos;
  }
  if (container.is_list_or_tuple()) {
    for (const auto& element : container.list_data().items) {
      if (element == item) return true;
    }
    return false;
  }
  if (container.is_mapping()) return container.dict_data().find(item) != nullptr;
  throw RenderFailure("argument of type '" + container.type_name() + "' is not iterable");
}

std::vector<Value> iterate(const Value& iterable) {
  if (iterable.is_undefined()) return {};
  if (iterable.is_list_or_tuple()) {
    charge_work(static_cast<int64_t>(iterable.list_data().items.size() * sizeof(Value)));
    return iterable.list_data().items;
  }
  if (iterable.is_mapping()) {
    charge_work(static_cast<int64_t>(iterable.dict_data().entries.size() * sizeof(Value)));
    std::vector<Value> keys;
    for (const auto& entry : iterable.dict_data().entries) keys.push_back(entry.first);
    return keys;
  }
  if (iterable.is_string()) {
    std::vector<Value> characters;
    for (auto& character : split_code_points(iterable.as_string())) characters.emplace_back(std::move(character));
    return characters;
  }
  throw RenderFailure("'" + iterable.type_name() + "' object is not iterable");
}

size_t length(const Value& value) {
  if (value.is_undefined()) return 0;
  if (value.is_string()) {
    charge_work(static_cast<int64_t>(value.as_string().size()));
    return code_point_count(value.as_string());
  }
  if (value.is_list_or_tuple()) return value.list_data().items.size();
  if (value.is_mapping()) return value.dict_data().entries.size();
  throw RenderFailure("object of type '" + value.type_name() + "' has no len()");
}

}  // namespace strata::jinja
