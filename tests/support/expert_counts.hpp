// Helpers of the expert placement tests: hand-made routing counts, a plan's experts.
#pragma once

#include <string>
#include <vector>

#include "core/experts/expert_plan.hpp"
#include "core/experts/routing_counts.hpp"

namespace strata::test {

// Counts from rows[layer][expert].
inline RoutingCounts counts_of(const std::vector<std::vector<double>>& rows) {
  RoutingCounts counts(static_cast<int32_t>(rows.size()), static_cast<int32_t>(rows[0].size()));
  for (size_t layer = 0; layer < rows.size(); ++layer) {
    for (size_t expert = 0; expert < rows[layer].size(); ++expert) {
      counts.set(static_cast<int32_t>(layer), static_cast<int32_t>(expert), rows[layer][expert]);
    }
  }
  return counts;
}

// The experts in a layer's slots, in slot order.
inline std::vector<int32_t> experts_in(const ExpertPlan& plan, int32_t layer) {
  std::vector<int32_t> experts;
  for (int32_t slot = 0; slot < plan.slots(layer); ++slot) experts.push_back(plan.expert_in(layer, slot));
  return experts;
}

}  // namespace strata::test
