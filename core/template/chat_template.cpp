#include "core/template/chat_template.hpp"

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

std::string render_chat(const Template& chat_template, const ChatRequest& request, const RenderOptions& options) {
  std::vector<std::pair<std::string, Value>> variables = {
      {"messages", Value::from_json(request.messages)},
      {"add_generation_prompt", Value(request.add_generation_prompt)},
      {"bos_token", Value(request.bos_token)},
      {"eos_token", Value(request.eos_token)},
  };
  for (const auto& [name, value] : request.extra.items()) variables.emplace_back(name, Value::from_json(value));
  return chat_template.render(variables, options);
}

std::string render_chat(std::string_view template_text, const ChatRequest& request, const RenderOptions& options) {
  return render_chat(Template(template_text), request, options);
}

}  // namespace strata::jinja
