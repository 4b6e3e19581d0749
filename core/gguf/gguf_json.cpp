#include "core/gguf/gguf_json.hpp"

namespace strata::gguf {

nlohmann::json to_json(const Value& value) {
  return std::visit(
      [](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Array>) {
          nlohmann::json items = nlohmann::json::array();
          for (const auto& item : v.items) items.push_back(to_json(item));
          return items;
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t>) {
          return static_cast<uint64_t>(v);
        } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> || std::is_same_v<T, int32_t>) {
          return static_cast<int64_t>(v);
        } else {
          return v;
        }
      },
      value.data);
}

std::string to_display(const Value& value, size_t max_items) {
  if (const auto* array = value.as_array()) {
    std::string text = "[" + std::to_string(array->items.size()) + " x " + value_type_name(array->element_type) + ": ";
    for (size_t i = 0; i < array->items.size() && i < max_items; ++i) {
      text += (i ? ", " : "") + to_display(array->items[i], max_items);
    }
    return text + (array->items.size() > max_items ? ", ...]" : "]");
  }
  if (const auto* text = value.as_string()) {
    constexpr size_t kMaxChars = 120;
    std::string shown = text->size() > kMaxChars ? text->substr(0, kMaxChars) + "..." : *text;
    return nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return to_json(value).dump();
}

}  // namespace strata::gguf
