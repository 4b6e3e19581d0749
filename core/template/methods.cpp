#include "core/template/methods.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <map>

#include "core/template/limits.hpp"
#include "core/template/operations.hpp"
#include "core/template/unicode.hpp"

namespace strata::jinja {
namespace {

using Method = std::function<Value(const Value& self, const CallArgs& args)>;

// Case mapping covers ASCII; other characters pass through unchanged (a documented gap).
bool is_ascii_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_ascii_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_cased(char c) { return is_ascii_upper(c) || is_ascii_lower(c); }

std::string string_argument(const CallArgs& args, size_t index, std::string_view name) {
  const Value value = args.get(index, name);
  if (!value.is_string()) throw RenderFailure("must be str, not " + value.type_name());
  return value.as_string();
}

int64_t int_argument(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
  const Value value = args.get(index, name, Value(fallback));
  if (!value.is_number() || value.is_float())
    throw RenderFailure("'" + value.type_name() + "' object cannot be interpreted as an integer");
  return value.as_int();
}

std::vector<Value> to_values(std::vector<std::string> parts) {
  std::vector<Value> values;
  for (auto& part : parts) values.emplace_back(std::move(part));
  return values;
}

std::vector<std::string> split_whitespace(const std::string& text, int64_t max_split, bool from_right) {
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    while (true) {
      while (pos < text.size() && is_python_space(text[pos])) ++pos;
      if (pos >= text.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        size_t end = text.size();
        while (end > pos && is_python_space(text[end - 1])) --end;
        parts.push_back(text.substr(pos, end - pos));
        break;
      }
      const size_t start = pos;
      while (pos < text.size() && !is_python_space(text[pos])) ++pos;
      parts.push_back(text.substr(start, pos - start));
    }
    return parts;
  }
  size_t end = text.size();
  while (true) {
    while (end > 0 && is_python_space(text[end - 1])) --end;
    if (end == 0) break;
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
      size_t start = 0;
      while (start < end && is_python_space(text[start])) ++start;
      parts.push_back(text.substr(start, end - start));
      break;
    }
    size_t start = end;
    while (start > 0 && !is_python_space(text[start - 1])) --start;
    parts.push_back(text.substr(start, end - start));
    end = start;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value split(const Value& self, const CallArgs& args, bool from_right) {
  const std::string& text = self.as_string();
  const Value separator = args.get(0, "sep", nullptr);
  const int64_t max_split = int_argument(args, 1, "maxsplit", -1);
  if (separator.is_none()) return Value::list(to_values(split_whitespace(text, max_split, from_right)));
  if (!separator.is_string()) throw RenderFailure("must be str or None, not " + separator.type_name());
  const std::string& sep = separator.as_string();
  if (sep.empty()) throw RenderFailure("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    for (size_t found; (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) &&
                       (found = find_text(text, sep, start)) != std::string::npos;
         start = found + sep.size()) {
      parts.push_back(text.substr(start, found - start));
    }
    parts.push_back(text.substr(start));
    return Value::list(to_values(std::move(parts)));
  }
  size_t end = text.size();
  while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
    const size_t found = rfind_text(text, sep, end);
    if (found == std::string::npos) break;
    parts.push_back(text.substr(found + sep.size(), end - found - sep.size()));
    end = found;
  }
  parts.push_back(text.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return Value::list(to_values(std::move(parts)));
}

Value splitlines(const Value& self, const CallArgs& args) {
  const std::string& text = self.as_string();
  const bool keep_ends = args.get(0, "keepends", false).truthy();
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    const size_t end = (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? i + 2 : i + 1;
    lines.push_back(text.substr(start, (keep_ends ? end : i) - start));
    start = end;
    i = end - 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return Value::list(to_values(std::move(lines)));
}

// startswith / endswith accept one string or a tuple of them.
Value affix_test(const Value& self, const CallArgs& args, bool at_start) {
  const std::string& text = self.as_string();
  const Value affix = args.get(0, "prefix");
  auto matches = [&](const Value& candidate) {
    if (!candidate.is_string()) throw RenderFailure("expected str or a tuple of str, not " + candidate.type_name());
    const std::string& piece = candidate.as_string();
    if (piece.size() > text.size()) return false;
    return at_start ? text.compare(0, piece.size(), piece) == 0
                    : text.compare(text.size() - piece.size(), piece.size(), piece) == 0;
  };
  if (affix.is_tuple()) return std::any_of(affix.list_data().items.begin(), affix.list_data().items.end(), matches);
  return matches(affix);
}

Value find(const Value& self, const CallArgs& args, bool from_right) {
  const std::string& text = self.as_string();
  const std::string needle = string_argument(args, 0, "sub");
  const size_t found = from_right ? rfind_text(text, needle) : find_text(text, needle);
  if (found == std::string::npos) return int64_t{-1};
  return static_cast<int64_t>(code_point_count(std::string_view(text).substr(0, found)));
}

Value count(const Value& self, const CallArgs& args) {
  const std::string& text = self.as_string();
  const std::string needle = string_argument(args, 0, "sub");
  if (needle.empty()) return static_cast<int64_t>(code_point_count(text) + 1);
  int64_t total = 0;
  for (size_t pos = find_text(text, needle); pos != std::string::npos;
       pos = find_text(text, needle, pos + needle.size())) {
    ++total;
  }
  return total;
}

std::string python_title(const std::string& text) {
  std::string out = text;
  bool previous_cased = false;
  for (char& c : out) {
    const bool non_ascii = static_cast<unsigned char>(c) >= 0x80;
    if (is_cased(c)) {
      c = previous_cased ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    }
    previous_cased = is_cased(c) || non_ascii;
  }
  return out;
}

// str.format with automatic ({}), positional ({0}) and named ({name}) fields; format specs are ignored.
Value format(const Value& self, const CallArgs& args) {
  const std::string& pattern = self.as_string();
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      append_bounded(out, std::string_view(&c, 1));
      ++i;
      continue;
    }
    if (c != '{') {
      append_bounded(out, std::string_view(&c, 1));
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw RenderFailure("Single '{' encountered in format string");
    std::string field = pattern.substr(i + 1, close - i - 1);
    const bool as_repr = field.size() >= 2 && field.compare(field.size() - 2, 2, "!r") == 0;
    field = field.substr(0, std::min(field.find('!'), field.find(':')));
    Value value;
    if (field.empty()) {
      value = args.get(automatic++, "");
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
      size_t index = 0;
      const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), index);
      if (error != std::errc() || end != field.data() + field.size() || index >= args.positional.size()) {
        throw RenderFailure("Replacement index " + field + " out of range for positional args tuple");
      }
      value = args.positional[index];
    } else {
      value = args.get(args.positional.size(), field);
    }
    if (value.is_undefined()) throw RenderFailure("format string refers to a missing argument '" + field + "'");
    append_bounded(out, as_repr ? value.repr() : value.str());
    i = close;
  }
  return out;
}

template <typename Predicate>
Value all_characters(const Value& self, Predicate predicate) {
  const std::string& text = self.as_string();
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [&](char c) { return predicate(static_cast<unsigned char>(c)); });
}

const std::map<std::string, Method, std::less<>>& string_methods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"strip",
       [](const Value& s, const CallArgs& a) {
         return Value(python_strip(s.as_string(), a.get(0, "chars", nullptr), true, true));
       }},
      {"lstrip",
       [](const Value& s, const CallArgs& a) {
         return Value(python_strip(s.as_string(), a.get(0, "chars", nullptr), true, false));
       }},
      {"rstrip",
       [](const Value& s, const CallArgs& a) {
         return Value(python_strip(s.as_string(), a.get(0, "chars", nullptr), false, true));
       }},
      {"split", [](const Value& s, const CallArgs& a) { return split(s, a, false); }},
      {"rsplit", [](const Value& s, const CallArgs& a) { return split(s, a, true); }},
      {"splitlines", splitlines},
      {"startswith", [](const Value& s, const CallArgs& a) { return affix_test(s, a, true); }},
      {"endswith", [](const Value& s, const CallArgs& a) { return affix_test(s, a, false); }},
      {"upper", [](const Value& s, const CallArgs&) { return Value(python_upper(s.as_string())); }},
      {"lower", [](const Value& s, const CallArgs&) { return Value(python_lower(s.as_string())); }},
      {"title", [](const Value& s, const CallArgs&) { return Value(python_title(s.as_string())); }},
      {"capitalize", [](const Value& s, const CallArgs&) { return Value(python_capitalize(s.as_string())); }},
      {"replace",
       [](const Value& s, const CallArgs& a) {
         return Value(python_replace(s.as_string(), string_argument(a, 0, "old"), string_argument(a, 1, "new"),
                                     int_argument(a, 2, "count", -1)));
       }},
      {"find", [](const Value& s, const CallArgs& a) { return find(s, a, false); }},
      {"rfind", [](const Value& s, const CallArgs& a) { return find(s, a, true); }},
      {"count", count},
      {"join",
       [](const Value& s, const CallArgs& a) {
         std::string out;
         bool first = true;
         for (const auto& item : iterate(a.get(0, "iterable"))) {
           if (!item.is_string())
             throw RenderFailure("sequence item: expected str instance, " + item.type_name() + " found");
           if (!first) append_bounded(out, s.as_string());
           append_bounded(out, item.as_string());
           first = false;
         }
         return Value(out);
       }},
      {"format", format},
      {"isdigit", [](const Value& s,
                     const CallArgs&) { return all_characters(s, [](unsigned char c) { return std::isdigit(c); }); }},
      {"isalpha", [](const Value& s,
                     const CallArgs&) { return all_characters(s, [](unsigned char c) { return std::isalpha(c); }); }},
      {"isalnum", [](const Value& s,
                     const CallArgs&) { return all_characters(s, [](unsigned char c) { return std::isalnum(c); }); }},
      {"isspace",
       [](const Value& s, const CallArgs&) {
         return all_characters(s, [](unsigned char c) { return is_python_space(static_cast<char>(c)); });
       }},
      {"islower", [](const Value& s, const CallArgs&) { return Value(python_is_single_case(s.as_string(), false)); }},
      {"isupper", [](const Value& s, const CallArgs&) { return Value(python_is_single_case(s.as_string(), true)); }},
  };
  return methods;
}

Value dict_view(const Value& self, bool keys, bool values) {
  std::vector<Value> items;
  for (const auto& [key, value] : self.dict_data().entries) {
    if (keys && values) {
      items.push_back(Value::tuple({key, value}));
    } else {
      items.push_back(keys ? key : value);
    }
  }
  return Value::list(std::move(items));
}

const std::map<std::string, Method, std::less<>>& dict_methods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"get",
       [](const Value& d, const CallArgs& a) {
         const Value* found = d.dict_data().find(a.get(0, "key"));
         return found ? *found : a.get(1, "default", nullptr);
       }},
      {"items", [](const Value& d, const CallArgs&) { return dict_view(d, true, true); }},
      {"keys", [](const Value& d, const CallArgs&) { return dict_view(d, true, false); }},
      {"values", [](const Value& d, const CallArgs&) { return dict_view(d, false, true); }},
  };
  return methods;
}

const std::map<std::string, Method, std::less<>>& list_methods() {
  static const std::map<std::string, Method, std::less<>> methods = {
      {"index",
       [](const Value& l, const CallArgs& a) {
         const auto& items = l.list_data().items;
         const auto found = std::find(items.begin(), items.end(), a.get(0, "value"));
         if (found == items.end()) throw RenderFailure(a.get(0, "value").repr() + " is not in list");
         return Value(static_cast<int64_t>(found - items.begin()));
       }},
      {"count",
       [](const Value& l, const CallArgs& a) {
         const auto& items = l.list_data().items;
         return Value(static_cast<int64_t>(std::count(items.begin(), items.end(), a.get(0, "value"))));
       }},
  };
  return methods;
}

}  // namespace

std::optional<Value> bound_method(const Value& object, const std::string& name) {
  const std::map<std::string, Method, std::less<>>* table = nullptr;
  if (object.is_string()) table = &string_methods();
  if (object.is_mapping()) table = &dict_methods();
  if (object.is_list_or_tuple()) table = &list_methods();
  if (!table) return std::nullopt;
  const auto found = table->find(name);
  if (found == table->end()) return std::nullopt;
  return Value::function(name, [object, name, method = found->second](const CallArgs& args) {
    try {
      return method(object, args);
    } catch (const RenderFailure& failure) {  // name the method, as filters are named
      throw RenderFailure("method '" + name + "': " + failure.what());
    }
  });
}

std::string python_strip(const std::string& text, const Value& chars, bool left, bool right) {
  if (chars.is_none() || chars.is_undefined()) {
    size_t begin = 0, end = text.size();
    if (left)
      while (begin < end && is_python_space(text[begin])) ++begin;
    if (right)
      while (end > begin && is_python_space(text[end - 1])) --end;
    return text.substr(begin, end - begin);
  }
  if (!chars.is_string()) throw RenderFailure("strip arg must be None or str");
  // Characters as views between their offsets; the set sorted, for a search in log time.
  auto character = [](std::string_view of, const std::vector<size_t>& offsets, size_t i) {
    return of.substr(offsets[i], offsets[i + 1] - offsets[i]);
  };
  std::vector<std::string_view> strip_set;
  const auto set_offsets = code_point_offsets(chars.as_string());
  for (size_t i = 0; i + 1 < set_offsets.size(); ++i) strip_set.push_back(character(chars.as_string(), set_offsets, i));
  std::sort(strip_set.begin(), strip_set.end());
  const auto offsets = code_point_offsets(text);
  auto stripped = [&](size_t i) {
    return std::binary_search(strip_set.begin(), strip_set.end(), character(text, offsets, i));
  };
  size_t begin = 0, end = offsets.size() - 1;
  if (left)
    while (begin < end && stripped(begin)) ++begin;
  if (right)
    while (end > begin && stripped(end - 1)) --end;
  return text.substr(offsets[begin], offsets[end] - offsets[begin]);
}

bool python_is_single_case(const std::string& text, bool upper) {
  bool any_cased = false;
  for (const char c : text) {
    if (!is_cased(c)) continue;
    any_cased = true;
    if (upper != is_ascii_upper(c)) return false;
  }
  return any_cased;
}

std::string python_upper(std::string text) {
  for (char& c : text) {
    if (is_ascii_lower(c)) c = static_cast<char>(c - 'a' + 'A');
  }
  return text;
}

std::string python_lower(std::string text) {
  for (char& c : text) {
    if (is_ascii_upper(c)) c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

std::string python_capitalize(const std::string& text) {
  std::string out = python_lower(text);
  if (!out.empty() && is_ascii_lower(out[0])) out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string python_replace(const std::string& text, const std::string& old, const std::string& replacement,
                           int64_t count) {
  std::string out;
  int64_t done = 0;
  const std::string_view whole(text);
  if (old.empty()) {  // Python inserts the replacement around every character
    const auto offsets = code_point_offsets(text);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        append_bounded(out, replacement);
        ++done;
      }
      append_bounded(out, whole.substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    if (count < 0 || done < count) append_bounded(out, replacement);
    return out;
  }
  size_t start = 0;
  for (size_t found; (count < 0 || done < count) && (found = find_text(text, old, start)) != std::string::npos;
       start = found + old.size()) {
    append_bounded(out, whole.substr(start, found - start));
    append_bounded(out, replacement);
    ++done;
  }
  append_bounded(out, whole.substr(start));
  return out;
}

}  // namespace strata::jinja
