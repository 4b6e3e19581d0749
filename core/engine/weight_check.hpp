// `strata inspect --check`: every weight of a model decoded through the quant registry and searched for NaN
// and infinity, a slab of rows at a time on several threads (memory stays a slab per thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "core/quant/quant_registry.hpp"

namespace strata {

struct NonFiniteTensor {
  std::string name;
  uint64_t count = 0;        // NaN and infinite values
  uint64_t first_index = 0;  // the first one's index, ne0 fastest (as `inspect --dequant` writes the values)
  float first_value = 0.0f;
};

struct WeightCheck {
  std::vector<NonFiniteTensor> non_finite;  // in file order
  std::vector<std::string> unchecked;       // "name (TYPE)": tensors whose type no loaded plugin decodes
  uint64_t tensors_checked = 0;
  uint64_t values_checked = 0;
};

// threads: 0 for every hardware thread. Throws strata::Error when a plugin's decoder fails.
WeightCheck check_weights(const gguf::Model& model, const QuantRegistry& quants, unsigned threads = 0);

}  // namespace strata
