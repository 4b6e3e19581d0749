#include "core/sampling/sampler.hpp"

#include <algorithm>
#include <cmath>
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
  for (size_t i = 0; i < candidates.size(); ++i) sum += p[i] = std::exp(double(candidates[i].logit - max_logit) / temperature);
  for (auto& v : p) v /= sum;
  return p;
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), random_(params.seed) {}

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
  const bool any = params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                   params_.frequency_penalty != 0.0f;
  if (!any || params_.repeat_last_n == 0) return;
  const size_t window = params_.repeat_last_n < 0 ? history.size()
                                                  : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
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
  std::partial_sort(candidates_.begin(), candidates_.begin() + params_.top_k, candidates_.end(),
                    [](const Candidate& a, const Candidate& b) {
                      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
                    });
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
  std::erase_if(candidates_, [&](const Candidate& c) { return c.logit < threshold; });
}

int32_t Sampler::draw() {
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
