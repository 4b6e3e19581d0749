#include "core/engine/expert_pool_timing.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "core/engine/op_benchmark.hpp"

namespace strata {

PoolTiming time_expert_pool(const Model& model, const gguf::Model& file, int32_t calls, int32_t repetitions) {
  const ModelConfig& c = model.config();
  // Layers whose gate, up and down tensors have the same types run the same kernels on as many bytes.
  std::map<std::array<uint32_t, 3>, int32_t> first_of_types;
  std::vector<int32_t> timed_as(static_cast<size_t>(c.n_layer));
  for (int32_t il = 0; il < c.n_layer; ++il) {
    std::array<uint32_t, 3> types{};
    const char* matrices[] = {"gate", "up", "down"};
    for (size_t m = 0; m < types.size(); ++m) {
      types[m] = file.tensor("blk." + std::to_string(il) + ".ffn_" + matrices[m] + "_exps.weight").type;
    }
    timed_as[static_cast<size_t>(il)] = first_of_types.emplace(types, il).first->second;
  }
  PoolTiming timing;
  std::map<int32_t, double> us_of_layer;
  for (const auto& [types, il] : first_of_types) {
    const auto result = run_op_benchmark(
        model, file, "moe_ffn",
        {.n_tokens = 1, .calls = calls, .repetitions = repetitions, .layers = {il}, .experts_per_token = 0});
    us_of_layer[il] = result.us_per_call / c.n_expert_used;
    timing.measured_layers.push_back(il);
  }
  std::sort(timing.measured_layers.begin(), timing.measured_layers.end());
  for (const int32_t il : timed_as) {
    timing.us_per_expert.push_back(us_of_layer.at(il));
    timing.us_per_call += us_of_layer.at(il) * c.n_expert_used / c.n_layer;
  }
  return timing;
}

}  // namespace strata
