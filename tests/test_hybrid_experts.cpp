// Hybrid expert placement (core/model/hybrid_experts.hpp) with the CPU backend standing in for a GPU (a memory
// budget, the backend option memory_budget_mib): the logits do not depend on which tier ran an expert, the cache
// takes what the budget leaves, a cache that cannot fit fails before allocating, the adaptive tier swaps experts
// in, and the stats count every pair once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>

#include "core/engine/engine.hpp"
#include "core/experts/placement_estimate.hpp"
#include "core/util/error.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

const std::vector<int32_t> kPrompt = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79, 50, 28, 84, 19};
constexpr int32_t kDecodeSteps = 12;
constexpr double kBudgetGib = 0.25;  // the stand-in GPU: far more than a tiny model's dense weights and buffers

struct PlacementRun {
  std::vector<float> logits;  // the prompt's, every position, then one row per decoded token
  ExpertStats stats;
  int64_t slots = 0;
  double pcie_share = 0.0;
  std::vector<std::vector<int32_t>> residents;  // per layer, at the end
};

EngineOptions options_for(const std::filesystem::path& model, const std::string& cache) {
  EngineOptions options;
  options.model = model;
  options.manifest = test::default_manifest_path();
  options.backend = "cpu";
  options.threads = 2;
  options.expert_cache = cache;
  options.vram_budget_gib = kBudgetGib;
  return options;
}

// The prompt in steps of 8 tokens (prompt steps), then greedy decoding one token a step (decode steps).
PlacementRun run(const EngineOptions& options) {
  const Engine engine(options);
  Session session(engine.model(), {.n_ctx = 64, .max_batch = 8, .execution = {}});
  PlacementRun result;
  result.logits = session.forward(kPrompt, true);
  const int32_t n_vocab = engine.model().config().n_vocab;
  auto last = std::vector<float>(result.logits.end() - n_vocab, result.logits.end());
  for (int32_t i = 0; i < kDecodeSteps; ++i) {
    const auto token = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    last = session.forward(std::vector<int32_t>{token}, false);
    result.logits.insert(result.logits.end(), last.begin(), last.end());
  }
  if (const HybridExperts* experts = engine.model().experts()) {
    result.stats = experts->stats();
    result.slots = experts->plan().total_slots();
    result.pcie_share = experts->pcie_share();
    for (int32_t layer = 0; layer < experts->plan().n_layer(); ++layer) {
      std::vector<int32_t> layer_residents;
      for (int32_t e = 0; e < experts->plan().n_expert(); ++e) {
        if (experts->plan().resident(layer, e)) layer_residents.push_back(e);
      }
      result.residents.push_back(layer_residents);
    }
  }
  return result;
}

// Float noise: a split layer adds the tiers' partial sums instead of summing a token's experts in its own order.
void expect_same_logits(const std::vector<float>& expected, const std::vector<float>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  float scale = 0.0f, worst = 0.0f;
  for (size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::fabs(expected[i]));
    worst = std::max(worst, std::fabs(expected[i] - actual[i]));
  }
  EXPECT_LE(worst, 1e-4f * scale) << what << ": largest difference " << worst << " of logits up to " << scale;
}

class HybridExpertsOnModel : public ::testing::TestWithParam<std::string> {
 protected:
  std::filesystem::path model() const { return test::reference_dir() / "models" / GetParam(); }
};

TEST_P(HybridExpertsOnModel, LogitsDoNotDependOnWhereExpertsRun) {
  ASSERT_REFERENCE(model());
  const PlacementRun plain = run(options_for(model(), "off"));
  ASSERT_EQ(plain.slots, 0);

  const PlacementRun resident = run(options_for(model(), "100000"));  // clamped: every expert, whole layers
  expect_same_logits(plain.logits, resident.logits, "all experts resident");
  EXPECT_EQ(resident.stats.pool_pairs, 0);
  EXPECT_EQ(resident.stats.steps, 0) << "whole layers need no split steps";
  EXPECT_DOUBLE_EQ(resident.stats.hit_rate(), 1.0);

  const PlacementRun pooled = run(options_for(model(), "0"));
  expect_same_logits(plain.logits, pooled.logits, "no expert resident");
  EXPECT_EQ(pooled.stats.device_pairs, 0);
  EXPECT_GT(pooled.stats.pool_pairs, 0);

  // A random split: a profile of random counts ranks random experts into half the slots.
  const gguf::Model file(model());
  const ModelConfig config = ModelConfig::from_gguf(file);
  EngineOptions split = options_for(model(), std::to_string(config.n_layer * config.n_expert / 2));
  split.expert_options.profile = RoutingCounts(config.n_layer, config.n_expert);
  std::mt19937 random(7);
  for (int32_t layer = 0; layer < config.n_layer; ++layer) {
    for (int32_t e = 0; e < config.n_expert; ++e) split.expert_options.profile.set(layer, e, random() % 1000);
  }
  const PlacementRun random_split = run(split);
  expect_same_logits(plain.logits, random_split.logits, "a random split");
  EXPECT_GT(random_split.stats.device_pairs, 0);
  EXPECT_GT(random_split.stats.pool_pairs, 0);
  EXPECT_EQ(random_split.stats.pairs(), resident.stats.pairs()) << "every (token, expert) pair runs exactly once";

  // Misses over PCIe into staging slots: half of them, then all.
  EngineOptions half_pcie = options_for(model(), "1");
  half_pcie.expert_options.pcie_fraction = 0.5;
  const PlacementRun staged = run(half_pcie);
  expect_same_logits(plain.logits, staged.logits, "half the misses over PCIe");
  EXPECT_GT(staged.stats.pcie_pairs, 0);
  EXPECT_GT(staged.stats.pool_pairs, 0);
  EXPECT_GT(staged.stats.pcie_bytes, 0);
  // Every missed expert of a prompt step over PCIe through two staging slots: halves of one, filled in turn.
  EngineOptions chunked = options_for(model(), "1");
  chunked.expert_options.pcie_min_tokens = 1;
  chunked.expert_options.pcie_slots = 2;
  const PlacementRun in_sets = run(chunked);
  expect_same_logits(plain.logits, in_sets.logits, "misses over PCIe, one staging slot at a time");
  EXPECT_EQ(in_sets.stats.pool_pairs, 0);
  EXPECT_GT(in_sets.stats.pcie_pairs, 0);
  EngineOptions all_pcie = options_for(model(), "0");
  all_pcie.expert_options.pcie_fraction = 1.0;
  const PlacementRun streamed = run(all_pcie);
  expect_same_logits(plain.logits, streamed.logits, "every miss over PCIe");
  EXPECT_EQ(streamed.stats.pool_pairs, 0);
  EXPECT_EQ(streamed.stats.pcie_pairs, resident.stats.pairs());
}

// --expert-prefetch: a decode step's split layers predict the next layer's experts through its router and copy
// the missed ones ahead; the next layer runs those it chooses from the ahead slots, the rest as before. The
// logits do not change, every pair still runs once, and on these models the prediction is mostly right.
TEST_P(HybridExpertsOnModel, ExpertsCopiedAheadRunWhereChosenAndChangeNoLogits) {
  ASSERT_REFERENCE(model());
  const PlacementRun plain = run(options_for(model(), "off"));
  const gguf::Model file(model());
  const ModelConfig config = ModelConfig::from_gguf(file);
  const std::string quarter = std::to_string(config.n_layer * config.n_expert / 4);
  const int64_t all_pairs = run(options_for(model(), "0")).stats.pairs();
  for (const double pcie_fraction : {0.0, 0.5}) {
    EngineOptions ahead = options_for(model(), quarter);
    ahead.expert_options.pcie_fraction = pcie_fraction;
    ahead.expert_options.prefetch = config.n_expert_used;
    const PlacementRun prefetched = run(ahead);
    const std::string what = "experts copied ahead, a share of " + std::to_string(pcie_fraction) + " over PCIe";
    expect_same_logits(plain.logits, prefetched.logits, what);
    EXPECT_GT(prefetched.stats.prefetched, 0) << what;
    EXPECT_GT(prefetched.stats.prefetch_used, 0) << what;
    EXPECT_LE(prefetched.stats.prefetch_used, prefetched.stats.prefetched) << what;
    EXPECT_GT(prefetched.stats.pcie_pairs, 0) << what;
    EXPECT_EQ(prefetched.stats.pairs(), all_pairs) << what << ": every (token, expert) pair runs exactly once";
  }
}

// --pool-thread 1 on the stand-in (on by default only on a GPU): the pool computes on a thread of its own while the
// caller queues the device's part, with experts copied ahead and half the misses over PCIe, the device waiting for
// the pool's result or the caller; nothing changes but the timing.
TEST_P(HybridExpertsOnModel, PoolOnAThreadOfItsOwnChangesNoLogits) {
  ASSERT_REFERENCE(model());
  const PlacementRun plain = run(options_for(model(), "off"));
  const gguf::Model file(model());
  const ModelConfig config = ModelConfig::from_gguf(file);
  for (const double pcie_fraction : {0.0, 0.5}) {
    EngineOptions beside = options_for(model(), std::to_string(config.n_layer * config.n_expert / 4));
    beside.expert_options.pool_thread = true;
    beside.expert_options.pcie_fraction = pcie_fraction;
    beside.expert_options.prefetch = config.n_expert_used;
    // With a half share over PCIe, the caller waits for the pool before the result's copy (--pool-wait-on-device 0).
    beside.expert_options.device_waits_for_pool = pcie_fraction == 0.0;
    const PlacementRun threaded = run(beside);
    const std::string what =
        "the pool on its own thread, a share of " + std::to_string(pcie_fraction) +
        " over PCIe, the device waiting for it: " + std::to_string(beside.expert_options.device_waits_for_pool);
    expect_same_logits(plain.logits, threaded.logits, what);
    EXPECT_GT(threaded.stats.pool_pairs, 0) << what;
    EXPECT_GT(threaded.stats.device_pairs, 0) << what;
    EXPECT_GT(threaded.stats.pool_ms, 0.0) << what;
  }
}

// --pcie-frac auto times one token's missed experts through each tier when the cache is placed and takes the share
// that keeps both equally busy: within (0, 1), so some misses go over PCIe; the logits do not depend on it.
TEST_P(HybridExpertsOnModel, AutomaticPcieShareIsMeasuredAndChangesNoLogits) {
  ASSERT_REFERENCE(model());
  const PlacementRun plain = run(options_for(model(), "off"));
  EngineOptions automatic = options_for(model(), "1");
  automatic.expert_options.pcie_fraction = std::nullopt;
  const PlacementRun measured = run(automatic);
  expect_same_logits(plain.logits, measured.logits, "--pcie-frac auto");
  EXPECT_GT(measured.pcie_share, 0.0);
  EXPECT_LT(measured.pcie_share, 1.0);
  EXPECT_GT(measured.stats.pcie_pairs, 0);
  EXPECT_EQ(run(options_for(model(), "1")).pcie_share, 0.0) << "the default share is 0";
}

TEST_P(HybridExpertsOnModel, AdaptiveTierSwapsHotExpertsInWithoutChangingLogits) {
  ASSERT_REFERENCE(model());
  const PlacementRun plain = run(options_for(model(), "off"));
  EngineOptions adaptive = options_for(model(), "2");
  adaptive.expert_options.adapt = {.every = 1, .decay = 0.8, .swaps = 2};
  const PlacementRun swapped = run(adaptive);
  expect_same_logits(plain.logits, swapped.logits, "with the adaptive tier");
  EXPECT_GT(swapped.stats.adapt_rounds, 0);
  EXPECT_GT(swapped.stats.adapt_swapped, 0);
  EXPECT_EQ(swapped.slots, 2) << "swaps keep the cache's size";
  const PlacementRun fixed = run(options_for(model(), "2"));
  EXPECT_NE(swapped.residents, fixed.residents) << "the tier moved experts";
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, HybridExpertsOnModel,
                         ::testing::Values("qwen3moe-tiny-iq3_s.gguf", "qwen2moe-tiny-q8_0.gguf"),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.find(".gguf"));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The bytes one expert's three matrices take in a layer (the CPU backend keeps the file's layout).
int64_t expert_bytes(const gguf::Model& file, int32_t layer) {
  const ModelConfig config = ModelConfig::from_gguf(file);
  return static_cast<int64_t>(expert_bytes_per_layer(file, config.n_layer, config.n_expert)[layer]);
}

// What the device holds with an empty cache: the dense weights and the session's memory.
uint64_t used_without_cache(const std::filesystem::path& path) {
  const Engine engine(options_for(path, "0"));
  const Session session(engine.model(), {.n_ctx = 64, .max_batch = 8, .execution = {}});
  return engine.backend().memory_info()->used_bytes;
}

TEST(HybridExperts, AutomaticCacheTakesWhatTheBudgetLeaves) {
  const auto path = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(path);
  const gguf::Model file(path);
  const int64_t per_slot = expert_bytes(file, 0);
  const int64_t reserve = HybridExperts::scratch_reserve(ModelConfig::from_gguf(file), 8);
  // A budget of the rest, the scratch reserve and five and a half experts holds five.
  EngineOptions options = options_for(path, "auto");
  options.vram_budget_gib =
      static_cast<double>(used_without_cache(path) + reserve + 5 * per_slot + per_slot / 2) / double(int64_t{1} << 30);
  const Engine engine(options);
  const Session session(engine.model(), {.n_ctx = 64, .max_batch = 8, .execution = {}});
  EXPECT_EQ(engine.model().experts()->plan().total_slots(), 5);
  const auto info = engine.backend().memory_info();
  ASSERT_TRUE(info.has_value());
  EXPECT_LE(info->used_bytes, info->limit_bytes);
}

// Without --expert-cache, a model that fits with room to spare loads whole (no pool, no placement); one that does
// not is placed automatically.
TEST(HybridExperts, ByDefaultOnlyAModelThatDoesNotFitIsPlaced) {
  const auto path = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(path);
  const gguf::Model file(path);
  EngineOptions options = options_for(path, "");
  const Engine roomy(options);
  EXPECT_EQ(roomy.model().experts(), nullptr);
  EXPECT_EQ(roomy.expert_pool(), nullptr);
  options.vram_budget_gib =
      static_cast<double>(used_without_cache(path) + 3 * expert_bytes(file, 0)) / double(int64_t{1} << 30);
  const Engine tight(options);
  ASSERT_NE(tight.model().experts(), nullptr);
  const Session session(tight.model(), {.n_ctx = 64, .max_batch = 8, .execution = {}});
  EXPECT_LT(tight.model().experts()->plan().total_slots(), 16);
}

TEST(HybridExperts, CacheThatCannotFitFailsBeforeAllocating) {
  const auto path = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(path);
  const gguf::Model file(path);
  EngineOptions options = options_for(path, "16");
  options.vram_budget_gib =
      static_cast<double>(used_without_cache(path) + 3 * expert_bytes(file, 0)) / double(int64_t{1} << 30);
  const Engine engine(options);
  const uint64_t used_before = engine.backend().memory_info()->used_bytes;
  try {
    const Session session(engine.model(), {.n_ctx = 64, .max_batch = 8, .execution = {}});
    FAIL() << "a cache larger than the budget was placed";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("an expert cache of 16 slots needs"), std::string::npos) << message;
    EXPECT_NE(message.find("free"), std::string::npos) << message;
  }
  EXPECT_EQ(engine.backend().memory_info()->used_bytes, used_before) << "nothing of the cache stays allocated";
}

TEST(HybridExperts, BadSettingsAreRefusedNamingTheFlag) {
  const auto path = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(path);
  EXPECT_THROW(
      {
        try {
          const Engine engine(options_for(path, "lots"));
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("--expert-cache"), std::string::npos) << error.what();
          throw;
        }
      },
      Error);
  EngineOptions wrong_profile = options_for(path, "auto");
  wrong_profile.expert_options.profile = RoutingCounts(3, 8);
  EXPECT_THROW(const Engine engine(wrong_profile), Error);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Where the experts live in host memory: page-locked only where the backend offers it and the host has room (with
// 2 GiB to spare); asked for and impossible, an error with the numbers before anything is taken; else the mapped
// file, the slower documented path, with the reason.
TEST(ExpertMemory, PinnedWhereItFitsMappedOtherwise) {
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_TRUE(choose_expert_memory(ExpertMemory::automatic, true, "backend-cuda", 12 * gib, 64 * gib).pinned);
  const auto tight = choose_expert_memory(ExpertMemory::automatic, true, "backend-cuda", 12 * gib, 13 * gib);
  EXPECT_FALSE(tight.pinned);
  EXPECT_NE(tight.reason.find("too little host memory"), std::string::npos) << tight.reason;
  EXPECT_NE(tight.reason.find("12.00 GiB of experts, 13.00 GiB of host memory available"), std::string::npos)
      << tight.reason;
  const auto cpu = choose_expert_memory(ExpertMemory::automatic, false, "backend-cpu", gib, 64 * gib);
  EXPECT_FALSE(cpu.pinned);
  EXPECT_NE(cpu.reason.find("backend-cpu gives no page-locked host memory"), std::string::npos) << cpu.reason;
  EXPECT_FALSE(choose_expert_memory(ExpertMemory::mapped, true, "backend-cuda", gib, 64 * gib).pinned);

  try {
    choose_expert_memory(ExpertMemory::pinned, true, "backend-cuda", 12 * gib, 13 * gib);
    FAIL() << "pinned experts larger than the free memory were accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--host-experts pinned: the experts do not fit: 12.00 GiB"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(choose_expert_memory(ExpertMemory::pinned, false, "backend-cpu", gib, 64 * gib), Error);
  EXPECT_THROW(parse_expert_memory("locked"), Error);
}

}  // namespace
}  // namespace strata
