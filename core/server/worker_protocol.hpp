// What the supervisor (`strata serve`) and its engine worker say to each other over a Unix socket pair: frames of a
// 4-byte little-endian length and that many bytes of JSON, one message a frame, each an object with one key:
//
//   supervisor -> worker   {"submit": {"id": N, "request": {...}}}   a request to run (its seed already drawn)
//                          {"cancel": N}                             its client went away
//   worker -> supervisor   {"ready": {}}                             the model is loaded
//                          {"text": {"id": N, "text": "..."}}        a piece of request N's reply
//                          {"end": {"id": N, "outcome": {...}}}      request N ended (finish reason or error)
//                          {"gauges": {...}}                         the engine's state, every half second
//
// docs/serving.md describes it for people.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/server/completion_runner.hpp"
#include "core/server/metrics.hpp"
#include "core/server/openai_request.hpp"

namespace strata::server {

// A frame larger than this is refused: nothing the two sides send comes near it.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// Writes one frame; throws strata::Error where the other side is gone.
void write_frame(int fd, const nlohmann::json& message);
// The next frame, or nothing at the end of the stream; throws strata::Error for a broken one.
std::optional<nlohmann::json> read_frame(int fd);

nlohmann::json request_to_json(const CompletionRequest& request);
CompletionRequest request_from_json(const nlohmann::json& json);

// An outcome and the gauges cross as JSON objects of their fields (nlohmann's to_json/from_json).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CompletionOutcome, finish_reason, prompt_tokens, completion_tokens, cached_tokens,
                                   queue_seconds, error, status)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MetricsGauges, running, waiting, step_age_seconds, kv_cache_usage, batch_slots,
                                   expert_slots, pool_workers, expert_hit_rate, worker_state, worker_restarts)

}  // namespace strata::server
