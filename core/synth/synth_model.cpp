#include "core/synth/synth_model.hpp"

#include <algorithm>
#include <thread>

#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_writer.hpp"
#include "core/synth/block_pool.hpp"
#include "core/synth/synth_metadata.hpp"
#include "core/synth/synth_vocab.hpp"
#include "core/synth/tensor_plan.hpp"
#include "core/synth/weight_generator.hpp"
#include "core/util/parallel.hpp"

namespace strata::synth {
namespace {

// Values per slab: the unit of work a thread generates and quantizes (4 MB of floats).
constexpr uint64_t kSlabValues = uint64_t{1} << 20;

class TensorSynthesizer {
 public:
  TensorSynthesizer(const SynthOptions& options, const QuantRegistry& quants)
      : options_(options),
        quants_(quants),
        generator_(options.shape, options.seed, options.routing_skew),
        threads_(options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency())) {}

  bool takes_fast_path(const PlannedTensor& tensor) const {
    const bool quantized = gguf::find_type(tensor.type)->block_elements > 1;
    return quantized && tensor.rows() * tensor.row_elements() > options_.exact_max_values;
  }

  // The tensor's bytes in file layout.
  std::vector<uint8_t> make(const PlannedTensor& tensor, uint64_t bytes) const {
    std::vector<uint8_t> data(bytes);
    const uint64_t row_bytes = bytes / tensor.rows();
    const uint64_t slab_rows = std::max<uint64_t>(1, kSlabValues / tensor.row_elements());
    const uint64_t slabs = (tensor.rows() + slab_rows - 1) / slab_rows;
    const auto slab_range = [&](uint64_t slab) {
      const uint64_t first = slab * slab_rows;
      return std::pair{first, std::min(slab_rows, tensor.rows() - first)};
    };
    if (takes_fast_path(tensor)) {
      const BlockPool pool(tensor, generator_, quants_, threads_);
      parallel_for(slabs, threads_, [&](uint64_t slab, unsigned) {
        const auto [first, n] = slab_range(slab);
        pool.fill_rows(first, n, data.data() + first * row_bytes);
      });
      return data;
    }
    std::vector<std::vector<float>> scratch(threads_);
    parallel_for(slabs, threads_, [&](uint64_t slab, unsigned worker) {
      const auto [first, n] = slab_range(slab);
      auto& values = scratch[worker];
      values.resize(n * tensor.row_elements());
      generator_.fill_rows(tensor, first, n, values.data());
      quants_.quantize(tensor.type, values.data(), data.data() + first * row_bytes, static_cast<int64_t>(n),
                       static_cast<int64_t>(tensor.row_elements()));
    });
    return data;
  }

 private:
  const SynthOptions& options_;
  const QuantRegistry& quants_;
  WeightGenerator generator_;
  unsigned threads_;
};

uint64_t tensor_bytes(const PlannedTensor& tensor) {
  const auto* info = gguf::find_type(tensor.type);
  return tensor.rows() * tensor.row_elements() / info->block_elements * info->block_bytes;
}

}  // namespace

SynthReport synthesize(const SynthOptions& options, const QuantRegistry& quants, const std::filesystem::path& output,
                       const SynthProgress& progress) {
  validate_shape(options.shape);
  const auto plan = plan_tensors(options.shape, options.mix);
  for (const auto& tensor : plan) quants.require(tensor.type);  // fail before writing anything

  gguf::Writer writer;
  write_metadata(writer, options.shape, options.mix, build_vocab(options.shape.n_vocab),
                 Provenance{options.seed, options.routing_skew});
  for (const auto& tensor : plan) writer.add_tensor(tensor.name, tensor.type, tensor.shape);
  writer.open(output);

  const TensorSynthesizer synthesizer(options, quants);
  SynthReport report;
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& tensor = plan[i];
    const uint64_t bytes = tensor_bytes(tensor);
    writer.write_tensor(synthesizer.make(tensor, bytes).data(), bytes);
    report.tensors.push_back({tensor.name, tensor.type, bytes, synthesizer.takes_fast_path(tensor)});
    if (progress) progress(report.tensors.back(), i, plan.size());
  }
  writer.finish();
  report.file_bytes = std::filesystem::file_size(output);
  return report;
}

}  // namespace strata::synth
