// Checks for NaN and infinity in float arrays: the logits of every forward step, and weights (inspect --check).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace strata {

// Whether every value is finite. Called on every step's logits, so it is written to vectorize: x * 0 is 0
// for a finite x and NaN for NaN or infinity, and a NaN stays in its lane's sum.
inline bool all_finite(std::span<const float> values) {
  constexpr size_t kLanes = 8;
  const float* x = values.data();
  const size_t whole = values.size() - values.size() % kLanes;
  float lanes[kLanes] = {};
  for (size_t i = 0; i < whole; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * 0.0f;
  }
  float sum = 0.0f;
  for (size_t i = whole; i < values.size(); ++i) sum += x[i] * 0.0f;
  for (const float lane : lanes) sum += lane;
  return sum == 0.0f;
}

// The index of the first NaN or infinity, if any.
inline std::optional<size_t> first_non_finite(std::span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return std::nullopt;
}

// "NaN", "+inf" or "-inf".
inline const char* non_finite_name(float value) { return std::isnan(value) ? "NaN" : value > 0 ? "+inf" : "-inf"; }

}  // namespace strata
