#include "core/engine/weight_check.hpp"

#include <algorithm>
#include <thread>

#include "core/gguf/ggml_types.hpp"
#include "core/util/finite_values.hpp"
#include "core/util/parallel.hpp"

namespace strata {
namespace {

// Values decoded at once by one thread: whole rows, about 4 MiB of floats (one row when rows are longer).
constexpr uint64_t kSlabValues = uint64_t{1} << 20;

struct Slab {
  size_t tensor;  // index into the model's tensors
  uint64_t first_row, rows;
};

struct SlabResult {
  uint64_t count = 0, first_index = 0;
  float first_value = 0.0f;
};

}  // namespace

WeightCheck check_weights(const gguf::Model& model, const QuantRegistry& quants, unsigned threads) {
  WeightCheck check;
  std::vector<Slab> slabs;
  const auto& tensors = model.tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const gguf::TensorInfo& tensor = tensors[t];
    if (quants.find(tensor.type) == nullptr) {
      const auto* info = gguf::find_type(tensor.type);
      check.unchecked.push_back(tensor.name + " (" + std::string(info->name) + ")");
      continue;
    }
    const uint64_t row = tensor.shape[0];
    const uint64_t rows = tensor.n_elements / row;
    const uint64_t rows_per_slab = std::max<uint64_t>(1, kSlabValues / row);
    for (uint64_t first = 0; first < rows; first += rows_per_slab) {
      slabs.push_back({t, first, std::min(rows_per_slab, rows - first)});
    }
    ++check.tensors_checked;
    check.values_checked += tensor.n_elements;
  }

  const unsigned workers = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<float>> scratch(workers);
  std::vector<SlabResult> results(slabs.size());
  parallel_for(slabs.size(), workers, [&](uint64_t index, unsigned worker) {
    const Slab& slab = slabs[index];
    const gguf::TensorInfo& tensor = tensors[slab.tensor];
    const auto* info = gguf::find_type(tensor.type);
    const uint64_t row = tensor.shape[0];
    const uint64_t row_bytes = row / info->block_elements * info->block_bytes;
    std::vector<float>& values = scratch[worker];
    values.resize(slab.rows * row);
    quants.dequantize(tensor.type, tensor.data + slab.first_row * row_bytes, values.data(),
                      static_cast<int64_t>(values.size()));
    if (all_finite(values)) return;
    SlabResult& result = results[index];
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i])) continue;
      if (result.count++ == 0) {
        result.first_index = slab.first_row * row + i;
        result.first_value = values[i];
      }
    }
  });

  // Slabs are in file order, so a tensor's first non-finite value is in its first slab that has one.
  for (size_t i = 0; i < slabs.size(); ++i) {
    if (results[i].count == 0) continue;
    const std::string& name = tensors[slabs[i].tensor].name;
    if (check.non_finite.empty() || check.non_finite.back().name != name) {
      check.non_finite.push_back({name, 0, results[i].first_index, results[i].first_value});
    }
    check.non_finite.back().count += results[i].count;
  }
  return check;
}

}  // namespace strata
