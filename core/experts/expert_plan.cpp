#include "core/experts/expert_plan.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/util/error.hpp"

namespace strata {

ExpertPlan ExpertPlan::rank(int32_t n_layer, int32_t n_expert, int64_t n_slots, const RoutingCounts& counts) {
  if (n_layer < 1 || n_expert < 1) throw Error("an expert plan needs at least one layer and one expert");
  if (!counts.empty() && (counts.n_layer() != n_layer || counts.n_expert() != n_expert)) {
    throw Error("the routing counts are for " + std::to_string(counts.n_layer()) + " layers of " +
                std::to_string(counts.n_expert()) + " experts, the model has " + std::to_string(n_layer) + " of " +
                std::to_string(n_expert));
  }
  const int64_t all = int64_t{n_layer} * n_expert;
  const int64_t taken = std::clamp<int64_t>(n_slots, 0, all);
  // Best first; among equal counts an expert of a lower index, then of a lower layer: uniform counts give
  // every layer expert 0, then expert 1, ..., so the slots spread evenly.
  std::vector<int64_t> order(static_cast<size_t>(all));
  std::iota(order.begin(), order.end(), 0);
  const auto count_of = [&](int64_t i) {
    return counts.empty() ? 0.0 : counts.at(static_cast<int32_t>(i / n_expert), static_cast<int32_t>(i % n_expert));
  };
  std::partial_sort(order.begin(), order.begin() + taken, order.end(), [&](int64_t a, int64_t b) {
    const double ca = count_of(a), cb = count_of(b);
    if (ca != cb) return ca > cb;
    if (a % n_expert != b % n_expert) return a % n_expert < b % n_expert;
    return a / n_expert < b / n_expert;
  });

  ExpertPlan plan;
  plan.n_expert_ = n_expert;
  plan.expert_in_slot_.assign(n_layer, {});
  plan.slot_of_.assign(n_layer, std::vector<int32_t>(n_expert, -1));
  std::vector<std::vector<int32_t>> chosen(n_layer);
  for (int64_t k = 0; k < taken; ++k) {
    chosen[order[k] / n_expert].push_back(static_cast<int32_t>(order[k] % n_expert));
  }
  // Slots in expert order, so that a layer holding all its experts holds them as the file does.
  for (int32_t layer = 0; layer < n_layer; ++layer) {
    std::sort(chosen[layer].begin(), chosen[layer].end());
    for (const int32_t expert : chosen[layer]) plan.assign_new_slot(layer, expert);
  }
  return plan;
}

void ExpertPlan::assign_new_slot(int32_t layer, int32_t expert) {
  slot_of_[layer][expert] = static_cast<int32_t>(expert_in_slot_[layer].size());
  expert_in_slot_[layer].push_back(expert);
}

int64_t ExpertPlan::total_slots() const {
  int64_t total = 0;
  for (const auto& slots : expert_in_slot_) total += static_cast<int64_t>(slots.size());
  return total;
}

bool ExpertPlan::whole_layer(int32_t layer) const {
  const auto& slots = expert_in_slot_[layer];
  if (static_cast<int32_t>(slots.size()) != n_expert_) return false;
  for (int32_t slot = 0; slot < n_expert_; ++slot) {
    if (slots[slot] != slot) return false;
  }
  return true;
}

void ExpertPlan::assign(int32_t layer, int32_t slot, int32_t expert) {
  int32_t& held = expert_in_slot_[layer][slot];
  if (held >= 0) slot_of_[layer][held] = -1;
  held = expert;
  if (expert >= 0) {
    if (slot_of_[layer][expert] >= 0) throw Error("expert plan: an expert assigned to two slots");
    slot_of_[layer][expert] = slot;
  }
}

double ExpertPlan::hit_rate(const RoutingCounts& counts) const {
  const double total = counts.total();
  if (total <= 0.0) return 0.0;
  double hits = 0.0;
  for (int32_t layer = 0; layer < n_layer(); ++layer) {
    for (const int32_t expert : expert_in_slot_[layer]) {
      if (expert >= 0) hits += counts.at(layer, expert);
    }
  }
  return hits / total;
}

}  // namespace strata
