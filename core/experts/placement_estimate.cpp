#include "core/experts/placement_estimate.hpp"

#include <algorithm>
#include <string>

#include "core/util/error.hpp"

namespace strata {

std::vector<uint64_t> expert_bytes_per_layer(const gguf::Model& file, int32_t n_layer, int32_t n_expert) {
  if (n_layer < 1 || n_expert < 1) throw Error("expert sizes need at least one layer and one expert");
  std::vector<uint64_t> bytes(static_cast<size_t>(n_layer), 0);
  for (int32_t il = 0; il < n_layer; ++il) {
    for (const char* matrix : {"gate", "up", "down"}) {
      const auto& tensor = file.tensor("blk." + std::to_string(il) + ".ffn_" + matrix + "_exps.weight");
      if (tensor.bytes % static_cast<uint64_t>(n_expert) != 0) {
        throw Error(file.first().path().string() + ": " + tensor.name + ": its " + std::to_string(tensor.bytes) +
                    " bytes do not split into " + std::to_string(n_expert) + " experts");
      }
      bytes[static_cast<size_t>(il)] += tensor.bytes / static_cast<uint64_t>(n_expert);
    }
  }
  return bytes;
}

uint64_t plan_bytes(const ExpertPlan& plan, const std::vector<uint64_t>& expert_bytes) {
  if (expert_bytes.size() != static_cast<size_t>(plan.n_layer())) {
    throw Error("expert sizes of " + std::to_string(expert_bytes.size()) + " layers for a plan of " +
                std::to_string(plan.n_layer()));
  }
  uint64_t bytes = 0;
  for (int32_t layer = 0; layer < plan.n_layer(); ++layer) {
    bytes += static_cast<uint64_t>(plan.slots(layer)) * expert_bytes[static_cast<size_t>(layer)];
  }
  return bytes;
}

ExpertPlan plan_for_budget(int32_t n_layer, int32_t n_expert, const RoutingCounts& counts,
                           const std::vector<uint64_t>& expert_bytes, uint64_t budget_bytes) {
  // rank(n) holds the first n of one fixed ranking (a strict order: ties go by expert, then layer), so its bytes
  // grow with n: the largest n that fits is found by bisection.
  const auto fits = [&](int64_t n) {
    return plan_bytes(ExpertPlan::rank(n_layer, n_expert, n, counts), expert_bytes) <= budget_bytes;
  };
  int64_t low = 0, high = int64_t{n_layer} * n_expert;  // fits(low) holds
  if (fits(high)) low = high;
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    (fits(middle) ? low : high) = middle;
  }
  return ExpertPlan::rank(n_layer, n_expert, low, counts);
}

DecodeEstimate estimate_decode(const ExpertPlan& plan, const RoutingCounts& counts, int32_t n_expert_used,
                               const TierTimes& times) {
  const int32_t n_layer = plan.n_layer();
  if (counts.n_layer() != n_layer || counts.n_expert() != plan.n_expert()) {
    throw Error("decode estimate: the routing counts are for " + std::to_string(counts.n_layer()) + " layers of " +
                std::to_string(counts.n_expert()) + " experts, the plan for " + std::to_string(n_layer) + " of " +
                std::to_string(plan.n_expert()));
  }
  if (times.pool_expert_us.size() != static_cast<size_t>(n_layer)) {
    throw Error("decode estimate: CPU pool times for " + std::to_string(times.pool_expert_us.size()) +
                " layers, the model has " + std::to_string(n_layer));
  }
  DecodeEstimate estimate;
  estimate.hit_rate = plan.hit_rate(counts);
  for (int32_t layer = 0; layer < n_layer; ++layer) {
    double total = 0.0, resident = 0.0;
    for (int32_t expert = 0; expert < plan.n_expert(); ++expert) {
      total += counts.at(layer, expert);
      if (plan.resident(layer, expert)) resident += counts.at(layer, expert);
    }
    const double share = total > 0.0 ? resident / total : static_cast<double>(plan.slots(layer)) / plan.n_expert();
    const double hits = n_expert_used * share, misses = n_expert_used - hits;
    estimate.expert_us +=
        std::max(hits * times.gpu_expert_us, misses * times.pool_expert_us[static_cast<size_t>(layer)]);
  }
  estimate.us_per_token = times.dense_us + estimate.expert_us;
  estimate.tokens_per_second = estimate.us_per_token > 0.0 ? 1e6 / estimate.us_per_token : 0.0;
  return estimate;
}

}  // namespace strata
