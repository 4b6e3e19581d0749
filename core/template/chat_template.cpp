#include "core/template/chat_template.hpp"

#include <limits>

#include "core/util/error.hpp"

namespace strata::jinja {

ChatRequest chat_request_from_json(const nlohmann::ordered_json& object) {
  if (!object.is_object()) throw Error("chat request: expected a JSON object");
  ChatRequest request;
  try {
    request.messages = object.value("messages", nlohmann::ordered_json::array());
    request.add_generation_prompt = object.value("add_generation_prompt", false);
    request.bos_token = object.value("bos_token", "");
    request.eos_token = object.value("eos_token", "");
    request.extra = object.value("extra", nlohmann::ordered_json::object());
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("chat request: ") + e.what());
  }
  if (!request.messages.is_array()) throw Error("chat request: \"messages\" must be an array");
  if (!request.extra.is_object()) throw Error("chat request: \"extra\" must be an object");
  return request;
}

ChatRequest parse_chat_request(std::string_view json_text) {
  nlohmann::ordered_json object;
  try {
    // The callback sees each value as it opens, before anything nests deeper: the parser itself keeps its
    // own stack, so it does not recurse.
    using Json = nlohmann::ordered_json;
    object = Json::parse(json_text, [](int depth, Json::parse_event_t, Json& value) {
      if (depth > kMaxNesting) throw Error("JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
      constexpr auto kMaxInteger = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (value.is_number_unsigned() && value.get<uint64_t>() > kMaxInteger) {
        throw Error("integer " + value.dump() + " is past the 64-bit range");
      }
      return true;
    });
  } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of range
    throw Error(e.what());
  }
  return chat_request_from_json(object);
}

namespace {

Value variable_from_json(const std::string& name, const nlohmann::ordered_json& json) {
  try {
    return Value::from_json(json);
  } catch (const RenderFailure& failure) {
    throw Error("chat request: \"" + name + "\": " + failure.what());
  }
}

}  // namespace

std::string render_chat(const Template& chat_template, const ChatRequest& request, const RenderOptions& options) {
  std::vector<std::pair<std::string, Value>> variables = {
      {"messages", variable_from_json("messages", request.messages)},
      {"add_generation_prompt", Value(request.add_generation_prompt)},
      {"bos_token", Value(request.bos_token)},
      {"eos_token", Value(request.eos_token)},
  };
  for (const auto& [name, value] : request.extra.items()) variables.emplace_back(name, variable_from_json(name, value));
  return chat_template.render(variables, options);
}

std::string render_chat(std::string_view template_text, const ChatRequest& request, const RenderOptions& options) {
  return render_chat(Template(template_text), request, options);
}

}  // namespace strata::jinja
