// Routing counts and the expert plan (ranked slots over all layers), on hand-made counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/experts/expert_plan.hpp"
#include "core/experts/routing_counts.hpp"
#include "core/util/error.hpp"
#include "support/error_message.hpp"
#include "support/expert_counts.hpp"

namespace strata {
namespace {

using test::counts_of;
using test::error_of;
using test::experts_in;

// ---------------------------------------------------------------------------------------------------------
// RoutingCounts

TEST(RoutingCounts, AddsEveryChosenIdOnceAndSums) {
  RoutingCounts counts(2, 4);
  EXPECT_EQ(counts.n_layer(), 2);
  EXPECT_EQ(counts.n_expert(), 4);
  EXPECT_FALSE(counts.empty());
  EXPECT_EQ(counts.total(), 0.0);
  const std::vector<int32_t> step = {1, 3, 1, 0};  // two tokens, two experts each
  counts.add(1, step);
  counts.add(0, std::vector<int32_t>{2});
  EXPECT_EQ(counts.at(1, 1), 2.0);
  EXPECT_EQ(counts.at(1, 3), 1.0);
  EXPECT_EQ(counts.at(1, 0), 1.0);
  EXPECT_EQ(counts.at(0, 2), 1.0);
  EXPECT_EQ(counts.at(0, 1), 0.0);
  EXPECT_EQ(counts.total(), 5.0);
  const auto layer = counts.layer(1);
  EXPECT_EQ(std::vector<double>(layer.begin(), layer.end()), (std::vector<double>{1, 2, 0, 1}));
  counts.scale(0.5);
  EXPECT_EQ(counts.at(1, 1), 1.0);
  EXPECT_EQ(counts.total(), 2.5);
  EXPECT_TRUE(RoutingCounts().empty());
}

TEST(RoutingCounts, RefusesIdsAndLayersOutsideTheModel) {
  RoutingCounts counts(2, 4);
  const std::string expert = error_of([&] { counts.add(0, std::vector<int32_t>{0, 4}); });
  EXPECT_NE(expert.find("expert id 4 in layer 0 is outside the 4 experts"), std::string::npos) << expert;
  EXPECT_NE(error_of([&] { counts.add(0, std::vector<int32_t>{-1}); }).find("expert id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { counts.add(2, std::vector<int32_t>{0}); }).find("layer 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([] { RoutingCounts(0, 4); }).find("at least one layer and one expert"), std::string::npos);
  EXPECT_NE(error_of([] { RoutingCounts(2, 0); }).find("at least one layer and one expert"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
// ExpertPlan::rank

// Without counts, or with equal ones, every layer gets expert 0, then expert 1, ...: the slots spread evenly
// over the layers, the first layers taking the remainder.
TEST(ExpertPlan, UniformCountsSpreadTheSlotsEvenly) {
  RoutingCounts equal(4, 8);
  for (int32_t layer = 0; layer < 4; ++layer) {
    for (int32_t expert = 0; expert < 8; ++expert) equal.set(layer, expert, 5.0);
  }
  for (const RoutingCounts& counts : {equal, RoutingCounts()}) {  // equal counts, and none
    const ExpertPlan plan = ExpertPlan::rank(4, 8, 14, counts);
    EXPECT_EQ(plan.n_layer(), 4);
    EXPECT_EQ(plan.n_expert(), 8);
    EXPECT_EQ(plan.total_slots(), 14);
    EXPECT_EQ(experts_in(plan, 0), (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(experts_in(plan, 1), (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(experts_in(plan, 2), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(experts_in(plan, 3), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_FALSE(plan.whole_layer(0));
  }
  EXPECT_DOUBLE_EQ(ExpertPlan::rank(4, 8, 16, equal).hit_rate(equal), 0.5);
}

// The hottest (layer, expert) pairs win wherever their layer is: one layer may hold several, another none.
TEST(ExpertPlan, SkewedCountsTakeTheHottestExpertsWhereverTheirLayer) {
  const RoutingCounts counts = counts_of({{1, 2, 90, 0},  //
                                          {0, 0, 0, 1},
                                          {100, 3, 80, 70}});
  const ExpertPlan plan = ExpertPlan::rank(3, 4, 4, counts);
  EXPECT_EQ(experts_in(plan, 0), (std::vector<int32_t>{2}));
  EXPECT_EQ(experts_in(plan, 1), (std::vector<int32_t>{}));
  EXPECT_EQ(experts_in(plan, 2), (std::vector<int32_t>{0, 2, 3}));  // slots in expert order
  EXPECT_TRUE(plan.resident(2, 3));
  EXPECT_FALSE(plan.resident(2, 1));
  EXPECT_EQ(plan.slot_of(2, 2), 1);
  EXPECT_EQ(plan.slot_of(1, 3), -1);
  EXPECT_DOUBLE_EQ(plan.hit_rate(counts), (90.0 + 100 + 80 + 70) / 347.0);
}

TEST(ExpertPlan, SlotsAreClampedToTheModel) {
  const RoutingCounts counts = counts_of({{1, 2}, {3, 4}});
  const ExpertPlan none = ExpertPlan::rank(2, 2, -5, counts);
  EXPECT_EQ(none.total_slots(), 0);
  EXPECT_EQ(none.slots(0), 0);
  EXPECT_EQ(none.hit_rate(counts), 0.0);
  const ExpertPlan all = ExpertPlan::rank(2, 2, 1000, counts);
  EXPECT_EQ(all.total_slots(), 4);
  EXPECT_TRUE(all.whole_layer(0));
  EXPECT_TRUE(all.whole_layer(1));
  EXPECT_EQ(all.hit_rate(counts), 1.0);
  EXPECT_EQ(all.hit_rate(RoutingCounts(2, 2)), 0.0);  // nothing counted
  const std::string shape = error_of([&] { ExpertPlan::rank(3, 2, 1, counts); });
  EXPECT_NE(shape.find("the routing counts are for 2 layers of 2 experts, the model has 3 of 2"), std::string::npos)
      << shape;
  EXPECT_NE(error_of([] { ExpertPlan::rank(0, 2, 1, RoutingCounts()); }).find("at least one layer"), std::string::npos);
}

// A layer is whole only with every expert resident in slot order: the layer then runs as the file's tensor.
TEST(ExpertPlan, WholeLayerNeedsEveryExpertInItsOwnSlot) {
  const RoutingCounts counts = counts_of({{9, 9, 9}, {1, 0, 0}});
  ExpertPlan plan = ExpertPlan::rank(2, 3, 4, counts);
  EXPECT_TRUE(plan.whole_layer(0));
  EXPECT_FALSE(plan.whole_layer(1));
  plan.assign(0, 0, -1);  // a slot being refilled
  EXPECT_FALSE(plan.whole_layer(0));
  plan.assign(0, 0, 0);
  EXPECT_TRUE(plan.whole_layer(0));
}

// assign moves a slot to another expert: the old one is no longer resident, the new one is found in that slot;
// an expert cannot sit in two slots.
TEST(ExpertPlan, AssignSwapsASlotsExpert) {
  const RoutingCounts counts = counts_of({{5, 4, 1, 0}});
  ExpertPlan plan = ExpertPlan::rank(1, 4, 2, counts);
  ASSERT_EQ(experts_in(plan, 0), (std::vector<int32_t>{0, 1}));
  plan.assign(0, 1, 3);
  EXPECT_EQ(experts_in(plan, 0), (std::vector<int32_t>{0, 3}));
  EXPECT_FALSE(plan.resident(0, 1));
  EXPECT_EQ(plan.slot_of(0, 3), 1);
  EXPECT_DOUBLE_EQ(plan.hit_rate(counts), 0.5);
  plan.assign(0, 0, -1);
  EXPECT_FALSE(plan.resident(0, 0));
  EXPECT_EQ(plan.expert_in(0, 0), -1);
  EXPECT_EQ(plan.total_slots(), 2);  // an emptied slot is still a slot
  EXPECT_DOUBLE_EQ(plan.hit_rate(counts), 0.0);
  EXPECT_NE(error_of([&] { plan.assign(0, 0, 3); }).find("an expert assigned to two slots"), std::string::npos);
}

}  // namespace
}  // namespace strata
