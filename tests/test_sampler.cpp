// The sampler: greedy, top-k, top-p, min-p, penalties with llama.cpp's semantics, seeds, temperature; the
// parameters' ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/sampling/sampler.hpp"
#include "core/util/error.hpp"

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

TEST(Sampler, MinPOfOneKeepsOnlyTheBest) {
  auto params = plain(5.0f);
  params.min_p = 1.0f;
  const auto seen = counts(params, kLogits, 500);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.begin()->first, 1);
}

// The message check_sampling_params throws for params, or "" when it accepts them.
std::string refusal(const SamplingParams& params) {
  try {
    check_sampling_params(params);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// A value outside a parameter's range (NaN and infinities included) is refused naming its flag, by the check
// and by a Sampler, which would otherwise run on it (--min-p 1.5 dropped every candidate, then read past the
// empty list).
TEST(SamplingParams, ValuesOutsideTheirRangesAreRefusedNamingTheFlag) {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* flag;
    std::function<void(SamplingParams&)> bend;
  };
  const Case cases[] = {
      {"--temp", [](SamplingParams& p) { p.temperature = nan; }},
      {"--temp", [](SamplingParams& p) { p.temperature = -0.5f; }},
      {"--temp", [](SamplingParams& p) { p.temperature = inf; }},
      {"--top-k", [](SamplingParams& p) { p.top_k = -1; }},
      {"--top-p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"--top-p", [](SamplingParams& p) { p.top_p = 1.5f; }},
      {"--top-p", [](SamplingParams& p) { p.top_p = nan; }},
      {"--min-p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"--min-p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"--min-p", [](SamplingParams& p) { p.min_p = nan; }},
      {"--repeat-penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"--repeat-penalty", [](SamplingParams& p) { p.repetition_penalty = -1.0f; }},
      {"--repeat-penalty", [](SamplingParams& p) { p.repetition_penalty = nan; }},
      {"--repeat-penalty", [](SamplingParams& p) { p.repetition_penalty = inf; }},
      {"--presence-penalty", [](SamplingParams& p) { p.presence_penalty = nan; }},
      {"--presence-penalty", [](SamplingParams& p) { p.presence_penalty = -inf; }},
      {"--frequency-penalty", [](SamplingParams& p) { p.frequency_penalty = inf; }},
      {"--repeat-last-n", [](SamplingParams& p) { p.repeat_last_n = -2; }},
  };
  for (const Case& c : cases) {
    SamplingParams params;
    c.bend(params);
    const std::string message = refusal(params);
    EXPECT_EQ(message.rfind(std::string(c.flag) + " is ", 0), 0u) << c.flag << ": " << message;
    EXPECT_THROW(Sampler{params}, Error) << c.flag;
  }
}

TEST(SamplingParams, TheEdgesOfEachRangeAreAccepted) {
  SamplingParams edges;
  edges.temperature = 0.0f;
  edges.top_k = 0;
  edges.top_p = 1.0f;
  edges.min_p = 1.0f;
  edges.repetition_penalty = 1e-6f;
  edges.presence_penalty = -2.0f;
  edges.frequency_penalty = -2.0f;
  edges.repeat_last_n = -1;
  edges.seed = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(refusal(edges), "");
  edges.min_p = 0.0f;
  edges.top_p = std::numeric_limits<float>::min();
  edges.repeat_last_n = 0;
  EXPECT_EQ(refusal(edges), "");
  EXPECT_EQ(refusal(SamplingParams{}), "");
}

}  // namespace
}  // namespace strata
