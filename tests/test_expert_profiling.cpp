// The profiling run of `strata profile`: its prompts file; the counts it makes; and the replay check of expert
// placement: a profile made from one routing trace of a synthetic model with skewed routing predicts the hit rate
// a plan reaches when another trace (other prompts) is replayed against it. On the trace the profile came from,
// prediction and replay agree exactly; on another, within the sampling error of the two traces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "core/engine/expert_profiling.hpp"
#include "core/experts/expert_plan.hpp"
#include "core/experts/placement_estimate.hpp"
#include "core/plugin/manifest.hpp"
#include "core/plugin/plugin_host.hpp"
#include "core/synth/synth_model.hpp"
#include "core/util/error.hpp"
#include "support/error_message.hpp"
#include "support/expert_counts.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

using test::error_of;

// ---------------------------------------------------------------------------------------------------------
// The prompts file of strata profile

TEST(Prompts, OneALineWithEmptyLinesSkipped) {
  const auto prompts = parse_prompts("first prompt\r\n\n   \nsecond\tprompt\n\nlast", "p.txt", false);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].text, "first prompt");
  EXPECT_EQ(prompts[0].line, 1);
  EXPECT_EQ(prompts[1].text, "second\tprompt");
  EXPECT_EQ(prompts[1].line, 4);
  EXPECT_EQ(prompts[2].text, "last");
  EXPECT_EQ(prompts[2].line, 6);
}

TEST(Prompts, JsonLinesHoldOneStringEach) {
  const auto prompts = parse_prompts("\"a\\nb\"\n\n\"\\u00e9t\\u00e9\"\n", "p.jsonl", true);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].text, "a\nb");
  EXPECT_EQ(prompts[1].text, "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(prompts[1].line, 3);
  EXPECT_EQ(
      error_of([] { parse_prompts("\"ok\"\nplain text\n", "p.jsonl", true); }).rfind("p.jsonl:2: not a JSON string", 0),
      0u);
  EXPECT_EQ(error_of([] {
              parse_prompts("{\"prompt\": 1}", "p.jsonl", true);
            }).rfind("p.jsonl:1: expected a JSON string, found object", 0),
            0u);
}

TEST(Prompts, AFileWithoutPromptsIsRefused) {
  EXPECT_EQ(error_of([] { parse_prompts("\n \n\r\n", "p.txt", false); }).rfind("p.txt: holds no prompt", 0), 0u);
  EXPECT_EQ(error_of([] { parse_prompts("", "p.txt", true); }).rfind("p.txt: holds no prompt", 0), 0u);
}

// ---------------------------------------------------------------------------------------------------------
// Routing traces

constexpr int32_t kPromptTokens = 40;
constexpr int32_t kDecode = 4;
constexpr int32_t kPrompts = 48;

// One layer's routing in one step: [n_tokens][n_used] expert ids.
struct RoutingEvent {
  int32_t layer = 0;
  std::vector<int32_t> ids;
};
using Trace = std::vector<RoutingEvent>;

// A synthetic qwen3moe of 4 layers x 16 experts (2 used) whose routers favour a few experts per layer (routing
// skew 1.5: top-1 popularity roughly Zipf with that exponent, docs/synth.md), on the CPU backend.
class ExpertReplay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = std::filesystem::temp_directory_path() / ("strata-test-replay-" + std::to_string(::getpid()) + ".gguf");
    synth::SynthOptions options;
    options.shape = synth::preset_shape(synth::Arch::qwen3moe, "tiny");
    options.shape.n_layer = 4;
    options.shape.n_expert = 16;
    options.shape.n_expert_used = 2;
    options.mix = synth::QuantMix::q8_0;
    options.seed = 11;
    options.routing_skew = 1.5f;
    options.threads = 2;
    {
      const auto plugins = PluginHost::open(load_manifest(test::default_manifest_path()));
      synth::synthesize(options, plugins->quants(), path_);
    }
    EngineOptions engine;
    engine.model = path_;
    engine.manifest = test::default_manifest_path();
    engine.backend = "cpu";
    engine.threads = 2;
    engine_ = new Engine(engine);
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
    std::filesystem::remove(path_);
  }

  static const Model& model() { return engine_->model(); }

  // count prompts of kPromptTokens uniform random tokens.
  static std::vector<std::vector<int32_t>> random_prompts(int32_t count, uint32_t seed) {
    std::mt19937 random(seed);
    std::uniform_int_distribution<int32_t> token(0, model().config().n_vocab - 1);
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(count));
    for (auto& prompt : prompts) {
      for (int32_t i = 0; i < kPromptTokens; ++i) prompt.push_back(token(random));
    }
    return prompts;
  }

  static SessionOptions session_options() {
    SessionOptions options;
    options.n_ctx = kPromptTokens + kDecode;
    return options;
  }

  // Every layer's routing, step by step, of each prompt read and kDecode tokens decoded greedily after it: what
  // profile_routing counts.
  static Trace record(const std::vector<std::vector<int32_t>>& prompts) {
    Trace trace;
    SessionOptions options = session_options();
    options.on_routing = [&](int32_t layer, std::span<const int32_t> ids) {
      trace.push_back({layer, std::vector<int32_t>(ids.begin(), ids.end())});
    };
    Session session(model(), options);
    for (const auto& prompt : prompts) {
      session.rewind(0);
      std::span<const float> logits = session.forward_last(prompt);
      for (int32_t step = 0; step < kDecode; ++step) {
        const auto token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        logits = session.forward_last(std::span(&token, 1));
      }
    }
    return trace;
  }

  static RoutingCounts counts_of(const Trace& trace) {
    RoutingCounts counts(model().config().n_layer, model().config().n_expert);
    for (const RoutingEvent& event : trace) counts.add(event.layer, event.ids);
    return counts;
  }

  // The share of the trace's (token, expert) pairs whose expert the plan holds, counted pair by pair.
  static double replayed_hit_rate(const ExpertPlan& plan, const Trace& trace) {
    int64_t hits = 0, pairs = 0;
    for (const RoutingEvent& event : trace) {
      for (const int32_t expert : event.ids) {
        hits += plan.resident(event.layer, expert) ? 1 : 0;
        ++pairs;
      }
    }
    return static_cast<double>(hits) / static_cast<double>(pairs);
  }

  static inline std::filesystem::path path_;
  static inline Engine* engine_ = nullptr;
};

// profile_routing counts exactly what the session routes, prompt and decode steps alike.
TEST_F(ExpertReplay, ProfilingCountsEveryRoutedPair) {
  const auto prompts = random_prompts(6, 1);
  const RoutingCounts recorded = counts_of(record(prompts));
  const ProfilingResult result = profile_routing(model(), prompts, {}, kDecode, {}, session_options());
  EXPECT_EQ(result.prompts, 6);
  EXPECT_EQ(result.prompt_tokens, 6 * kPromptTokens);
  EXPECT_EQ(result.decoded_tokens, 6 * kDecode);
  const ModelConfig& c = model().config();
  for (int32_t layer = 0; layer < c.n_layer; ++layer) {
    double layer_total = 0.0;
    for (int32_t expert = 0; expert < c.n_expert; ++expert) {
      EXPECT_EQ(result.counts.at(layer, expert), recorded.at(layer, expert)) << layer << " " << expert;
      layer_total += result.counts.at(layer, expert);
    }
    EXPECT_EQ(layer_total, static_cast<double>(6 * (kPromptTokens + kDecode) * c.n_expert_used));
  }
  // An end token stops a decode early; a prompt past the context is refused naming it.
  std::set<int32_t> every_token;
  for (int32_t token = 0; token < c.n_vocab; ++token) every_token.insert(token);
  EXPECT_EQ(profile_routing(model(), prompts, {}, kDecode, every_token, session_options()).decoded_tokens, 0);
  SessionOptions short_context = session_options();
  short_context.n_ctx = kPromptTokens - 1;
  try {
    profile_routing(model(), prompts, {"p.txt:1"}, kDecode, {}, short_context);
    FAIL() << "a prompt longer than the context was read";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind("p.txt:1: the prompt's 40 tokens do not fit the context of 39", 0), 0u)
        << error.what();
  }
}

// The plan made from trace A's profile: replaying A gives exactly the hit rate the profile predicts; replaying B
// (other prompts, the same model) gives it within the sampling error of the two traces.
//
// Tolerance: a hit rate is the mean over tokens of a token's share of hits among its n_layer x n_used pairs, a
// value in [0, 1], whose variance is then at most p (1 - p) (p: its mean). The prompts' tokens are drawn
// independently and uniformly, so tokens are close to independent draws (attention mixes in the ~20 tokens
// before, which is why the bound takes a token, not a pair, as the unit), and each rate's standard error is at
// most sqrt(p (1 - p) / T) over T tokens. A's rate also carries a bias of the same order: its plan was chosen on
// A's counts (in-sample), so it favours A's noise. Four standard errors of the difference,
// 4 sqrt(p (1 - p) (1/T_A + 1/T_B)), cover both: about 0.06 at p = 0.5 with 2112 tokens a trace.
TEST_F(ExpertReplay, PredictedHitRatesMatchTheReplay) {
  const Trace trace_a = record(random_prompts(kPrompts, 100));
  const Trace trace_b = record(random_prompts(kPrompts, 200));
  const RoutingCounts counts_a = counts_of(trace_a);
  const ModelConfig& c = model().config();
  const double tokens = kPrompts * (kPromptTokens + kDecode);
  ASSERT_EQ(counts_a.total(), tokens * c.n_layer * c.n_expert_used);

  const auto expert_bytes = expert_bytes_per_layer(engine_->file(), c.n_layer, c.n_expert);
  for (int32_t il = 0; il < c.n_layer; ++il) {
    uint64_t bytes = 0;
    for (const char* m : {"gate", "up", "down"}) {
      bytes += engine_->file().tensor("blk." + std::to_string(il) + ".ffn_" + m + "_exps.weight").bytes;
    }
    EXPECT_EQ(expert_bytes[static_cast<size_t>(il)] * static_cast<uint64_t>(c.n_expert), bytes);
  }
  const uint64_t all_bytes = expert_bytes[0] * static_cast<uint64_t>(c.n_expert * c.n_layer);

  for (const double share : {0.0625, 0.125, 0.25, 0.5}) {
    SCOPED_TRACE("budget " + std::to_string(share) + " of the experts' bytes");
    const auto budget = static_cast<uint64_t>(share * static_cast<double>(all_bytes));
    const ExpertPlan plan = plan_for_budget(c.n_layer, c.n_expert, counts_a, expert_bytes, budget);
    EXPECT_EQ(plan.total_slots(), std::llround(share * c.n_layer * c.n_expert));
    const double predicted = plan.hit_rate(counts_a);
    EXPECT_EQ(replayed_hit_rate(plan, trace_a), predicted);

    const double replayed = replayed_hit_rate(plan, trace_b);
    const double p = std::clamp(predicted, 0.01, 0.99);
    const double tolerance = 4.0 * std::sqrt(p * (1.0 - p) * (2.0 / tokens));
    EXPECT_NEAR(replayed, predicted, tolerance);

    // Not a vacuous match: the skew makes the hot experts worth far more than their share of slots, and the
    // profile's plan beats the uniform one (the same slots spread evenly) on the trace it never saw.
    const ExpertPlan uniform = ExpertPlan::rank(c.n_layer, c.n_expert, plan.total_slots(), RoutingCounts());
    EXPECT_GT(predicted, share + 0.1);
    EXPECT_GT(replayed, replayed_hit_rate(uniform, trace_b) + 0.05);
    std::printf("[          ] slots %lld: predicted %.4f, replayed %.4f (other trace), uniform %.4f, tolerance %.4f\n",
                static_cast<long long>(plan.total_slots()), predicted, replayed, replayed_hit_rate(uniform, trace_b),
                tolerance);
  }
}

}  // namespace
}  // namespace strata
