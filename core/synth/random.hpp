// A small, portable random source for synthetic weights. std::normal_distribution's output differs between
// standard libraries, and a synthetic model must be byte-identical for one seed everywhere, so the
// generator (SplitMix64) and the Gaussian transform (Box-Muller) are spelled out here.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace strata::synth {

// Mixes a 64-bit value into a well-distributed one (SplitMix64's finalizer).
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Derives an independent stream seed from a parent seed and a label (a tensor name) or an index (a row).
constexpr uint64_t derive_seed(uint64_t parent, std::string_view label) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : label) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return mix64(parent ^ mix64(hash));
}
constexpr uint64_t derive_seed(uint64_t parent, uint64_t index) { return mix64(parent ^ mix64(index + 1)); }

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return mix64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>(uniform() * static_cast<double>(n)); }

  // Standard normal; Box-Muller yields two values per pair of uniforms, the second is kept for the next call.
  float normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(1.0 - uniform()));  // 1 - u avoids log(0)
    const double angle = 2.0 * std::numbers::pi * uniform();
    spare_ = static_cast<float>(radius * std::sin(angle));
    has_spare_ = true;
    return static_cast<float>(radius * std::cos(angle));
  }

 private:
  uint64_t state_;
  float spare_ = 0.0f;
  bool has_spare_ = false;
};

}  // namespace strata::synth
