#include "core/server/worker_protocol.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/util/error.hpp"

namespace strata::server {
namespace {

using Json = nlohmann::json;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("the engine worker's channel is closed (") + std::strerror(errno) + ")");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads size bytes; false at the end of the stream before the first byte.
bool read_all(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && done == 0) return false;
    if (n <= 0) throw Error("the engine worker's channel broke mid-frame");
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void write_frame(int fd, const Json& message) {
  const std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (body.size() > kMaxFrameBytes) throw Error("a frame for the engine worker is larger than 64 MiB");
  const auto size = static_cast<uint32_t>(body.size());
  const char header[4] = {static_cast<char>(size & 0xff), static_cast<char>(size >> 8 & 0xff),
                          static_cast<char>(size >> 16 & 0xff), static_cast<char>(size >> 24 & 0xff)};
  std::string frame(header, 4);
  frame += body;
  write_all(fd, frame.data(), frame.size());
}

std::optional<Json> read_frame(int fd) {
  unsigned char header[4];
  if (!read_all(fd, reinterpret_cast<char*>(header), 4)) return std::nullopt;
  const uint32_t size = header[0] | header[1] << 8 | header[2] << 16 | static_cast<uint32_t>(header[3]) << 24;
  if (size > kMaxFrameBytes) throw Error("a frame from the engine worker claims " + std::to_string(size) + " bytes");
  std::string body(size, '\0');
  if (size > 0 && !read_all(fd, body.data(), size)) throw Error("the engine worker's channel broke mid-frame");
  Json message = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded() || !message.is_object() || message.size() != 1) {
    throw Error("a frame on the engine worker's channel is no message");
  }
  return message;
}

Json request_to_json(const CompletionRequest& request) {
  const SamplingParams& s = request.sampling;
  Json json{{"chat", request.chat},
            {"messages", request.messages},
            {"tools", request.tools},
            {"prompt", request.prompt},
            {"stop", request.stop},
            {"sampling",
             {{"temperature", s.temperature},
              {"top_k", s.top_k},
              {"top_p", s.top_p},
              {"min_p", s.min_p},
              {"repetition_penalty", s.repetition_penalty},
              {"presence_penalty", s.presence_penalty},
              {"frequency_penalty", s.frequency_penalty},
              {"repeat_last_n", s.repeat_last_n},
              {"seed", s.seed}}},
            {"seeded", request.seeded}};
  json["max_tokens"] = request.max_tokens ? Json(*request.max_tokens) : Json(nullptr);
  return json;
}

CompletionRequest request_from_json(const Json& json) {
  CompletionRequest request;
  request.chat = json.at("chat").get<bool>();
  request.messages = nlohmann::ordered_json::parse(json.at("messages").dump());
  request.tools = nlohmann::ordered_json::parse(json.at("tools").dump());
  request.prompt = json.at("prompt").get<std::string>();
  request.stop = json.at("stop").get<std::vector<std::string>>();
  if (!json.at("max_tokens").is_null()) request.max_tokens = json.at("max_tokens").get<int32_t>();
  const Json& s = json.at("sampling");
  request.sampling = {s.at("temperature").get<float>(),
                      s.at("top_k").get<int32_t>(),
                      s.at("top_p").get<float>(),
                      s.at("min_p").get<float>(),
                      s.at("repetition_penalty").get<float>(),
                      s.at("presence_penalty").get<float>(),
                      s.at("frequency_penalty").get<float>(),
                      s.at("repeat_last_n").get<int32_t>(),
                      s.at("seed").get<uint64_t>()};
  request.seeded = json.at("seeded").get<bool>();
  return request;
}

Json outcome_to_json(const CompletionOutcome& outcome) {
  return Json{{"finish_reason", outcome.finish_reason},
              {"prompt_tokens", outcome.prompt_tokens},
              {"completion_tokens", outcome.completion_tokens},
              {"cached_tokens", outcome.cached_tokens},
              {"queue_seconds", outcome.queue_seconds},
              {"error", outcome.error},
              {"status", outcome.status}};
}

CompletionOutcome outcome_from_json(const Json& json) {
  CompletionOutcome outcome;
  outcome.finish_reason = json.at("finish_reason").get<std::string>();
  outcome.prompt_tokens = json.at("prompt_tokens").get<int32_t>();
  outcome.completion_tokens = json.at("completion_tokens").get<int32_t>();
  outcome.cached_tokens = json.at("cached_tokens").get<int32_t>();
  outcome.queue_seconds = json.at("queue_seconds").get<double>();
  outcome.error = json.at("error").get<std::string>();
  outcome.status = json.at("status").get<int>();
  return outcome;
}

Json gauges_to_json(const MetricsGauges& gauges) {
  return Json{{"running", gauges.running},
              {"waiting", gauges.waiting},
              {"step_age_seconds", gauges.step_age_seconds},
              {"kv_cache_usage", gauges.kv_cache_usage},
              {"batch_slots", gauges.batch_slots},
              {"expert_slots", gauges.expert_slots},
              {"pool_workers", gauges.pool_workers},
              {"expert_hit_rate", gauges.expert_hit_rate}};
}

MetricsGauges gauges_from_json(const Json& json) {
  MetricsGauges gauges;
  gauges.running = json.at("running").get<int64_t>();
  gauges.waiting = json.at("waiting").get<int64_t>();
  gauges.step_age_seconds = json.at("step_age_seconds").get<double>();
  gauges.kv_cache_usage = json.at("kv_cache_usage").get<double>();
  gauges.batch_slots = json.at("batch_slots").get<int64_t>();
  gauges.expert_slots = json.at("expert_slots").get<int64_t>();
  gauges.pool_workers = json.at("pool_workers").get<int64_t>();
  gauges.expert_hit_rate = json.at("expert_hit_rate").get<double>();
  return gauges;
}

}  // namespace strata::server
