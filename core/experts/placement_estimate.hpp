// What a VRAM budget for experts buys (`strata plan`): the slots it holds, the hit rate a profile predicts for
// them, and a decode speed from per-tier times. A model, not a measurement of the hybrid executor: see
// docs/experts.md for what it leaves out.
#pragma once

#include <cstdint>
#include <vector>

#include "core/experts/expert_plan.hpp"
#include "core/experts/routing_counts.hpp"
#include "core/gguf/gguf_file.hpp"

namespace strata {

// Bytes of one expert in each layer: its rows of blk.L.ffn_gate_exps, ffn_up_exps and ffn_down_exps as the file
// stores them (their types may differ between layers). Throws strata::Error naming a missing tensor or one whose
// bytes do not split into n_expert equal parts.
std::vector<uint64_t> expert_bytes_per_layer(const gguf::Model& file, int32_t n_layer, int32_t n_expert);

// The bytes a plan's slots take.
uint64_t plan_bytes(const ExpertPlan& plan, const std::vector<uint64_t>& expert_bytes);

// The plan of the most slots (ExpertPlan::rank over counts, which may be empty: uniform) whose experts fit
// budget_bytes. The ranked sets grow one expert at a time, so this is the longest prefix of the ranking that
// fits: with equal expert sizes, budget / size slots.
ExpertPlan plan_for_budget(int32_t n_layer, int32_t n_expert, const RoutingCounts& counts,
                           const std::vector<uint64_t>& expert_bytes, uint64_t budget_bytes);

struct TierTimes {
  double dense_us = 0.0;               // a decoded token's time outside the routed experts (attention, router, head...)
  double gpu_expert_us = 0.0;          // one resident expert's FFN for one token on the GPU
  std::vector<double> pool_expert_us;  // one missed expert's FFN for one token on the CPU pool, per layer
};

struct DecodeEstimate {
  double hit_rate = 0.0;      // plan.hit_rate(counts)
  double expert_us = 0.0;     // the routed experts' share of a token: sum over layers of max(gpu, pool)
  double us_per_token = 0.0;  // dense_us + expert_us
  double tokens_per_second = 0.0;
};

// A decoded token's time: dense_us + sum over layers of max(hits x gpu_expert_us, misses x pool_expert_us[layer]),
// the two tiers running side by side, with a layer's hits = n_expert_used x the share of that layer's counted
// pairs its resident experts take (a layer without counts: its share of slots), misses the rest. Throws
// strata::Error when counts or times do not match the plan's shape.
DecodeEstimate estimate_decode(const ExpertPlan& plan, const RoutingCounts& counts, int32_t n_expert_used,
                               const TierTimes& times);

}  // namespace strata
