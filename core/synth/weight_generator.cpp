#include "core/synth/weight_generator.hpp"

#include <algorithm>
#include <cmath>

#include "core/synth/random.hpp"

namespace strata::synth {
namespace {

constexpr float kEmbeddingStd = 0.5f;
constexpr float kOutputLogitStd = 2.0f;
constexpr float kNormSpread = 0.1f;
constexpr float kBiasStd = 0.1f;

}  // namespace

WeightGenerator::WeightGenerator(const ModelShape& shape, uint64_t seed, float routing_skew)
    : shape_(shape), seed_(seed), skew_(shape, routing_skew, seed) {}

uint64_t WeightGenerator::tensor_seed(const PlannedTensor& tensor) const { return derive_seed(seed_, tensor.name); }

float WeightGenerator::value_std(const PlannedTensor& tensor) const {
  const auto fan_in = static_cast<float>(tensor.row_elements());
  switch (tensor.kind) {
    case WeightKind::token_embedding:
      return kEmbeddingStd;
    case WeightKind::output:
      return kOutputLogitStd / std::sqrt(fan_in);
    case WeightKind::norm:
      return kNormSpread;
    case WeightKind::bias:
      return kBiasStd;
    case WeightKind::projection:
      return 1.0f / std::sqrt(fan_in);
    case WeightKind::residual:
      return 1.0f / std::sqrt(fan_in * 2.0f * static_cast<float>(shape_.n_layer));
    case WeightKind::router:
      return kRouterLogitStd / std::sqrt(fan_in);
  }
  return 0.0f;
}

void WeightGenerator::fill_rows(const PlannedTensor& tensor, uint64_t first_row, uint64_t n_rows, float* out) const {
  for (uint64_t i = 0; i < n_rows; ++i) fill_row(tensor, first_row + i, out + i * tensor.row_elements());
}

void WeightGenerator::fill_row(const PlannedTensor& tensor, uint64_t row, float* out) const {
  Random random(derive_seed(tensor_seed(tensor), row));
  const uint64_t n = tensor.row_elements();
  const float std = value_std(tensor);
  for (uint64_t i = 0; i < n; ++i) out[i] = std * random.normal();
  if (tensor.kind == WeightKind::norm) {
    for (uint64_t i = 0; i < n; ++i) out[i] = 1.0f + std::clamp(out[i], -3 * std, 3 * std);
  }
  if (!skew_.enabled()) return;
  const auto u = skew_.direction();
  if (tensor.kind == WeightKind::token_embedding) {
    for (uint64_t i = 0; i < n; ++i) out[i] += std * skew_.embedding_lean() * u[i];
  } else if (tensor.kind == WeightKind::router) {
    // The random part is made orthogonal to u, so that only alpha decides how much u moves this expert.
    double along = 0.0;
    for (uint64_t i = 0; i < n; ++i) along += double(out[i]) * u[i];
    const float alpha = skew_.router_alpha(static_cast<uint32_t>(tensor.layer), static_cast<uint32_t>(row));
    for (uint64_t i = 0; i < n; ++i) out[i] += (alpha - static_cast<float>(along)) * u[i];
  }
}

}  // namespace strata::synth
