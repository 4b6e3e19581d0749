// How often the router chose each (layer, expert): what an expert profile stores, what the adaptive tier decays,
// and what the planner ranks experts by.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace strata {

class RoutingCounts {
 public:
  RoutingCounts() = default;
  RoutingCounts(int32_t n_layer, int32_t n_expert);

  int32_t n_layer() const { return n_layer_; }
  int32_t n_expert() const { return n_expert_; }
  double at(int32_t layer, int32_t expert) const { return counts_[index(layer, expert)]; }
  void set(int32_t layer, int32_t expert, double count) { counts_[index(layer, expert)] = count; }
  // One layer's counts, n_expert values.
  std::span<const double> layer(int32_t layer) const;
  // Counts every chosen expert id of a step's layer once; ids outside [0, n_expert) throw strata::Error.
  void add(int32_t layer, std::span<const int32_t> ids);
  // Every count times factor (the adaptive tier's decay, in [0, 1]).
  void scale(double factor);
  // The sum of all counts: the (token, expert) pairs seen.
  double total() const;
  bool empty() const { return counts_.empty(); }

 private:
  size_t index(int32_t layer, int32_t expert) const {
    return static_cast<size_t>(layer) * static_cast<size_t>(n_expert_) + static_cast<size_t>(expert);
  }

  int32_t n_layer_ = 0, n_expert_ = 0;
  std::vector<double> counts_;
};

}  // namespace strata
