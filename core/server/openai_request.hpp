// The bodies of the OpenAI-compatible requests `strata serve` answers (/v1/chat/completions, /v1/completions),
// read into one CompletionRequest. Every field is checked here, before a request is queued: a bad one is a
// RequestError naming it, which the server answers with 400 and the field as the error's "param".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sampling/sampler.hpp"
#include "core/util/error.hpp"

namespace strata::server {

// A request the client got wrong: param is the body's field at fault ("" for the body as a whole).
class RequestError : public Error {
 public:
  RequestError(std::string param, const std::string& message) : Error(message), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

// The most stop strings a request may give (OpenAI allows 4).
inline constexpr size_t kMaxStopStrings = 16;

struct CompletionRequest {
  bool chat = false;                  // /v1/chat/completions; else /v1/completions
  nlohmann::ordered_json messages;    // chat: the conversation, each message as the client sent it
  nlohmann::ordered_json tools;       // chat: the tool definitions for the template, or null (none, or "none" chosen)
  std::string prompt;                 // completions: the text to continue
  std::optional<int32_t> max_tokens;  // none: as many as the context leaves
  std::vector<std::string> stop;      // the reply ends before the first of these
  SamplingParams sampling;            // llama.cpp's defaults where the request says nothing
  bool seeded = false;                // the request gave a seed (else the server draws one)
  bool stream = false;                // server-sent events, a chunk per piece of text
  bool stream_usage = false;          // stream_options.include_usage: a last chunk with the token counts
};

// Parses a body as the endpoint reads it; throws RequestError naming the first bad field. Fields the server does
// not use (user, metadata, ...) are ignored, as OpenAI's API ignores unknown ones; those it cannot honour
// (n > 1, logprobs, a response_format other than text, a tool_choice that forces a call) are refused rather than
// ignored.
CompletionRequest parse_chat_request(std::string_view body);
CompletionRequest parse_completion_request(std::string_view body);

// Gives a request without a seed a random one of its own (seeded from then on), so that running it again, on
// another worker after a crash, draws the same tokens.
void draw_seed(CompletionRequest& request);

}  // namespace strata::server
