#include "core/server/openai_routes.hpp"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/engine/generation.hpp"
#include "core/server/tool_calls.hpp"
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

OpenAiRoutes::OpenAiRoutes(CompletionSource& source, RoutesOptions options)
    : source_(source),
      options_(std::move(options)),
      started_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

void OpenAiRoutes::handle(const HttpRequest& request, HttpReply& reply) {
  const std::string& path = request.target;
  const bool get = request.method == "GET", post = request.method == "POST";
  // Probes and the scraper need no key: they say nothing of the requests' contents.
  if (path == "/health" || path == "/ready" || path == "/metrics") {
    if (!get) return send_json(reply, 405, error_body("use GET", "invalid_request_error"));
    const MetricsGauges gauges = source_.gauges();
    if (path == "/metrics") {
      return reply.send(200, "text/plain; version=0.0.4", metrics_.text(gauges, STRATA_VERSION), {});
    }
    if (path == "/ready") {
      const bool ready = gauges.worker_state == "ready";
      return send_json(reply, ready ? 200 : 503, Json{{"status", gauges.worker_state}});
    }
    return send_json(reply, 200,
                     Json{{"status", "ok"},
                          {"running", gauges.running},
                          {"waiting", gauges.waiting},
                          {"step_age_seconds", gauges.step_age_seconds}});
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
  const auto arrival = std::chrono::steady_clock::now();
  const auto seconds_since_arrival = [arrival] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
  };
  double first_text = -1.0;  // seconds from arrival to the first text
  const auto record = [&](const CompletionOutcome& outcome, const std::string& finish_reason) {
    metrics_.record(outcome.error.empty() ? finish_reason : "error", outcome.prompt_tokens, outcome.completion_tokens,
                    outcome.queue_seconds, first_text, seconds_since_arrival());
  };
  const bool stream = request.stream, stream_usage = request.stream_usage, tools = !request.tools.is_null();
  const std::shared_ptr<CompletionStream> events = source_.submit(std::move(request));
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
  const auto with_choice = [&head](Json one) {
    Json body = head;
    body["choices"] = Json::array({std::move(one)});
    return body;
  };
  // With tools, the reply's <tool_call> blocks become tool_calls, and finish_reason says so.
  const auto calls_of = [&id](const std::vector<ToolCall>& calls, bool streamed) {
    Json list = Json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
      Json call{{"id", "call_" + id + "_" + std::to_string(i)},
                {"type", "function"},
                {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
      if (streamed) call["index"] = i;
      list.push_back(std::move(call));
    }
    return list;
  };

  if (!stream) {
    std::string text;
    for (;;) {
      CompletionStream::News news = events->wait(kWaitSlice);
      if (!news.text.empty() && first_text < 0.0) first_text = seconds_since_arrival();
      text += news.text;
      if (!news.end) {
        if (reply.client_gone()) return events->cancel();  // at the next token, or the wait slice's end
        continue;
      }
      const CompletionOutcome& outcome = *news.end;
      if (!outcome.error.empty()) {
        record(outcome, "");
        return send_json(reply, outcome.status, error_body(outcome.error, error_type(outcome.status)));
      }
      Json one = choice(chat, false, text, outcome.finish_reason);
      if (const ReplyWithCalls parsed = tools ? parse_tool_calls(text) : ReplyWithCalls{}; !parsed.calls.empty()) {
        one["message"]["content"] = parsed.content.empty() ? Json(nullptr) : Json(parsed.content);
        one["message"]["tool_calls"] = calls_of(parsed.calls, false);
        one["finish_reason"] = "tool_calls";
      }
      record(outcome, one["finish_reason"]);
      Json body = with_choice(std::move(one));
      body["usage"] = usage(outcome);
      return send_json(reply, 200, body);
    }
  }

  if (!reply.start_events()) return events->cancel();
  const auto send_text = [&](const std::string& text) {
    return text.empty() || reply.send_event(dump(with_choice(choice(chat, true, text, nullptr))));
  };
  // A chat stream opens with the assistant's role, as OpenAI's does.
  if (chat) {
    Json first = choice(true, true, "", nullptr);
    first["delta"] = {{"role", "assistant"}, {"content", ""}};
    if (!reply.send_event(dump(with_choice(std::move(first))))) return events->cancel();
  }
  // With tools, the text from the first <tool_call> on is held back until the end, when it is parsed.
  StopStrings before_calls(tools ? std::vector<std::string>{kToolCallOpen} : std::vector<std::string>{});
  std::string text;
  for (;;) {
    CompletionStream::News news = events->wait(kWaitSlice);
    if (!news.text.empty() && first_text < 0.0) first_text = seconds_since_arrival();
    text += news.text;
    if (!send_text(before_calls.push(news.text))) return events->cancel();  // the client went away
    if (!news.end) continue;
    const CompletionOutcome& outcome = *news.end;
    if (!outcome.error.empty()) {
      record(outcome, "");
      reply.send_event(dump(error_body(outcome.error, error_type(outcome.status))));
    } else {
      Json finish = choice(chat, true, "", outcome.finish_reason);
      const ReplyWithCalls parsed = before_calls.stopped() ? parse_tool_calls(text) : ReplyWithCalls{};
      if (!parsed.calls.empty()) {
        Json calls = choice(chat, true, "", nullptr);
        calls["delta"] = {{"tool_calls", calls_of(parsed.calls, true)}};
        reply.send_event(dump(with_choice(std::move(calls))));
        finish["finish_reason"] = "tool_calls";
      } else {  // no call after all: what was held back is text
        send_text(before_calls.stopped() ? text.substr(text.find(kToolCallOpen)) : before_calls.finish());
      }
      record(outcome, finish["finish_reason"]);
      reply.send_event(dump(with_choice(std::move(finish))));
      if (stream_usage) {  // OpenAI's last chunk: no choices, the counts
        Json last = head;
        last["choices"] = Json::array();
        last["usage"] = usage(outcome);
        reply.send_event(dump(last));
      }
    }
    reply.send_event("[DONE]");
    return reply.end_events();
  }
}

}  // namespace strata::server
