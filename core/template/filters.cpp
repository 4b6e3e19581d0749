#include "core/template/filters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "core/template/failure.hpp"
#include "core/template/json_writer.hpp"
#include "core/template/methods.hpp"
#include "core/template/operations.hpp"
#include "core/template/predicates.hpp"
#include "core/template/unicode.hpp"

namespace strata::jinja {
namespace {

using Filter = std::function<Value(const Value& input, const CallArgs& args)>;

// Jinja2's attribute paths for map/sort/selectattr...: "a.b" and "0" (an index) are item lookups.
Value lookup_path(const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(item, path);
  Value current = item;
  const std::string& text = path.as_string();
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool is_index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    current = is_index ? get_item(current, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(current, Value(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// The comparison key of sort, unique, min, max and dictsort: strings ignore case unless asked not to.
Value sort_key(const Value& item, bool case_sensitive) {
  return !case_sensitive && item.is_string() ? Value(python_lower(item.as_string())) : item;
}

Value optional_path(const Value& item, const Value& attribute) {
  return attribute.is_none() || attribute.is_undefined() ? item : lookup_path(item, attribute);
}

CallArgs rest_of(const CallArgs& args, size_t skip) {
  CallArgs rest;
  if (args.positional.size() > skip) rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(skip), args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

Value text_filter(const Value& input, std::string (*transform)(std::string)) { return transform(input.str()); }

std::string jinja_title(std::string text) {
  // Jinja2 capitalizes after spaces, hyphens and opening brackets only (unlike str.title()).
  bool word_start = true;
  for (char& c : text) {
    const bool separator = is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      word_start = true;
      continue;
    }
    c = static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
    word_start = false;
  }
  return text;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value to_list(const Value& input) { return Value::list(iterate(input)); }

Value first_item(const Value& input) {
  const auto items = iterate(input);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value last_item(const Value& input) {
  const auto items = iterate(input);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value default_value(const Value& input, const CallArgs& args) {
  const bool use_on_falsy = args.get(1, "boolean", false).truthy();
  if (input.is_undefined() || (use_on_falsy && !input.truthy())) return args.get(0, "default_value", "");
  return input;
}

Value join(const Value& input, const CallArgs& args) {
  const std::string separator = args.get(0, "d", "").str();
  const Value attribute = args.get(1, "attribute", nullptr);
  std::string out;
  bool first = true;
  for (const auto& item : iterate(input)) {
    out += (first ? "" : separator) + optional_path(item, attribute).str();
    first = false;
  }
  return out;
}

Value to_int(const Value& input, const CallArgs& args) {
  const Value fallback = args.get(0, "default", int64_t{0});
  if (input.is_number()) return input.is_float() ? Value(float_to_integer(input.as_double())) : Value(input.as_int());
  if (!input.is_string()) return fallback;
  const std::string text = python_strip(input.as_string(), nullptr, true, true);
  const int base = static_cast<int>(args.get(1, "base", int64_t{10}).as_int());
  try {
    size_t used = 0;
    const int64_t value = std::stoll(text, &used, base);
    if (used == text.size()) return value;
    const double real = std::stod(text, &used);  // int("4.5") fails in Python, int(float("4.5")) does not
    if (used == text.size()) return static_cast<int64_t>(real);
  } catch (const std::exception&) {
  }
  return fallback;
}

Value to_float(const Value& input, const CallArgs& args) {
  const Value fallback = args.get(0, "default", 0.0);
  if (input.is_number()) return input.as_double();
  if (!input.is_string()) return fallback;
  const std::string text = python_strip(input.as_string(), nullptr, true, true);
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  return fallback;
}

// Python's round(): half to even on the exact binary value; ints stay ints.
Value round_number(const Value& input, const CallArgs& args) {
  const int64_t precision = args.get(0, "precision", int64_t{0}).as_int();
  const std::string method = args.get(1, "method", "common").str();
  if (!input.is_number()) throw RenderFailure("round() needs a number, not " + input.type_name());
  if (!input.is_float() && method == "common") return input.as_int();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return std::ceil(input.as_double() * scale) / scale;
  if (method == "floor") return std::floor(input.as_double() * scale) / scale;
  if (method != "common") throw RenderFailure("method must be 'common', 'ceil' or 'floor'");
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(std::max<int64_t>(precision, 0)), input.as_double());
  return std::stod(buffer);
}

Value indent(const Value& input, const CallArgs& args) {
  const Value width = args.get(0, "width", int64_t{4});
  if (!width.is_string()) check_result_size(width.as_int());
  const std::string indentation = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(width.as_int(), 0)), ' ');
  const bool first = args.get(1, "first", false).truthy();
  const bool blank = args.get(2, "blank", false).truthy();
  std::vector<Value> lines = bound_method(Value(input.str() + "\n"), "splitlines")->function().call({}).list_data().items;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) out += "\n" + ((blank || !line.empty()) ? indentation : "");
    out += line;
  }
  return first ? indentation + out : out;
}

Value center(const Value& input, const CallArgs& args) {
  const std::string text = input.str();
  const int64_t width = args.get(0, "width", int64_t{80}).as_int();
  check_result_size(width);
  const int64_t margin = width - static_cast<int64_t>(code_point_count(text));
  if (margin <= 0) return text;
  const int64_t left = margin / 2 + (margin & width & 1);  // CPython's split of an odd margin
  return std::string(static_cast<size_t>(left), ' ') + text + std::string(static_cast<size_t>(margin - left), ' ');
}

Value truncate(const Value& input, const CallArgs& args) {
  const auto characters = split_code_points(input.str());
  const size_t limit = static_cast<size_t>(args.get(0, "length", int64_t{255}).as_int());
  const bool kill_words = args.get(1, "killwords", false).truthy();
  const std::string end = args.get(2, "end", "...").str();
  const size_t leeway = static_cast<size_t>(args.get(3, "leeway", int64_t{5}).as_int());
  if (characters.size() <= limit + leeway) return input.str();
  std::string kept;
  const size_t keep = limit > code_point_count(end) ? limit - code_point_count(end) : 0;
  for (size_t i = 0; i < keep; ++i) kept += characters[i];
  if (!kill_words) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return kept + end;
}

Value word_count(const Value& input, const CallArgs&) {
  int64_t words = 0;
  bool in_word = false;
  for (const char c : input.str()) {
    const bool word_char = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return words;
}

Value reverse(const Value& input, const CallArgs&) {
  if (input.is_string()) return slice(input, nullptr, nullptr, int64_t{-1});
  auto items = iterate(input);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value sort(const Value& input, const CallArgs& args) {
  const bool descending = args.get(0, "reverse", false).truthy();
  const bool case_sensitive = args.get(1, "case_sensitive", false).truthy();
  const Value attribute = args.get(2, "attribute", nullptr);
  auto items = iterate(input);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int order = compare(sort_key(optional_path(a, attribute), case_sensitive), sort_key(optional_path(b, attribute), case_sensitive));
    return descending ? order > 0 : order < 0;
  });
  return Value::list(std::move(items));
}

Value unique(const Value& input, const CallArgs& args) {
  const bool case_sensitive = args.get(0, "case_sensitive", false).truthy();
  const Value attribute = args.get(1, "attribute", nullptr);
  std::vector<Value> seen, kept;
  for (const auto& item : iterate(input)) {
    Value key = sort_key(optional_path(item, attribute), case_sensitive);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(std::move(key));
    kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Value extreme(const Value& input, const CallArgs& args, bool want_max) {
  const bool case_sensitive = args.get(0, "case_sensitive", false).truthy();
  const Value attribute = args.get(1, "attribute", nullptr);
  const auto items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  for (const auto& item : items) {
    const int order = compare(sort_key(optional_path(item, attribute), case_sensitive), sort_key(optional_path(*best, attribute), case_sensitive));
    if (want_max ? order > 0 : order < 0) best = &item;
  }
  return *best;
}

Value sum(const Value& input, const CallArgs& args) {
  const Value attribute = args.get(0, "attribute", nullptr);
  Value total = args.get(1, "start", int64_t{0});
  for (const auto& item : iterate(input)) total = binary_operation("+", total, optional_path(item, attribute));
  return total;
}

Value dictsort(const Value& input, const CallArgs& args) {
  if (!input.is_mapping()) throw RenderFailure("dictsort needs a dict, not " + input.type_name());
  const bool case_sensitive = args.get(0, "case_sensitive", false).truthy();
  const std::string by = args.get(1, "by", "key").str();
  const bool descending = args.get(2, "reverse", false).truthy();
  const size_t position = by == "key" ? 0 : (by == "value" ? 1 : throw RenderFailure("You can only sort by either \"key\" or \"value\""));
  std::vector<Value> pairs;
  for (const auto& [key, value] : input.dict_data().entries) pairs.push_back(Value::tuple({key, value}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const int order = compare(sort_key(a.list_data().items[position], case_sensitive), sort_key(b.list_data().items[position], case_sensitive));
    return descending ? order > 0 : order < 0;
  });
  return Value::list(std::move(pairs));
}

Value items(const Value& input, const CallArgs&) {
  if (input.is_undefined()) return Value::list();
  if (!input.is_mapping()) throw RenderFailure("Can only get item pairs from a mapping.");
  return bound_method(input, "items")->function().call({});
}

Value batch(const Value& input, const CallArgs& args) {
  const int64_t size = args.get(0, "linecount").as_int();
  if (size <= 0) throw RenderFailure("batch size must be positive");
  const Value fill = args.get(1, "fill_with", nullptr);
  std::vector<Value> batches, current;
  for (const auto& item : iterate(input)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) batches.push_back(Value::list(std::exchange(current, {})));
  }
  if (!current.empty()) {
    if (!fill.is_none()) current.resize(static_cast<size_t>(size), fill);
    batches.push_back(Value::list(std::move(current)));
  }
  return Value::list(std::move(batches));
}

Value map(const Value& input, const CallArgs& args) {
  std::vector<Value> mapped;
  if (args.positional.empty() && args.has(0, "attribute")) {
    const Value attribute = args.get(0, "attribute");
    const Value fallback = args.get(1, "default");
    for (const auto& item : iterate(input)) {
      Value value = lookup_path(item, attribute);
      mapped.push_back(value.is_undefined() && args.has(1, "default") ? fallback : value);
    }
    return Value::list(std::move(mapped));
  }
  if (args.positional.empty()) throw RenderFailure("map requires a filter argument");
  const std::string filter = args.positional[0].str();
  const CallArgs rest = rest_of(args, 1);
  for (const auto& item : iterate(input)) mapped.push_back(apply_filter(filter, item, rest));
  return Value::list(std::move(mapped));
}

// select / reject / selectattr / rejectattr: keep items whose (attribute's) test result is `keep`.
Value select(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
  const size_t test_index = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? args.get(0, "attr") : Value(nullptr);
  const bool has_test_name = args.positional.size() > test_index;
  const std::string test = has_test_name ? args.positional[test_index].str() : "";
  const CallArgs test_args = rest_of(args, test_index + 1);
  std::vector<Value> kept;
  for (const auto& item : iterate(input)) {
    const Value subject = by_attribute ? lookup_path(item, attribute) : item;
    const bool passed = has_test_name ? apply_test(test, subject, test_args) : subject.truthy();
    if (passed == keep) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Value tojson(const Value& input, const CallArgs& args) {
  JsonStyle style;
  style.ensure_ascii = args.get(0, "ensure_ascii", false).truthy();
  const Value indent_value = args.get(1, "indent", nullptr);
  if (indent_value.is_string()) style.indent = indent_value.as_string();
  if (indent_value.is_number()) style.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent_value.as_int(), 0)), ' ');
  if (style.indent) style.item_separator = ",";
  const Value separators = args.get(2, "separators", nullptr);
  if (separators.is_list_or_tuple() && separators.list_data().items.size() == 2) {
    style.item_separator = separators.list_data().items[0].str();
    style.key_separator = separators.list_data().items[1].str();
  }
  style.sort_keys = args.get(3, "sort_keys", false).truthy();
  return to_python_json(input, style);
}

// Python's printf-style `format % args` for the conversions templates use: s r d i f F x X o e g %.
Value printf_format(const Value& input, const CallArgs& args) {
  const std::string pattern = input.str();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    size_t end = i + 1;
    while (end < pattern.size() && std::strchr("-+ #0123456789.", pattern[end])) ++end;
    if (end >= pattern.size()) throw RenderFailure("incomplete format");
    const char conversion = pattern[end];
    const std::string flags = pattern.substr(i + 1, end - i - 1);
    i = end;
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= args.positional.size()) throw RenderFailure("not enough arguments for format string");
    const Value& value = args.positional[next++];
    char buffer[512];
    if (conversion == 's' || conversion == 'r') {
      const std::string text = conversion == 's' ? value.str() : value.repr();
      std::snprintf(buffer, sizeof buffer, ("%" + flags + "s").c_str(), text.c_str());
    } else if (std::strchr("dixXo", conversion)) {
      std::snprintf(buffer, sizeof buffer, ("%" + flags + "ll" + conversion).c_str(), static_cast<long long>(value.is_float() ? float_to_integer(value.as_double()) : value.as_int()));
    } else if (std::strchr("fFeEgG", conversion)) {
      std::snprintf(buffer, sizeof buffer, ("%" + flags + conversion).c_str(), value.as_double());
    } else {
      throw RenderFailure(std::string("unsupported format character '") + conversion + "'");
    }
    out += buffer;
  }
  return out;
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"abs",
       [](const Value& v, const CallArgs&) {
         if (!v.is_number()) throw RenderFailure("bad operand type for abs(): '" + v.type_name() + "'");
         return v.is_float() ? Value(std::fabs(v.as_double())) : Value(v.as_int() < 0 ? checked_negate(v.as_int()) : v.as_int());
       }},
      {"attr", [](const Value& v, const CallArgs& a) { return get_attribute(v, a.get(0, "name").str()); }},
      {"batch", batch},
      {"capitalize", [](const Value& v, const CallArgs&) { return Value(python_capitalize(v.str())); }},
      {"center", center},
      {"count", [](const Value& v, const CallArgs&) { return Value(length(v)); }},
      {"default", default_value},
      {"d", default_value},
      {"dictsort", dictsort},
      {"escape", [](const Value& v, const CallArgs&) { return Value(html_escape(v.str())); }},
      {"e", [](const Value& v, const CallArgs&) { return Value(html_escape(v.str())); }},
      {"forceescape", [](const Value& v, const CallArgs&) { return Value(html_escape(v.str())); }},
      {"first", [](const Value& v, const CallArgs&) { return first_item(v); }},
      {"float", to_float},
      {"format", printf_format},
      {"indent", indent},
      {"int", to_int},
      {"items", items},
      {"join", join},
      {"last", [](const Value& v, const CallArgs&) { return last_item(v); }},
      {"length", [](const Value& v, const CallArgs&) { return Value(length(v)); }},
      {"list", [](const Value& v, const CallArgs&) { return to_list(v); }},
      {"lower", [](const Value& v, const CallArgs&) { return text_filter(v, python_lower); }},
      {"map", map},
      {"max", [](const Value& v, const CallArgs& a) { return extreme(v, a, true); }},
      {"min", [](const Value& v, const CallArgs& a) { return extreme(v, a, false); }},
      {"reject", [](const Value& v, const CallArgs& a) { return select(v, a, false, false); }},
      {"rejectattr", [](const Value& v, const CallArgs& a) { return select(v, a, true, false); }},
      {"replace",
       [](const Value& v, const CallArgs& a) {
         const Value count = a.get(2, "count", nullptr);
         return Value(python_replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(), count.is_none() ? -1 : count.as_int()));
       }},
      {"reverse", reverse},
      {"round", round_number},
      {"safe", [](const Value& v, const CallArgs&) { return v; }},
      {"select", [](const Value& v, const CallArgs& a) { return select(v, a, false, true); }},
      {"selectattr", [](const Value& v, const CallArgs& a) { return select(v, a, true, true); }},
      {"sort", sort},
      {"string", [](const Value& v, const CallArgs&) { return Value(v.str()); }},
      {"sum", sum},
      {"title", [](const Value& v, const CallArgs&) { return text_filter(v, jinja_title); }},
      {"tojson", tojson},
      {"trim", [](const Value& v, const CallArgs& a) { return Value(python_strip(v.str(), a.get(0, "chars", nullptr), true, true)); }},
      {"truncate", truncate},
      {"unique", unique},
      {"upper", [](const Value& v, const CallArgs&) { return text_filter(v, python_upper); }},
      {"wordcount", word_count},
  };
  return table;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) > 0; }

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  const auto found = filters().find(name);
  if (found == filters().end()) throw RenderFailure("unknown filter '" + std::string(name) + "'");
  return found->second(input, args);
}

}  // namespace strata::jinja
