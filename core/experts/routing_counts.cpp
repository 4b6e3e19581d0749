#include "core/experts/routing_counts.hpp"

#include <numeric>
#include <string>

#include "core/util/error.hpp"

namespace strata {

RoutingCounts::RoutingCounts(int32_t n_layer, int32_t n_expert)
    : n_layer_(n_layer), n_expert_(n_expert), counts_(static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert)) {
  if (n_layer < 1 || n_expert < 1) {
    throw Error("routing counts need at least one layer and one expert (got " + std::to_string(n_layer) + " and " +
                std::to_string(n_expert) + ")");
  }
}

std::span<const double> RoutingCounts::layer(int32_t layer) const {
  return std::span<const double>(counts_).subspan(index(layer, 0), static_cast<size_t>(n_expert_));
}

void RoutingCounts::add(int32_t layer, std::span<const int32_t> ids) {
  if (layer < 0 || layer >= n_layer_) throw Error("routing counts: layer " + std::to_string(layer) + " out of range");
  for (const int32_t expert : ids) {
    if (expert < 0 || expert >= n_expert_) {
      throw Error("routing counts: expert id " + std::to_string(expert) + " in layer " + std::to_string(layer) +
                  " is outside the " + std::to_string(n_expert_) + " experts");
    }
    counts_[index(layer, expert)] += 1.0;
  }
}

void RoutingCounts::scale(double factor) {
  for (double& count : counts_) count *= factor;
}

double RoutingCounts::total() const { return std::accumulate(counts_.begin(), counts_.end(), 0.0); }

}  // namespace strata
