// What a VRAM budget for experts buys: the slots of a byte budget, and the decode estimate, on hand-made counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/experts/expert_plan.hpp"
#include "core/experts/placement_estimate.hpp"
#include "core/experts/routing_counts.hpp"
#include "core/util/error.hpp"
#include "support/error_message.hpp"
#include "support/expert_counts.hpp"

namespace strata {
namespace {

using test::counts_of;
using test::error_of;
using test::experts_in;

TEST(PlacementEstimate, ABudgetHoldsTheLongestPrefixOfTheRankingThatFits) {
  const RoutingCounts counts = counts_of({{10, 1, 0}, {20, 15, 5}});
  const std::vector<uint64_t> equal = {100, 100};
  EXPECT_EQ(plan_for_budget(2, 3, counts, equal, 0).total_slots(), 0);
  EXPECT_EQ(plan_for_budget(2, 3, counts, equal, 99).total_slots(), 0);
  EXPECT_EQ(plan_for_budget(2, 3, counts, equal, 250).total_slots(), 2);
  EXPECT_EQ(plan_for_budget(2, 3, counts, equal, 600).total_slots(), 6);
  EXPECT_EQ(plan_for_budget(2, 3, counts, equal, uint64_t{1} << 60).total_slots(), 6);

  // Layers of other sizes: the ranking is (1,0) 300 bytes, (1,1) 300, (0,0) 100, (1,2) 300, (0,1) 100 ...
  const std::vector<uint64_t> sizes = {100, 300};
  const ExpertPlan first = plan_for_budget(2, 3, counts, sizes, 350);
  EXPECT_EQ(experts_in(first, 1), (std::vector<int32_t>{0}));
  EXPECT_EQ(experts_in(first, 0), (std::vector<int32_t>{}));  // (0,0) would fit, but (1,1) comes first
  EXPECT_EQ(plan_bytes(first, sizes), 300u);
  const ExpertPlan three = plan_for_budget(2, 3, counts, sizes, 700);
  EXPECT_EQ(experts_in(three, 1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(experts_in(three, 0), (std::vector<int32_t>{0}));
  EXPECT_EQ(plan_bytes(three, sizes), 700u);
}

// dense + per layer max(hits x gpu, misses x pool), a layer's hits from its own share of the counts.
TEST(PlacementEstimate, DecodeTimeIsDensePlusTheSlowerTierOfEachLayer) {
  const RoutingCounts counts = counts_of({{30, 10, 0, 0}, {25, 25, 25, 25}});
  const ExpertPlan plan = ExpertPlan::rank(2, 4, 2, counts);  // layer 0: expert 0; layer 1: expert 0
  TierTimes times;
  times.dense_us = 1000;
  times.gpu_expert_us = 2;
  times.pool_expert_us = {40, 20};
  const DecodeEstimate estimate = estimate_decode(plan, counts, 2, times);
  // Layer 0: hits 2 x 0.75 = 1.5 (3 us), misses 0.5 (20 us); layer 1: hits 0.5 (1 us), misses 1.5 (30 us).
  EXPECT_DOUBLE_EQ(estimate.hit_rate, 55.0 / 140.0);
  EXPECT_DOUBLE_EQ(estimate.expert_us, 20.0 + 30.0);
  EXPECT_DOUBLE_EQ(estimate.us_per_token, 1050.0);
  EXPECT_DOUBLE_EQ(estimate.tokens_per_second, 1e6 / 1050.0);

  // Everything resident: the GPU's time alone; nothing resident: the pool's.
  const DecodeEstimate all = estimate_decode(ExpertPlan::rank(2, 4, 8, counts), counts, 2, times);
  EXPECT_DOUBLE_EQ(all.expert_us, 2 * 2.0 + 2 * 2.0);
  const DecodeEstimate none = estimate_decode(ExpertPlan::rank(2, 4, 0, counts), counts, 2, times);
  EXPECT_DOUBLE_EQ(none.expert_us, 2 * 40.0 + 2 * 20.0);

  // A layer without counts takes its share of slots as its hit rate.
  RoutingCounts empty_layer = counts;
  for (int32_t expert = 0; expert < 4; ++expert) empty_layer.set(1, expert, 0.0);
  const DecodeEstimate half = estimate_decode(ExpertPlan::rank(2, 4, 2, RoutingCounts()), empty_layer, 2, times);
  EXPECT_DOUBLE_EQ(half.expert_us, 20.0 + 1.5 * 20.0);

  times.pool_expert_us = {40};
  EXPECT_NE(error_of([&] { estimate_decode(plan, counts, 2, times); }).find("CPU pool times for 1 layers"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
