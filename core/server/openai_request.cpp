#include "core/server/openai_request.hpp"

#include <cmath>
#include <limits>
#include <random>

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

// The names the request's fields have, for check_sampling_params' messages.
constexpr SamplingParamNames kRequestNames{
    "temperature",       "top_k",        "top_p", "min_p", "repeat_penalty", "presence_penalty",
    "frequency_penalty", "repeat_last_n"};

[[noreturn]] void refuse(const std::string& param, const std::string& what) {
  throw RequestError(param, param.empty() ? what : "'" + param + "' " + what);
}

Json parse_object(std::string_view body) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) refuse("", "the request body is not valid JSON");
  if (!json.is_object()) refuse("", "the request body must be a JSON object");
  return json;
}

// The field's value where it is present and not null.
const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const Json& body, const char* name, double fallback) {
  const Json* value = field(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_number()) refuse(name, "must be a number");
  return value->get<double>();
}

int64_t integer(const Json& body, const char* name, int64_t fallback, int64_t low, int64_t high) {
  const Json* value = field(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer()) refuse(name, "must be an integer");
  const bool too_large = value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(high);
  const int64_t wide = too_large ? high : value->get<int64_t>();
  if (too_large || wide < low || wide > high) {
    refuse(name, "must be from " + std::to_string(low) + " to " + std::to_string(high));
  }
  return wide;
}

bool boolean(const Json& body, const char* name) {
  const Json* value = field(body, name);
  if (value == nullptr) return false;
  if (!value->is_boolean()) refuse(name, "must be true or false");
  return value->get<bool>();
}

std::vector<std::string> stop_strings(const Json& body) {
  const Json* value = field(body, "stop");
  if (value == nullptr) return {};
  if (value->is_string()) return {value->get<std::string>()};
  if (!value->is_array() || value->size() > kMaxStopStrings) {
    refuse("stop", "must be a string or an array of at most " + std::to_string(kMaxStopStrings) + " strings");
  }
  std::vector<std::string> stops;
  for (const Json& stop : *value) {
    if (!stop.is_string()) refuse("stop", "must hold strings only");
    if (!stop.get<std::string>().empty()) stops.push_back(stop.get<std::string>());
  }
  return stops;
}

// The fields both endpoints share: limits, stops, sampling, streaming, and those no endpoint here honours.
void read_common(const Json& body, CompletionRequest& request) {
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  const char* max_name = field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
  if (field(body, max_name) != nullptr)
    request.max_tokens = static_cast<int32_t>(integer(body, max_name, 0, 0, kMaxTokens));
  request.stop = stop_strings(body);

  SamplingParams& sampling = request.sampling;
  sampling.temperature = static_cast<float>(number(body, "temperature", sampling.temperature));
  sampling.top_p = static_cast<float>(number(body, "top_p", sampling.top_p));
  sampling.top_k = static_cast<int32_t>(integer(body, "top_k", sampling.top_k, 0, kMaxTokens));
  sampling.min_p = static_cast<float>(number(body, "min_p", sampling.min_p));
  sampling.presence_penalty = static_cast<float>(number(body, "presence_penalty", sampling.presence_penalty));
  sampling.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", sampling.frequency_penalty));
  sampling.repetition_penalty = static_cast<float>(number(body, "repeat_penalty", sampling.repetition_penalty));
  sampling.repeat_last_n = static_cast<int32_t>(integer(body, "repeat_last_n", sampling.repeat_last_n, -1, kMaxTokens));
  if (const Json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) refuse("seed", "must be an integer");
    // OpenAI's seeds are signed 64-bit; their bits are the sampler's seed.
    sampling.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
    request.seeded = true;
  }
  try {
    check_sampling_params(sampling, kRequestNames);
  } catch (const Error& error) {
    const std::string message = error.what();
    refuse(message.substr(0, message.find(' ')), message.substr(message.find(' ') + 1));
  }

  request.stream = boolean(body, "stream");
  if (const Json* options = field(body, "stream_options")) {
    if (!options->is_object()) refuse("stream_options", "must be an object");
    request.stream_usage = boolean(*options, "include_usage");
  }
  if (integer(body, "n", 1, 1, 1) != 1) refuse("n", "must be 1");
  if (const Json* logprobs = field(body, "logprobs"); logprobs != nullptr && !(*logprobs == false)) {
    refuse("logprobs", "is not supported");
  }
  if (const Json* format = field(body, "response_format")) {
    if (!format->is_object() || format->value("type", "") != "text")
      refuse("response_format", "must be {\"type\": \"text\"}");
  }
}

// A message's content: a string, null (an assistant turn of tool calls), or text parts, which are joined.
void check_content(const Json& message, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  const auto it = message.find("content");
  if (it == message.end() || it->is_null() || it->is_string()) return;
  if (!it->is_array()) refuse(param, "must be a string, null or an array of text parts");
  for (const Json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      refuse(param, "may hold text parts only ({\"type\": \"text\", \"text\": ...})");
    }
  }
}

// Content as every template reads it, a string: text parts joined, null or none (an assistant turn of tool calls)
// empty (Qwen's templates test `'</think>' in message.content`, which fails on null in Jinja as here).
Json with_text_content(Json message) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    message["content"] = "";
  } else if (it->is_array()) {
    std::string text;
    for (const Json& part : *it) text += part["text"].get<std::string>();
    *it = text;
  }
  return message;
}

}  // namespace

void draw_seed(CompletionRequest& request) {
  if (request.seeded) return;
  std::random_device device;
  request.sampling.seed = uint64_t{device()} << 32 | device();
  request.seeded = true;
}

CompletionRequest parse_chat_request(std::string_view body) {
  const Json json = parse_object(body);
  CompletionRequest request;
  request.chat = true;
  const Json* messages = field(json, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    refuse("messages", "must be a non-empty array of messages");
  }
  request.messages = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!message.is_object()) refuse(param, "must be an object");
    if (!message.contains("role") || !message["role"].is_string()) refuse(param + ".role", "must be a string");
    check_content(message, i);
    request.messages.push_back(with_text_content(message));
  }
  if (const Json* tools = field(json, "tools")) {
    if (!tools->is_array()) refuse("tools", "must be an array of tool definitions");
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& tool = (*tools)[i];
      const std::string param = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
          !tool["function"].is_object() || !tool["function"].contains("name") ||
          !tool["function"]["name"].is_string()) {
        refuse(param, "must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
    }
    // The model decides whether to call (auto); a forced call is not supported.
    const Json* choice = field(json, "tool_choice");
    if (choice != nullptr && !(choice->is_string() && (*choice == "auto" || *choice == "none"))) {
      refuse("tool_choice", "must be \"auto\" or \"none\"");
    }
    if (!tools->empty() && (choice == nullptr || *choice == "auto")) request.tools = *tools;
  }
  read_common(json, request);
  return request;
}

CompletionRequest parse_completion_request(std::string_view body) {
  const Json json = parse_object(body);
  CompletionRequest request;
  const Json* prompt = field(json, "prompt");
  if (prompt != nullptr && prompt->is_array() && prompt->size() == 1) prompt = &(*prompt)[0];
  if (prompt == nullptr || !prompt->is_string() || prompt->get<std::string>().empty()) {
    refuse("prompt", "must be a non-empty string (or an array of one)");
  }
  request.prompt = prompt->get<std::string>();
  read_common(json, request);
  return request;
}

}  // namespace strata::server
