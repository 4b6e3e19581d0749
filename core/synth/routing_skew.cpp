#include "core/synth/routing_skew.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/synth/random.hpp"

namespace strata::synth {
namespace {

// Share of the embedding along u: lean = kappa * sqrt(n_embd), so u carries kappa^2 / (1 + kappa^2) of each
// embedding's energy (20%): enough to steer routers, little enough that tokens stay distinguishable.
constexpr double kLeanKappa = 0.5;

}  // namespace

RoutingSkew::RoutingSkew(const ModelShape& shape, float exponent, uint64_t seed) : exponent_(exponent) {
  if (!enabled()) return;
  const double n = shape.n_embd;
  Random direction_random(derive_seed(seed, "routing-skew/direction"));
  direction_.resize(shape.n_embd);
  double norm = 0.0;
  for (auto& v : direction_) {
    v = direction_random.normal();
    norm += double(v) * v;
  }
  for (auto& v : direction_) v = static_cast<float>(v / std::sqrt(norm));
  embedding_lean_ = static_cast<float>(kLeanKappa * std::sqrt(n));

  // After RMSNorm a hidden state x = sigma * (z + lean * u) has u . h = kappa * sqrt(n) / sqrt(1 + kappa^2),
  // and the router's random part (orthogonal to u) gives logits of std kRouterLogitStd / sqrt(1 + kappa^2).
  const double lean_after_norm = kLeanKappa * std::sqrt(n) / std::sqrt(1.0 + kLeanKappa * kLeanKappa);
  const double noise_std = kRouterLogitStd / std::sqrt(1.0 + kLeanKappa * kLeanKappa);
  // The largest of K Gaussians of std sigma is close to a Gumbel of scale sigma / sqrt(2 ln K) (extreme
  // value theory), and top-1 choice is decided among the largest logits.
  const double gumbel_scale = noise_std / std::sqrt(2.0 * std::log(std::max(2u, shape.n_expert)));

  alpha_.resize(shape.n_layer);
  for (uint32_t layer = 0; layer < shape.n_layer; ++layer) {
    std::vector<uint32_t> rank(shape.n_expert);
    std::iota(rank.begin(), rank.end(), 0u);
    Random permutation_random(derive_seed(seed, "routing-skew/layer " + std::to_string(layer)));
    for (size_t i = rank.size(); i > 1; --i) std::swap(rank[i - 1], rank[permutation_random.below(i)]);

    std::vector<double> bias(shape.n_expert);
    for (uint32_t e = 0; e < shape.n_expert; ++e) bias[e] = -exponent * gumbel_scale * std::log(rank[e] + 1.0);
    const double mean = std::accumulate(bias.begin(), bias.end(), 0.0) / shape.n_expert;
    alpha_[layer].resize(shape.n_expert);
    for (uint32_t e = 0; e < shape.n_expert; ++e)
      alpha_[layer][e] = static_cast<float>((bias[e] - mean) / lean_after_norm);
  }
}

}  // namespace strata::synth
