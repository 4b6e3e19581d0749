#include "core/engine/generation.hpp"

#include <algorithm>
#include <limits>

#include "core/util/error.hpp"

namespace strata {

void check_generation_options(const GenerationOptions& options) {
  if (options.max_tokens < 0) {
    throw Error("--max-tokens (-n) is " + std::to_string(options.max_tokens) +
                "; it must be >= 0 (the most tokens to generate)");
  }
  check_sampling_params(options.sampling);
}

int32_t generation_context(size_t prompt_tokens, int32_t max_tokens, int32_t n_ctx_train) {
  // In 64 bits: prompt + max_tokens may not fit an int32 (-n 2147483647).
  const uint64_t needed = prompt_tokens + static_cast<uint64_t>(std::max(max_tokens, 0));
  const bool trained = n_ctx_train > 0;
  const uint64_t limit = trained ? static_cast<uint64_t>(n_ctx_train) : std::numeric_limits<int32_t>::max();
  if (needed > limit) {
    throw Error("the prompt (" + std::to_string(prompt_tokens) + " tokens) and --max-tokens (-n) " +
                std::to_string(max_tokens) + " need a context of " + std::to_string(needed) + " tokens, more than " +
                (trained ? "the model's context_length " : "the largest context, ") + std::to_string(limit) +
                "; lower it, or give --ctx (generation then stops when the context is full)");
  }
  return static_cast<int32_t>(needed);
}

size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt) {
  size_t n = 0;
  while (n < cached.size() && n < prompt.size() && cached[n] == prompt[n]) ++n;
  return prompt.empty() ? 0 : std::min(n, prompt.size() - 1);
}

std::vector<int32_t> generate(Session& session, std::span<const int32_t> prompt, const GenerationOptions& options,
                              const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one token");
  check_generation_options(options);
  Sampler sampler(options.sampling);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<int32_t> generated;
  std::span<const float> logits = session.forward_last(prompt);
  while (static_cast<int32_t>(generated.size()) < options.max_tokens) {
    const int32_t token = sampler.sample(logits, history);
    if (options.end_tokens.contains(token)) break;
    generated.push_back(token);
    history.push_back(token);
    if (!on_token(token)) break;
    if (static_cast<int32_t>(generated.size()) == options.max_tokens) break;
    if (session.position() >= session.context_size()) break;  // the context is full: stop, as a peer does
    logits = session.forward_last(std::span(&token, 1));
  }
  return generated;
}

std::string StopStrings::push(const std::string& text) {
  if (stopped_) return "";
  held_ += text;
  size_t first_stop = std::string::npos;
  for (const auto& stop : stops_) {
    if (!stop.empty()) first_stop = std::min(first_stop, held_.find(stop));
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first_stop);
    held_.clear();
    return out;
  }
  // Keep the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& stop : stops_) {
    if (stop.empty()) continue;
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length) {
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out = stopped_ ? "" : held_;
  held_.clear();
  return out;
}

}  // namespace strata
