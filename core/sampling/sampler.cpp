#include "core/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <unordered_map>

#include "core/util/error.hpp"

namespace strata {
namespace {

// Softmax probabilities of candidates (in their order) at a temperature, computed from the largest logit.
template <class Candidates>
std::vector<double> probabilities(const Candidates& candidates, float temperature = 1.0f) {
  float max_logit = -INFINITY;
  for (const auto& c : candidates) max_logit = std::max(max_logit, c.logit);
  std::vector<double> p(candidates.size());
  double sum = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i)
    sum += p[i] = std::exp(double(candidates[i].logit - max_logit) / temperature);
  for (auto& v : p) v /= sum;
  return p;
}

// Throws unless valid, naming the flag, its value and its range.
template <class Value>
void require(bool valid, const char* flag, Value value, const char* range) {
  if (valid) return;
  std::ostringstream message;
  message << flag << " is " << value << "; it must be " << range;
  throw Error(message.str());
}

}  // namespace

void check_sampling_params(const SamplingParams& params, const SamplingParamNames& names) {
  // Written so that NaN fails every test: each condition is true only for a valid value.
  require(params.temperature >= 0.0f && std::isfinite(params.temperature), names.temperature, params.temperature,
          "a finite number >= 0 (0: greedy)");
  require(params.top_k >= 0, names.top_k, params.top_k, ">= 0 (0: off)");
  require(params.top_p > 0.0f && params.top_p <= 1.0f, names.top_p, params.top_p, "in (0, 1] (1: off)");
  require(params.min_p >= 0.0f && params.min_p <= 1.0f, names.min_p, params.min_p, "in [0, 1] (0: off)");
  require(params.repetition_penalty > 0.0f && std::isfinite(params.repetition_penalty), names.repetition_penalty,
          params.repetition_penalty, "a finite number > 0 (1: off)");
  require(std::isfinite(params.presence_penalty), names.presence_penalty, params.presence_penalty,
          "a finite number (0: off)");
  require(std::isfinite(params.frequency_penalty), names.frequency_penalty, params.frequency_penalty,
          "a finite number (0: off)");
  require(params.repeat_last_n >= -1, names.repeat_last_n, params.repeat_last_n,
          ">= -1 (-1: all the history, 0: none)");
}

Sampler::Sampler(const SamplingParams& params) : params_(params), random_(params.seed) {
  check_sampling_params(params);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (logits.empty()) throw Error("sampler: empty logits");
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};
  sorted_ = false;

  apply_penalties(history);
  if (params_.temperature <= 0.0f) {
    return std::max_element(candidates_.begin(), candidates_.end(),
                            [](const Candidate& a, const Candidate& b) { return a.logit < b.logit; })
        ->id;
  }
  keep_top_k();
  keep_top_p();
  keep_min_p();
  return draw();
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const bool any =
      params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!any || params_.repeat_last_n == 0) return;
  const size_t window =
      params_.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
  std::unordered_map<int32_t, int> counts;
  for (const int32_t token : history.last(window)) ++counts[token];
  for (const auto& [token, count] : counts) {
    if (token < 0 || static_cast<size_t>(token) >= candidates_.size()) continue;
    float& logit = candidates_[token].logit;  // still in id order here
    logit = logit <= 0.0f ? logit * params_.repetition_penalty : logit / params_.repetition_penalty;
    logit -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

void Sampler::sort_candidates() {
  if (sorted_) return;
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
  sorted_ = true;
}

void Sampler::keep_top_k() {
  if (params_.top_k <= 0 || static_cast<size_t>(params_.top_k) >= candidates_.size()) return;
  // Only the k best need ordering, which spares a full sort of a 150k vocabulary.
  std::partial_sort(
      candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(),
      [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
  candidates_.resize(static_cast<size_t>(params_.top_k));
  sorted_ = true;
}

void Sampler::keep_top_p() {
  if (params_.top_p >= 1.0f) return;
  sort_candidates();
  const auto p = probabilities(candidates_);
  // The smallest prefix whose mass reaches top_p (at least one token).
  double mass = 0.0;
  size_t keep = 0;
  while (keep < p.size()) {
    mass += p[keep++];
    if (mass >= params_.top_p) break;
  }
  candidates_.resize(keep);
}

void Sampler::keep_min_p() {
  if (params_.min_p <= 0.0f) return;
  // p_i >= min_p * p_max  <=>  logit_i >= logit_max + ln(min_p)
  float max_logit = -INFINITY;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.logit);
  const float threshold = max_logit + std::log(params_.min_p);
  // The best candidate always stays, whatever rounding does to the threshold: a draw needs one.
  std::erase_if(candidates_, [&](const Candidate& c) { return c.logit < threshold && c.logit != max_logit; });
}

int32_t Sampler::draw() {
  if (candidates_.empty()) throw Error("sampler: every candidate token was filtered out");
  const auto p = probabilities(candidates_, params_.temperature);
  // 53 random bits to [0, 1) by hand: std::uniform_real_distribution's output differs between libraries.
  const double u = static_cast<double>(random_() >> 11) * 0x1.0p-53;
  double cumulative = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    cumulative += p[i];
    if (u < cumulative) return candidates_[i].id;
  }
  return candidates_.back().id;  // u beyond a sum rounded below 1
}

}  // namespace strata
