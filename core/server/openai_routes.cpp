#include "core/server/openai_routes.hpp"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/util/log.hpp"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::chrono::milliseconds kWaitSlice{1000};  // a connection's wait for news, between its checks

// Text the engine made is well-formed UTF-8 (the detokenizer's promise); anything else would be replaced, not thrown.
std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

void send_json(HttpReply& reply, int status, const Json& body, const HttpHeaders& headers = {}) {
  reply.send(status, "application/json", dump(body), headers);
}

Json error_body(const std::string& message, const char* type, const std::string& param = "") {
  Json error{{"message", message}, {"type", type}};
  error["param"] = param.empty() ? Json(nullptr) : Json(param);
  return Json{{"error", error}};
}

const char* error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 429:
      return "rate_limit_error";
    default:
      return "server_error";
  }
}

Json usage(const CompletionOutcome& outcome) {
  return Json{{"prompt_tokens", outcome.prompt_tokens},
              {"completion_tokens", outcome.completion_tokens},
              {"total_tokens", outcome.prompt_tokens + outcome.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", outcome.cached_tokens}}}};
}

// One choice of an answer: the whole text, or a streamed piece (delta) of it.
Json choice(bool chat, bool streamed, const std::string& text, const Json& finish_reason) {
  Json one{{"index", 0}};
  if (!chat) {
    one["text"] = text;
    one["logprobs"] = nullptr;
  } else if (streamed) {
    one["delta"] = text.empty() ? Json::object() : Json{{"content", text}};
  } else {
    one["message"] = {{"role", "assistant"}, {"content", text}};
  }
  one["finish_reason"] = finish_reason;
  return one;
}

}  // namespace

OpenAiRoutes::OpenAiRoutes(CompletionRunner& runner, RoutesOptions options)
    : runner_(runner),
      options_(std::move(options)),
      started_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

void OpenAiRoutes::handle(const HttpRequest& request, HttpReply& reply) {
  const std::string& path = request.target;
  const bool get = request.method == "GET", post = request.method == "POST";
  if (path == "/health") {
    if (!get) return send_json(reply, 405, error_body("use GET", "invalid_request_error"));
    return send_json(reply, 200, Json{{"status", "ok"}, {"waiting", runner_.waiting()}});
  }
  const bool known = path == "/v1/models" || path == "/v1/chat/completions" || path == "/v1/completions";
  if (!known) return send_json(reply, 404, error_body("no endpoint " + path, "invalid_request_error"));
  if (!options_.api_key.empty() && request.authorization != "Bearer " + options_.api_key) {
    return send_json(reply, 401, error_body("a wrong or missing API key (Authorization: Bearer ...)", error_type(401)));
  }
  if (path == "/v1/models") {
    if (!get) return send_json(reply, 405, error_body("use GET", "invalid_request_error"));
    const Json model{{"id", options_.model_id}, {"object", "model"}, {"created", started_}, {"owned_by", "strata"}};
    return send_json(reply, 200, Json{{"object", "list"}, {"data", Json::array({model})}});
  }
  if (!post) return send_json(reply, 405, error_body("use POST", "invalid_request_error"));
  complete(request, reply, path == "/v1/chat/completions");
}

void OpenAiRoutes::complete(const HttpRequest& http, HttpReply& reply, bool chat) {
  CompletionRequest request;
  try {
    request = chat ? parse_chat_request(http.body) : parse_completion_request(http.body);
  } catch (const RequestError& error) {
    return send_json(reply, 400, error_body(error.what(), error_type(400), error.param()));
  }
  const bool stream = request.stream, stream_usage = request.stream_usage;
  const std::shared_ptr<CompletionStream> events = runner_.submit(std::move(request));
  if (events == nullptr) {
    return send_json(reply, 429, error_body("the queue is full; try again", error_type(429)), {{"Retry-After", "1"}});
  }
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_.fetch_add(1));
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const Json head{{"id", id},
                  {"object", chat ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
                  {"created", created},
                  {"model", options_.model_id}};
  const auto with = [&head](const char* key, Json value) {
    Json body = head;
    body[key] = std::move(value);
    return body;
  };

  if (!stream) {
    std::string text;
    for (;;) {
      CompletionStream::News news = events->wait(kWaitSlice);
      text += news.text;
      if (!news.end) continue;
      const CompletionOutcome& outcome = *news.end;
      if (!outcome.error.empty()) {
        return send_json(reply, outcome.status, error_body(outcome.error, error_type(outcome.status)));
      }
      Json body = with("choices", Json::array({choice(chat, false, text, outcome.finish_reason)}));
      body["usage"] = usage(outcome);
      return send_json(reply, 200, body);
    }
  }

  if (!reply.start_events()) return events->cancel();
  // A chat stream opens with the assistant's role, as OpenAI's does.
  if (chat) {
    Json first = choice(true, true, "", nullptr);
    first["delta"] = {{"role", "assistant"}, {"content", ""}};
    if (!reply.send_event(dump(with("choices", Json::array({first}))))) return events->cancel();
  }
  for (;;) {
    CompletionStream::News news = events->wait(kWaitSlice);
    if (!news.text.empty() &&
        !reply.send_event(dump(with("choices", Json::array({choice(chat, true, news.text, nullptr)}))))) {
      return events->cancel();  // the client went away: the engine stops at its next token
    }
    if (!news.end) continue;
    const CompletionOutcome& outcome = *news.end;
    if (!outcome.error.empty()) {
      reply.send_event(dump(error_body(outcome.error, error_type(outcome.status))));
    } else {
      reply.send_event(dump(with("choices", Json::array({choice(chat, true, "", outcome.finish_reason)}))));
      if (stream_usage) {  // OpenAI's last chunk: no choices, the counts
        Json last = with("choices", Json::array());
        last["usage"] = usage(outcome);
        reply.send_event(dump(last));
      }
    }
    reply.send_event("[DONE]");
    return reply.end_events();
  }
}

}  // namespace strata::server
