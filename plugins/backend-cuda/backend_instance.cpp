// Creating a backend instance: its options, device, stream, cuBLAS handle and VRAM budget.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend_objects.hpp"
#include "cuda_status.hpp"
#include "ops.hpp"

namespace strata::cuda {
namespace {

constexpr int64_t kDefaultReserveMib = 512;
// Whether weights take their type's repacked layout (quant.h, ABI 1.6; IQ3_S: 4-bit levels, +23.6% bytes): on
// by default, as its decode measured 8% faster on an H200 (docs/cuda.md).
constexpr int64_t kDefaultRepackedWeights = 1;

// The manifest's options for this plugin (set at init); an instance's own options override them.
nlohmann::json& plugin_options() {
  static nlohmann::json options = nlohmann::json::object();
  return options;
}

nlohmann::json parse_options(const char* options_json, const char* where) {
  auto options = nlohmann::json::parse(options_json != nullptr ? options_json : "{}", nullptr, false);
  if (options.is_discarded() || !options.is_object()) invalid_argument(std::string(where) + " are not a JSON object");
  for (const auto& [key, value] : options.items()) {
    if (key != "vram_reserve_mib" && key != "memory_budget_mib" && key != "device" && key != "repacked_weights") {
      invalid_argument(std::string(where) + ": unknown option \"" + key +
                       "\" (known: vram_reserve_mib, memory_budget_mib, device, repacked_weights)");
    }
    if (key == "memory_budget_mib") {
      // A number of MiB, fractions too (--vram-budget-gib passes GiB * 1024).
      if (!value.is_number() || !(value.get<double>() * 1048576.0 >= 1.0)) {
        invalid_argument(std::string(where) + ": option \"memory_budget_mib\" must be a number of MiB above 0");
      }
      continue;
    }
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        (key == "repacked_weights" && value.get<int64_t>() > 1)) {
      invalid_argument(std::string(where) + ": option \"" + key + "\" must be a non-negative integer" +
                       (key == "repacked_weights" ? " (0 or 1)" : ""));
    }
  }
  return options;
}

// MiB as bytes, saturated (a reserve or budget beyond the address space is all of it).
size_t mib_bytes(int64_t mib) {
  return static_cast<uint64_t>(mib) > (SIZE_MAX >> 20) ? SIZE_MAX : static_cast<size_t>(mib) << 20;
}

int64_t option(const nlohmann::json& options, const char* key, int64_t fallback) {
  if (const auto own = options.find(key); own != options.end()) return own->get<int64_t>();
  if (const auto shared = plugin_options().find(key); shared != plugin_options().end()) return shared->get<int64_t>();
  return fallback;
}

double number_option(const nlohmann::json& options, const char* key, double fallback) {
  if (const auto own = options.find(key); own != options.end()) return own->get<double>();
  if (const auto shared = plugin_options().find(key); shared != plugin_options().end()) return shared->get<double>();
  return fallback;
}

int select_device(int64_t wanted) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "counting CUDA devices");
  if (wanted >= count) {
    invalid_argument("backend-cuda option device " + std::to_string(wanted) + ": only " + std::to_string(count) +
                     " CUDA devices");
  }
  const int device = static_cast<int>(wanted);
  check(cudaSetDevice(device), "selecting CUDA device " + std::to_string(device));
  return device;
}

size_t free_vram() {
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "reading free VRAM");
  return free_bytes;
}

std::string describe_device(int device, const VramBudget& budget, size_t reserve_bytes) {
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, device), "reading device properties");
  char text[512];
  std::snprintf(text, sizeof text, "cuda: device %d %s (sm_%d%d, %d SMs), %.1f GiB usable, %s reserved%s", device,
                properties.name, properties.major, properties.minor, properties.multiProcessorCount,
                static_cast<double>(budget.limit()) / (1024.0 * 1024.0 * 1024.0), mib_text(reserve_bytes).c_str(),
                budget.capped() ? " (capped by memory_budget_mib)" : "");
  return text;
}

}  // namespace

void set_plugin_options(const char* options_json) {
  plugin_options() = parse_options(options_json, "backend-cuda manifest options");
}

void create(const strata_backend_config* config, strata_backend** out) {
  const auto& checked = deref(config, "config");
  deref(out, "out");
  if (checked.struct_size < sizeof(strata_backend_config)) invalid_argument("config: struct_size is too small");
  const auto options = parse_options(checked.options_json, "backend-cuda options");
  const int device = select_device(option(options, "device", 0));
  const size_t reserve_bytes = mib_bytes(option(options, "vram_reserve_mib", kDefaultReserveMib));
  const double budget_mib = number_option(options, "memory_budget_mib", -1.0);
  const size_t budget_bytes = budget_mib < 0.0 ? SIZE_MAX
                              : budget_mib >= static_cast<double>(SIZE_MAX >> 20)
                                  ? SIZE_MAX
                                  : static_cast<size_t>(budget_mib * 1048576.0);
  auto backend = std::make_unique<strata_backend>(checked, device, reserve_bytes, budget_bytes);
  backend->repack_weights = option(options, "repacked_weights", kDefaultRepackedWeights) != 0;
  if (backend->repack_weights) backend->description += ", weights repacked";
  *out = backend.release();
}

void destroy(strata_backend* backend) { delete backend; }

const char* describe(strata_backend* backend) { return deref(backend, "backend").description.c_str(); }

}  // namespace strata::cuda

strata_backend::strata_backend(const strata_backend_config& config, int device, size_t reserve_bytes,
                               size_t budget_bytes)
    : device(device),
      quant_context(config.quant_context),
      find_quant_type(config.find_quant_type),
      budget(strata::cuda::free_vram(), reserve_bytes, budget_bytes) {
  using strata::cuda::check;
  try {
    for (auto& lane : lanes) {
      check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking), "creating a CUDA stream");
      check(cublasCreate(&lane.cublas), "creating a cuBLAS handle");
      check(cublasSetStream(lane.cublas, lane.stream), "binding cuBLAS to the stream");
      check(cudaEventCreateWithFlags(&lane.done, cudaEventDisableTiming), "creating a CUDA event");
    }
    check(cudaEventCreateWithFlags(&region_start, cudaEventDisableTiming), "creating a CUDA event");
    description = strata::cuda::describe_device(device, budget, reserve_bytes);
  } catch (...) {
    release_lanes();
    throw;
  }
  stream = lanes[0].stream;
  cublas = lanes[0].cublas;
}

strata_backend::~strata_backend() { release_lanes(); }

void strata_backend::release_lanes() {
  for (auto& lane : lanes) {
    if (lane.stream != nullptr) cudaStreamSynchronize(lane.stream);
    if (lane.cublas != nullptr) cublasDestroy(lane.cublas);
    if (lane.done != nullptr) cudaEventDestroy(lane.done);
    if (lane.stream != nullptr) cudaStreamDestroy(lane.stream);
  }
  if (region_start != nullptr) cudaEventDestroy(region_start);
}
