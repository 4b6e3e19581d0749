// The sampler: greedy, top-k, top-p, min-p, penalties with llama.cpp's semantics, seeds, temperature.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/sampling/sampler.hpp"

namespace strata {
namespace {

// Everything off: a plain draw from softmax(logits / temperature).
SamplingParams plain(float temperature = 1.0f, uint64_t seed = 7) {
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = 0;
  params.top_p = 1.0f;
  params.min_p = 0.0f;
  params.seed = seed;
  return params;
}

std::map<int32_t, int> counts(const SamplingParams& params, const std::vector<float>& logits, int draws,
                              const std::vector<int32_t>& history = {}) {
  Sampler sampler(params);
  std::map<int32_t, int> seen;
  for (int i = 0; i < draws; ++i) ++seen[sampler.sample(logits, history)];
  return seen;
}

std::vector<double> softmax(const std::vector<float>& logits) {
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(double(logits[i]));
  for (auto& v : p) v /= sum;
  return p;
}

const std::vector<float> kLogits = {1.0f, 3.0f, -2.0f, 2.5f, 0.0f, 2.9f, -1.0f, 0.5f};  // argmax 1

TEST(Sampler, GreedyPicksTheArgmax) {
  Sampler sampler(plain(0.0f));
  EXPECT_EQ(sampler.sample(kLogits, {}), 1);
  const std::vector<float> negative = {-5.0f, -1.5f, -3.0f};
  EXPECT_EQ(sampler.sample(negative, {}), 1);
}

TEST(Sampler, TopKOfOneEqualsGreedy) {
  auto params = plain(1.5f);
  params.top_k = 1;
  const auto seen = counts(params, kLogits, 500);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.begin()->first, 1);
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  auto params = plain(5.0f);  // hot, so that every kept token shows up
  params.top_k = 3;
  const auto seen = counts(params, kLogits, 3000);
  EXPECT_EQ(seen.size(), 3u);
  for (const auto& [token, n] : seen) EXPECT_TRUE(token == 1 || token == 5 || token == 3) << token;
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const auto p = softmax(kLogits);  // sorted: 1 (.36), 5 (.32), 3 (.22), ...: 1+5 = .68, +3 = .90
  ASSERT_LT(p[1] + p[5], 0.8);
  ASSERT_GT(p[1] + p[5] + p[3], 0.8);
  auto params = plain(5.0f);
  params.top_p = 0.8f;
  const auto seen = counts(params, kLogits, 3000);
  EXPECT_EQ(seen.size(), 3u);
  for (const auto& [token, n] : seen) EXPECT_TRUE(token == 1 || token == 5 || token == 3) << token;
}

TEST(Sampler, MinPDropsTokensBelowAShareOfTheBest) {
  // p_i / p_max = exp(l_i - 3): token 3 (2.5) -> .61, token 0 (1.0) -> .14, token 7 (0.5) -> .08.
  auto params = plain(5.0f);
  params.min_p = 0.1f;
  const auto seen = counts(params, kLogits, 5000);
  EXPECT_EQ(seen.size(), 4u);  // 1, 5, 3, 0
  for (const auto& [token, n] : seen) EXPECT_TRUE(token == 1 || token == 5 || token == 3 || token == 0) << token;
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  auto params = plain(0.0f);
  params.repetition_penalty = 1.5f;
  Sampler sampler(params);
  // Token 1 (3.0) seen: 2.0 < 2.9, so token 5 wins.
  EXPECT_EQ(sampler.sample(kLogits, std::vector<int32_t>{1}), 5);
  // Negative logits are multiplied: -1.0 * 1.5 = -1.5 loses to -1.2; unpenalized -1.0 would win.
  const std::vector<float> negative = {-1.0f, -1.2f};
  EXPECT_EQ(sampler.sample(negative, {}), 0);
  EXPECT_EQ(sampler.sample(negative, std::vector<int32_t>{0}), 1);
}

TEST(Sampler, PenaltiesSeeOnlyTheLastNTokens) {
  auto params = plain(0.0f);
  params.repetition_penalty = 1.5f;
  params.repeat_last_n = 2;
  Sampler sampler(params);
  EXPECT_EQ(sampler.sample(kLogits, std::vector<int32_t>{1, 4, 6}), 1);  // 1 is out of the window
  EXPECT_EQ(sampler.sample(kLogits, std::vector<int32_t>{4, 1}), 5);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtract) {
  auto presence = plain(0.0f);
  presence.presence_penalty = 0.2f;  // 3.0 - 0.2 = 2.8 < 2.9, however often 1 was seen
  EXPECT_EQ(Sampler(presence).sample(kLogits, std::vector<int32_t>{1}), 5);
  presence.presence_penalty = 0.05f;
  EXPECT_EQ(Sampler(presence).sample(kLogits, std::vector<int32_t>{1, 1, 1}), 1);

  auto frequency = plain(0.0f);
  frequency.frequency_penalty = 0.05f;  // per occurrence: 3.0 - 0.05 n
  EXPECT_EQ(Sampler(frequency).sample(kLogits, std::vector<int32_t>{1}), 1);
  EXPECT_EQ(Sampler(frequency).sample(kLogits, std::vector<int32_t>{1, 1, 1}), 5);
}

TEST(Sampler, SameSeedSameSequence) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(i * 0.37) * 3.0);
  SamplingParams params;  // the defaults: top-k, top-p and min-p all on
  params.temperature = 1.2f;
  params.seed = 1234;
  Sampler a(params), b(params);
  params.seed = 1235;
  Sampler c(params);
  std::vector<int32_t> from_a, from_b, from_c;
  for (int i = 0; i < 200; ++i) {
    from_a.push_back(a.sample(logits, from_a));
    from_b.push_back(b.sample(logits, from_b));
    from_c.push_back(c.sample(logits, from_c));
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_NE(from_a, from_c);
}

TEST(Sampler, DrawFrequenciesFollowTheTemperedSoftmax) {
  for (const float temperature : {0.5f, 1.0f, 2.0f}) {
    std::vector<float> tempered(kLogits);
    for (auto& l : tempered) l /= temperature;
    const auto p = softmax(tempered);
    const int draws = 40000;
    const auto seen = counts(plain(temperature, 99), kLogits, draws);
    for (size_t token = 0; token < p.size(); ++token) {
      const double observed = seen.contains(token) ? seen.at(token) / double(draws) : 0.0;
      // 5 binomial standard deviations
      EXPECT_NEAR(observed, p[token], 5 * std::sqrt(p[token] * (1 - p[token]) / draws) + 1e-4)
          << "temperature " << temperature << " token " << token;
    }
  }
}

}  // namespace
}  // namespace strata
