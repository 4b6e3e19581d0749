// Writes a synthetic random-weight model as a GGUF v3 file, streaming: the header first, then each tensor
// generated, quantized and written in turn. Float values exist only a slab of rows per worker at a time;
// one tensor's quantized bytes are held until written (at most a few hundred MB for a 30B model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/quant/quant_registry.hpp"
#include "core/synth/model_shape.hpp"
#include "core/synth/quant_mix.hpp"

namespace strata::synth {

struct SynthOptions {
  ModelShape shape;
  QuantMix mix = QuantMix::iq3_s;
  uint64_t seed = 0;
  float routing_skew = 0.0f;  // Zipf exponent of the simulated expert popularity; 0 = uniform
  // Quantized tensors with more values take the block-pool fast path (see block_pool.hpp).
  uint64_t exact_max_values = uint64_t{1} << 23;
  unsigned threads = 0;  // 0: all hardware threads
};

struct SynthTensorReport {
  std::string name;
  uint32_t type = 0;
  uint64_t bytes = 0;
  bool fast_path = false;
};

struct SynthReport {
  std::vector<SynthTensorReport> tensors;
  uint64_t file_bytes = 0;
};

// Called after each tensor is written, with its index and the tensor count.
using SynthProgress = std::function<void(const SynthTensorReport&, size_t index, size_t count)>;

SynthReport synthesize(const SynthOptions& options, const QuantRegistry& quants, const std::filesystem::path& output,
                       const SynthProgress& progress = {});

}  // namespace strata::synth
