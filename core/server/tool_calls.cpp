#include "core/server/tool_calls.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

namespace strata::server {
namespace {

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

std::optional<ToolCall> call_from(const std::string& body) {
  const auto json = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  const auto name = json.find("name");
  if (name == json.end() || !name->is_string()) return std::nullopt;
  const auto arguments = json.find("arguments");
  if (arguments == json.end() || arguments->is_null()) return ToolCall{name->get<std::string>(), "{}"};
  if (arguments->is_string()) return ToolCall{name->get<std::string>(), arguments->get<std::string>()};
  if (!arguments->is_object()) return std::nullopt;
  return ToolCall{name->get<std::string>(),
                  arguments->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)};
}

}  // namespace

ReplyWithCalls parse_tool_calls(const std::string& reply) {
  ReplyWithCalls result;
  std::string content;
  size_t at = 0;
  for (;;) {
    const size_t open = reply.find(kToolCallOpen, at);
    const size_t close = open == std::string::npos ? open : reply.find(kToolCallClose, open);
    if (close == std::string::npos) {
      content += reply.substr(at);
      break;
    }
    const size_t body = open + std::strlen(kToolCallOpen), end = close + std::strlen(kToolCallClose);
    if (auto call = call_from(reply.substr(body, close - body))) {
      content += reply.substr(at, open - at);
      result.calls.push_back(std::move(*call));
    } else {
      content += reply.substr(at, end - at);
    }
    at = end;
  }
  result.content = result.calls.empty() ? content : trimmed(content);
  return result;
}

}  // namespace strata::server
