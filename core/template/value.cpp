#include "core/template/value.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/template/failure.hpp"

namespace strata::jinja {

Value Value::list(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  return Value(Storage(std::move(data)));
}

Value Value::tuple(std::vector<Value> items) {
  Value value = list(std::move(items));
  value.list_data().is_tuple = true;
  return value;
}

Value Value::dict() { return Value(Storage(std::make_shared<DictData>())); }

Value Value::namespace_object() {
  Value value = dict();
  value.dict_data().is_namespace = true;
  return value;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> call) {
  return Value(Storage(std::make_shared<Function>(Function{std::move(name), std::move(call)})));
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null: return nullptr;
    case nlohmann::json::value_t::boolean: return json.get<bool>();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return json.get<int64_t>();
    case nlohmann::json::value_t::number_float: return json.get<double>();
    case nlohmann::json::value_t::string: return json.get<std::string>();
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& item : json) items.push_back(from_json(item));
      return list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value object = dict();
      for (const auto& [key, item] : json.items()) object.dict_data().set(Value(key), from_json(item));
      return object;
    }
    default: return Value::undefined("unsupported JSON value");
  }
}

bool Value::is_tuple() const { return is_list_or_tuple() && list_data().is_tuple; }
bool Value::is_mapping() const { return is_dict_or_namespace() && !dict_data().is_namespace; }

const void* Value::identity() const {
  if (is_list_or_tuple()) return &list_data();
  if (is_dict_or_namespace()) return &dict_data();
  if (is_callable()) return &function();
  return nullptr;
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_double() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list_or_tuple()) return !list_data().items.empty();
  if (is_mapping()) return !dict_data().entries.empty();
  return true;  // namespaces and callables
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_tuple()) return "tuple";
  if (is_list_or_tuple()) return "list";
  if (is_mapping()) return "dict";
  if (is_namespace()) return "Namespace";
  return "function";
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, laid out as Python's repr: positional for exponents -4..15.
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific).ptr;
  std::string text(buffer, end);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  const int exponent = std::stoi(text.substr(e + 1));
  std::string digits = text.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the decimal point
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else {
      const size_t integer_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= integer_digits) {
        out += digits + std::string(integer_digits - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exponent_text[16];
  std::snprintf(exponent_text, sizeof exponent_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exponent_text;
}

std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return repr();
}

std::string Value::repr() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return python_float_repr(as_double());
  if (is_string()) return python_string_repr(as_string());
  if (is_list_or_tuple()) {
    const auto& data = list_data();
    std::string out = data.is_tuple ? "(" : "[";
    for (size_t i = 0; i < data.items.size(); ++i) out += (i ? ", " : "") + data.items[i].repr();
    if (data.is_tuple && data.items.size() == 1) out += ",";
    return out + (data.is_tuple ? ")" : "]");
  }
  if (is_dict_or_namespace()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : dict_data().entries) {
      out += (first ? "" : ", ") + key.repr() + ": " + value.repr();
      first = false;
    }
    out += "}";
    return is_namespace() ? "<Namespace " + out + ">" : out;
  }
  return "<function " + function().name + ">";
}

const Value* DictData::find(const Value& key) const {
  for (const auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

Value CallArgs::get(size_t index, std::string_view name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [key, value] : keyword) {
    if (key == name) return value;
  }
  return fallback;
}

bool CallArgs::has(size_t index, std::string_view name) const {
  if (index < positional.size()) return true;
  for (const auto& entry : keyword) {
    if (entry.first == name) return true;
  }
  return false;
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_list_or_tuple() && b.is_list_or_tuple()) {
    return a.is_tuple() == b.is_tuple() && a.list_data().items == b.list_data().items;
  }
  if (a.is_mapping() && b.is_mapping()) {
    const auto& left = a.dict_data().entries;
    const auto& right = b.dict_data();
    if (left.size() != right.entries.size()) return false;
    for (const auto& [key, value] : left) {
      const Value* other = right.find(key);
      if (!other || !(*other == value)) return false;
    }
    return true;
  }
  return a.identity() != nullptr && a.identity() == b.identity();
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order.
    const int order = a.as_string().compare(b.as_string());
    return order < 0 ? -1 : (order > 0 ? 1 : 0);
  }
  if (a.is_list_or_tuple() && b.is_list_or_tuple() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list_data().items;
    const auto& y = b.list_data().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!(x[i] == y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw RenderFailure("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace strata::jinja
