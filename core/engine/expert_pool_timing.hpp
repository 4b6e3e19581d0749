// The CPU expert pool's time per missed expert, measured on this machine with the model's own expert tensors:
// what `strata plan` predicts the misses of a VRAM budget with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "core/model/session.hpp"

namespace strata {

struct PoolTiming {
  std::vector<double> us_per_expert;     // per layer: one expert's FFN for one token
  std::vector<int32_t> measured_layers;  // the layers timed; every other layer shares the time of the one
                                         // timed whose expert tensors have the same types
  double us_per_call = 0.0;              // mean over every layer: moe_ffn of one token and n_expert_used experts
};

// Times the model's backend's moe_ffn (the CPU pool: open the model on the CPU backend) for one token and
// n_expert_used distinct experts: `calls` calls a round over fixed routings, after a warm-up round, `repetitions`
// rounds (run_op_benchmark), on the first layer of each combination of the three expert tensors' types. A
// missed expert costs a call's time / n_expert_used: the call's fixed costs (the activation's conversion, the
// threads' fork and join) are shared out over the experts, as they are when all of a token's experts miss.
PoolTiming time_expert_pool(const Model& model, const gguf::Model& file, int32_t calls, int32_t repetitions);

}  // namespace strata
