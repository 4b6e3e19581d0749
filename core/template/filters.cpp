#include "core/template/filters.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "core/template/json_writer.hpp"
#include "core/template/limits.hpp"
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
    int64_t index = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool is_index = !part.empty() && part[0] != '-' && end == part.data() + part.size();
    if (is_index && error != std::errc()) {  // past 64 bits: no list is that long
      current = Value::undefined(object_description(current) + " has no element " + part);
    } else {
      current = is_index ? get_item(current, Value(index)) : get_item(current, Value(part));
    }
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
  if (args.positional.size() > skip)
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(skip), args.positional.end());
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
    c = static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
    word_start = false;
  }
  return text;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        append_bounded(out, "&amp;");
        break;
      case '<':
        append_bounded(out, "&lt;");
        break;
      case '>':
        append_bounded(out, "&gt;");
        break;
      case '"':
        append_bounded(out, "&#34;");
        break;
      case '\'':
        append_bounded(out, "&#39;");
        break;
      default:
        out += c;  // no longer than the text
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
    if (!first) append_bounded(out, separator);
    append_bounded(out, optional_path(item, attribute).str());
    first = false;
  }
  return out;
}

// Jinja2's int: int(text, base), else int(float(text)), else the default.
Value to_int(const Value& input, const CallArgs& args) {
  const Value fallback = args.get(0, "default", int64_t{0});
  if (input.is_number()) return input.is_float() ? Value(float_to_integer(input.as_double())) : Value(input.as_int());
  if (!input.is_string()) return fallback;
  const std::string text = python_strip(input.as_string(), nullptr, true, true);
  const int64_t base = args.get(1, "base", int64_t{10}).as_int();
  if (text.empty()) return fallback;
  const char* const end = text.c_str() + text.size();
  char* parsed = nullptr;
  if (base == 0 || (base >= 2 && base <= 36)) {  // else int() refuses the base, and float() is tried
    errno = 0;
    const long long value = std::strtoll(text.c_str(), &parsed, static_cast<int>(base));
    if (parsed == end) {
      if (errno == ERANGE) fail_overflow();
      return static_cast<int64_t>(value);
    }
  }
  const double real = std::strtod(text.c_str(), &parsed);      // int("4.5") fails in Python, int(float("4.5")) does not
  if (parsed != end || !std::isfinite(real)) return fallback;  // Jinja2 gives the default for nan and inf too
  return float_to_integer(real);
}

Value to_float(const Value& input, const CallArgs& args) {
  const Value fallback = args.get(0, "default", 0.0);
  if (input.is_number()) return input.as_double();
  if (!input.is_string()) return fallback;
  const std::string text = python_strip(input.as_string(), nullptr, true, true);
  if (text.empty()) return fallback;
  char* parsed = nullptr;
  const double value = std::strtod(text.c_str(), &parsed);  // past the range: inf or 0, as float() gives
  return parsed == text.c_str() + text.size() ? Value(value) : fallback;
}

// Python's round(int, digits): unchanged for digits >= 0, else half to even at 10^-digits.
int64_t round_integer(int64_t value, int64_t digits) {
  if (digits >= 0) return value;
  if (digits < -19) return 0;  // |value| < 10^19 / 2
  __int128 unit = 1;
  for (int64_t i = 0; i < -digits; ++i) unit *= 10;
  __int128 quotient = value / unit, remainder = value % unit;
  if (remainder < 0) {  // floor division
    quotient -= 1;
    remainder += unit;
  }
  if (2 * remainder > unit || (2 * remainder == unit && (quotient & 1) != 0)) quotient += 1;
  const __int128 result = quotient * unit;
  if (result > std::numeric_limits<int64_t>::max() || result < std::numeric_limits<int64_t>::min()) {
    fail_overflow();
  }
  return static_cast<int64_t>(result);
}

// Python's round(float, digits): half to even on the exact decimal expansion of the binary value, as CPython
// rounds it (digits may be negative).
double round_float(double value, int64_t digits) {
  if (!std::isfinite(value) || value == 0.0) return value;
  if (digits > 323) return value;         // CPython's NDIGITS_MAX: no double has digits that far
  if (digits < -308) return 0.0 * value;  // NDIGITS_MIN: beyond the largest double
  char exact[1024];                       // every double's expansion ends within 767 significant digits
  std::snprintf(exact, sizeof exact, "%.800e", std::fabs(value));
  const std::string_view text(exact);
  const size_t e = text.find('e');
  const int64_t exponent = std::strtol(exact + e + 1, nullptr, 10);
  const std::string significant = std::string(text.substr(0, 1)) + std::string(text.substr(2, e - 2));
  const int64_t kept = exponent + 1 + digits;  // significant digits down to 10^-digits
  if (kept < 0) return 0.0 * value;
  if (kept >= static_cast<int64_t>(significant.size())) return value;
  const auto cut = static_cast<size_t>(kept);
  std::string mantissa = significant.substr(0, cut);
  const char next = significant[cut];
  const bool beyond = significant.find_first_not_of('0', cut + 1) != std::string::npos;
  const bool odd = cut > 0 && (significant[cut - 1] - '0') % 2 == 1;
  if (next > '5' || (next == '5' && (beyond || odd))) {
    size_t i = mantissa.size();
    while (i > 0 && mantissa[i - 1] == '9') mantissa[--i] = '0';
    if (i == 0) {
      mantissa.insert(mantissa.begin(), '1');
    } else {
      ++mantissa[i - 1];
    }
  }
  if (mantissa.empty()) return 0.0 * value;
  const std::string rounded = mantissa + "e" + std::to_string(exponent + 1 - kept);
  const double result = std::strtod(rounded.c_str(), nullptr);
  if (std::isinf(result)) throw RenderFailure("rounded value too large to represent");
  return value < 0 ? -result : result;
}

// Jinja2's round: Python's round() for "common" (ints stay ints), else ceil or floor of value * 10^precision,
// divided back, as a float.
Value round_number(const Value& input, const CallArgs& args) {
  const int64_t precision = args.get(0, "precision", int64_t{0}).as_int();
  const std::string method = args.get(1, "method", "common").str();
  if (method != "common" && method != "ceil" && method != "floor") {
    throw RenderFailure("method must be 'common', 'ceil' or 'floor'");
  }
  if (!input.is_number()) throw RenderFailure("round() needs a number, not " + input.type_name());
  if (method == "common") {
    return input.is_float() ? Value(round_float(input.as_double(), precision))
                            : Value(round_integer(input.as_int(), precision));
  }
  if (!input.is_float() && precision >= 0) return input.as_double();  // an integer times 10^precision is whole already
  if (precision > 308) throw RenderFailure("int too large to convert to float");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double product = input.as_double() * scale;
  if (std::isinf(product)) throw RenderFailure("cannot convert float infinity to integer");
  if (std::isnan(product)) throw RenderFailure("cannot convert float NaN to integer");
  if (scale == 0.0) throw RenderFailure("float division by zero");
  return (method == "ceil" ? std::ceil(product) : std::floor(product)) / scale;
}

Value indent(const Value& input, const CallArgs& args) {
  const Value width = args.get(0, "width", int64_t{4});
  const std::string indentation =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(repeated_size(1, width.as_int())), ' ');
  const bool first = args.get(1, "first", false).truthy();
  const bool blank = args.get(2, "blank", false).truthy();
  std::vector<Value> lines =
      bound_method(Value(input.str() + "\n"), "splitlines")->function().call({}).list_data().items;
  std::string out;
  if (first) append_bounded(out, indentation);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) {
      append_bounded(out, "\n");
      if (blank || !line.empty()) append_bounded(out, indentation);
    }
    append_bounded(out, line);
  }
  return out;
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

// Jinja2's truncate: text longer than length + leeway characters is cut to length characters, `end`
// included, at the last space unless killwords.
Value truncate(const Value& input, const CallArgs& args) {
  const std::string text = input.str();
  const int64_t limit = args.get(0, "length", int64_t{255}).as_int();
  const bool kill_words = args.get(1, "killwords", false).truthy();
  const std::string end = args.get(2, "end", "...").str();
  const Value leeway_value = args.get(3, "leeway", nullptr);
  const int64_t leeway = leeway_value.is_none() ? 5 : leeway_value.as_int();
  const auto end_length = static_cast<int64_t>(code_point_count(end));
  if (limit < end_length) {
    throw RenderFailure("expected length >= " + std::to_string(end_length) + ", got " + std::to_string(limit));
  }
  if (leeway < 0) throw RenderFailure("expected leeway >= 0, got " + std::to_string(leeway));
  const auto offsets = code_point_offsets(text);
  const auto count = static_cast<int64_t>(offsets.size() - 1);
  if (count - limit <= leeway) return text;  // count <= limit + leeway, without overflow
  std::string kept = text.substr(0, offsets[static_cast<size_t>(limit - end_length)]);
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
    const bool word_char =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
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
    const int order = compare(sort_key(optional_path(a, attribute), case_sensitive),
                              sort_key(optional_path(b, attribute), case_sensitive));
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
    const int order = compare(sort_key(optional_path(item, attribute), case_sensitive),
                              sort_key(optional_path(*best, attribute), case_sensitive));
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
  const size_t position =
      by == "key" ? 0 : (by == "value" ? 1 : throw RenderFailure("You can only sort by either \"key\" or \"value\""));
  std::vector<Value> pairs;
  for (const auto& [key, value] : input.dict_data().entries) pairs.push_back(Value::tuple({key, value}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const int order = compare(sort_key(a.list_data().items[position], case_sensitive),
                              sort_key(b.list_data().items[position], case_sensitive));
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
    if (!fill.is_none()) {
      charge_work(repeated_size(1, size) * static_cast<int64_t>(sizeof(Value)));  // before copying the fill value
      current.resize(static_cast<size_t>(size), fill);
    }
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
  if (indent_value.is_number()) {
    style.indent = std::string(static_cast<size_t>(repeated_size(1, indent_value.as_int())), ' ');
  }
  if (style.indent) style.item_separator = ",";
  const Value separators = args.get(2, "separators", nullptr);
  if (separators.is_list_or_tuple() && separators.list_data().items.size() == 2) {
    style.item_separator = separators.list_data().items[0].str();
    style.key_separator = separators.list_data().items[1].str();
  }
  style.sort_keys = args.get(3, "sort_keys", false).truthy();
  return to_python_json(input, style);
}

// One conversion of Python's printf-style formatting: %[flags][width][.precision][length]type.
struct Conversion {
  std::string flags;
  int64_t width = -1;
  int64_t precision = -1;
  char type = 0;
};

// Parses the conversion that starts after the '%' at pattern[pos]; returns the position of its type.
size_t parse_conversion(const std::string& pattern, size_t pos, Conversion& conversion) {
  auto number = [&](int64_t& into) {
    const size_t start = pos;
    while (pos < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[pos]))) ++pos;
    int64_t value = 0;
    if (std::from_chars(pattern.data() + start, pattern.data() + pos, value).ec == std::errc::result_out_of_range) {
      throw RenderFailure("width or precision too big in format");
    }
    into = pos > start ? value : into;
    check_result_size(into);
  };
  auto one_of = [&](const char* characters) {
    return pos < pattern.size() && pattern[pos] != '\0' && std::strchr(characters, pattern[pos]) != nullptr;
  };
  while (one_of("-+ #0")) conversion.flags += pattern[pos++];
  number(conversion.width);
  if (pos < pattern.size() && pattern[pos] == '.') {
    ++pos;
    conversion.precision = 0;
    number(conversion.precision);
  }
  while (one_of("hlL")) ++pos;  // Python ignores them
  if (pos >= pattern.size()) throw RenderFailure("incomplete format");
  conversion.type = pattern[pos];
  return pos;
}

// %s and %r: the text cut to `precision` characters, then padded to `width` (on the right with '-').
std::string format_text(const std::string& text, const Conversion& conversion) {
  const auto offsets = code_point_offsets(text);
  size_t characters = offsets.size() - 1;
  if (conversion.precision >= 0) characters = std::min(characters, static_cast<size_t>(conversion.precision));
  const std::string kept = text.substr(0, offsets[characters]);
  const auto padding = static_cast<size_t>(std::max<int64_t>(conversion.width - static_cast<int64_t>(characters), 0));
  const bool left = conversion.flags.find('-') != std::string::npos;
  return left ? kept + std::string(padding, ' ') : std::string(padding, ' ') + kept;
}

// Numbers through snprintf, measured first so that no width or precision can overflow a buffer.
template <class Number>
std::string format_number(const Conversion& conversion, const char* length_modifier, Number number) {
  std::string spec = "%" + conversion.flags;
  if (conversion.width >= 0) spec += std::to_string(conversion.width);
  if (conversion.precision >= 0) spec += "." + std::to_string(conversion.precision);
  spec += std::string(length_modifier) + conversion.type;
  const int size = std::snprintf(nullptr, 0, spec.c_str(), number);
  if (size < 0) throw RenderFailure("cannot format " + spec);
  check_result_size(size);
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec.c_str(), number);
  out.pop_back();
  return out;
}

// Python's printf-style `format % args` for the conversions templates use: s r d i u x X o e E f F g G %.
Value printf_format(const Value& input, const CallArgs& args) {
  const std::string pattern = input.str();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      append_bounded(out, std::string_view(&pattern[i], 1));
      continue;
    }
    Conversion conversion;
    i = parse_conversion(pattern, i + 1, conversion);
    if (conversion.type == '%') {
      append_bounded(out, "%");
      continue;
    }
    if (next >= args.positional.size()) throw RenderFailure("not enough arguments for format string");
    const Value& value = args.positional[next++];
    const char type = conversion.type;
    if (type == 's' || type == 'r') {
      append_bounded(out, format_text(type == 's' ? value.str() : value.repr(), conversion));
    } else if (std::strchr("diuxXo", type) && type != '\0') {
      if (type == 'u') conversion.type = 'd';
      const int64_t integer = value.is_float() ? float_to_integer(value.as_double()) : value.as_int();
      append_bounded(out, format_number(conversion, "ll", static_cast<long long>(integer)));
    } else if (std::strchr("eEfFgG", type) && type != '\0') {
      append_bounded(out, format_number(conversion, "", value.as_double()));
    } else {
      throw RenderFailure(std::string("unsupported format character '") + type + "'");
    }
  }
  return out;
}

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"abs",
       [](const Value& v, const CallArgs&) {
         if (!v.is_number()) throw RenderFailure("bad operand type for abs(): '" + v.type_name() + "'");
         return v.is_float() ? Value(std::fabs(v.as_double()))
                             : Value(v.as_int() < 0 ? checked_negate(v.as_int()) : v.as_int());
       }},
      {"attr", [](const Value& v, const CallArgs& a) { return get_attribute(v, Value(a.get(0, "name").str())); }},
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
         return Value(python_replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                     count.is_none() ? -1 : count.as_int()));
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
      {"trim", [](const Value& v,
                  const CallArgs& a) { return Value(python_strip(v.str(), a.get(0, "chars", nullptr), true, true)); }},
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
  const NestingLevel level;  // map applies filters, and can apply map
  return found->second(input, args);
}

}  // namespace strata::jinja
