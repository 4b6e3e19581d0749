#include "weight_layout.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ops.hpp"

namespace strata::cuda {
namespace {

// The layout the weight's rows take on the device: the type's repacked one where the backend repacks and the
// quant plugin offers one with kernels (quant.h, ABI 1.6), else the file's.
const strata_quant_type& device_type(const strata_backend& backend, const strata_quant_type& type) {
  const bool offers =
      STRATA_HAS_FIELD(&type, cuda_repack) && type.cuda_repacked != nullptr && type.cuda_repack != nullptr;
  if (!backend.repack_weights || !offers || !weight_kernels(*type.cuda_repacked).available()) return type;
  return *type.cuda_repacked;
}

// The type's repack of n_blocks blocks, over the host's cores: a 30B model's IQ3_S experts are ~10^8 blocks,
// about ten seconds on one core.
void repack_on_all_cores(const strata_quant_type& type, const std::byte* from, std::byte* to, size_t n_blocks) {
  constexpr size_t kMinBlocksPerThread = 16384;
  const size_t n_threads =
      std::clamp<size_t>(n_blocks / kMinBlocksPerThread, 1, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> failures(n_threads);
  std::vector<strata_status> statuses(n_threads, STRATA_OK);
  std::vector<std::jthread> threads;
  for (size_t t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      const size_t first = n_blocks * t / n_threads, end = n_blocks * (t + 1) / n_threads;
      char message[256] = "";
      strata_error error{message, sizeof message};
      statuses[t] = type.cuda_repack(from + first * type.block_bytes, to + first * type.cuda_repacked->block_bytes,
                                     static_cast<int64_t>(end - first), &error);
      failures[t] = message;
    });
  }
  threads.clear();  // joins
  for (size_t t = 0; t < n_threads; ++t) {
    if (statuses[t] != STRATA_OK) throw sdk::Failure(statuses[t], failures[t]);
  }
}

}  // namespace

std::unique_ptr<strata_weight> device_weight(strata_backend& backend, const strata_weight_desc& desc,
                                             bool file_layout) {
  const strata_quant_type* type = backend.find_type(desc.type);
  const std::string name = sdk::check_weight_desc(desc, type);
  const strata_quant_type& layout = file_layout ? *type : device_type(backend, *type);
  auto weight = std::make_unique<strata_weight>();
  weight->name = name;
  weight->type = type;
  weight->layout = &layout;
  weight->kernels = weight_kernels(layout);
  weight->ne0 = desc.ne0;
  weight->ne1 = desc.ne1;
  weight->ne2 = desc.ne2;
  const auto blocks_per_row = static_cast<size_t>(desc.ne0 / type->block_elements);
  weight->host_row_bytes = blocks_per_row * type->block_bytes;
  weight->row_bytes = blocks_per_row * layout.block_bytes;
  const auto rows = static_cast<size_t>(desc.ne1 * desc.ne2);
  weight->device = backend.budget.allocate(weight->row_bytes * rows, "weight " + name + " (" + layout.name + ")");
  return weight;
}

void to_device_layout(const strata_weight& weight, const std::byte* from, std::byte* to, size_t rows) {
  if (weight.layout == weight.type) {
    std::memcpy(to, from, rows * weight.row_bytes);
    return;
  }
  repack_on_all_cores(*weight.type, from, to, rows * (weight.host_row_bytes / weight.type->block_bytes));
}

}  // namespace strata::cuda
