// A SIMULATION of the skewed expert popularity of trained routers (not a model of any real router).
//
// Every token embedding gets a common component along one unit direction u, so every hidden state leans
// the same way. Router row e of layer l gets alpha_e * u, where alpha_e falls with e's rank in a per-layer
// random permutation. The shared lean then adds a bias b_e = alpha_e * (u . h) to expert e's logit, chosen
// as -S * beta * ln(rank + 1): were the rest of the logit Gumbel noise of scale beta, the top-1 expert
// would follow a Zipf law with exponent S exactly. The rest is Gaussian; beta is the Gumbel scale that the
// largest of n_expert such Gaussians follows, so the law is only approximately Zipf; tests measure it. The bias is
// sized for hidden states at the embedding; later layers add their own output to the residual stream, which dilutes the
// shared lean a little.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/synth/model_shape.hpp"

namespace strata::synth {

class RoutingSkew {
 public:
  // exponent 0 turns the simulation off: no shared component, no router bias.
  RoutingSkew(const ModelShape& shape, float exponent, uint64_t seed);

  bool enabled() const { return exponent_ > 0.0f; }
  // The shared direction u (unit length, n_embd values).
  std::span<const float> direction() const { return direction_; }
  // How far each token embedding leans along u, in units of the embedding's per-value standard deviation.
  float embedding_lean() const { return embedding_lean_; }
  // alpha for expert's router row in layer.
  float router_alpha(uint32_t layer, uint32_t expert) const { return alpha_[layer][expert]; }

 private:
  float exponent_;
  std::vector<float> direction_;
  float embedding_lean_ = 0.0f;
  std::vector<std::vector<float>> alpha_;  // [layer][expert]
};

// The standard deviation of a router logit's token-dependent part (the router rows are scaled for it).
inline constexpr float kRouterLogitStd = 4.0f;

}  // namespace strata::synth
