// Creating a backend instance: its options (the manifest's, then its own), thread count and instruction set.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend_objects.hpp"
#include "cpu_topology.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

nlohmann::json parse_options(const char* options_json, const std::string& where) {
  const auto options = nlohmann::json::parse(options_json != nullptr ? options_json : "{}", nullptr, false);
  if (options.is_discarded() || !options.is_object()) invalid_argument(where + " are not a JSON object");
  return options;
}

// The "isa" option of options (empty when absent), checked; where names them in errors.
std::string isa_option(const nlohmann::json& options, const std::string& where) {
  const auto isa = options.find("isa");
  if (isa == options.end()) return {};
  const std::string source = where + " \"isa\"";
  if (!isa->is_string()) invalid_argument(source + " must be a string: one of " + sdk::kCpuIsaRequestNames);
  check_isa_name(isa->get<std::string>(), source);
  return isa->get<std::string>();
}

// The option "memory_budget_mib" in bytes (0 when absent): the memory this instance stands in a GPU's place with.
// A fraction of a MiB counts (--vram-budget-gib passes GiB * 1024).
uint64_t memory_budget_option(const nlohmann::json& options) {
  const auto budget = options.find("memory_budget_mib");
  if (budget == options.end()) return 0;
  const double mib = budget->is_number() ? budget->get<double>() : 0.0;
  if (!(mib * 1048576.0 >= 1.0 && mib <= 1048576.0 * 1048576.0)) {
    invalid_argument("backend-cpu option \"memory_budget_mib\" must be a number of MiB above 0 and at most 2^40");
  }
  return static_cast<uint64_t>(mib * 1048576.0);
}

// An option that is 0 or 1 (absent: absent_value); anything else is refused naming it.
bool switch_option(const nlohmann::json& options, const std::string& name, bool absent_value) {
  const auto value = options.find(name);
  if (value == options.end()) return absent_value;
  if (!value->is_number_integer() || value->get<int64_t>() < 0 || value->get<int64_t>() > 1) {
    invalid_argument("backend-cpu option \"" + name + "\" must be 0 or 1");
  }
  return value->get<int64_t>() == 1;
}

// The option "poll_us": how long the pool's idle threads poll for work before they sleep (the default without it).
std::chrono::microseconds poll_option(const nlohmann::json& options) {
  const auto poll = options.find("poll_us");
  if (poll == options.end()) return ThreadPool::kDefaultPoll;
  if (!poll->is_number_integer() || poll->get<int64_t>() < 0 || poll->get<int64_t>() > 1000000) {
    invalid_argument("backend-cpu option \"poll_us\" must be a whole number of microseconds from 0 to 1000000");
  }
  return std::chrono::microseconds(poll->get<int64_t>());
}

// The option "repacked_weights": whether weights whose type offers a CPU layout (quant.h's cpu_repacked) are kept
// that way, in the instance's own memory, where this level has the layout's kernels (true without the option).
bool repacked_weights_option(const nlohmann::json& options) { return switch_option(options, "repacked_weights", true); }

// The option "pin_threads": whether the pool's workers are pinned, one per physical core (false without it).
bool pin_threads_option(const nlohmann::json& options) { return switch_option(options, "pin_threads", false); }

// Pins the pool's workers one per physical core (the caller's thread keeps the first core's place, unpinned): not
// where the threads outnumber the cores, which would put two on one core. Says what happened in the description.
void pin_pool(strata_backend& instance) {
  const std::vector<int> cpus = one_cpu_per_core();
  if (cpus.empty() || instance.pool.size() > static_cast<int>(cpus.size())) {
    instance.description += ", not pinned (more threads than cores)";
  } else if (!instance.pool.pin_workers(cpus)) {
    instance.description += ", not pinned (the system refused)";
  } else {
    instance.description += ", pinned to cores";
  }
}

// The manifest's "isa" for this plugin (set at init); an instance's own option wins over it.
std::string& manifest_isa() {
  static std::string isa;
  return isa;
}

}  // namespace

void set_plugin_options(const char* options_json) {
  const std::string where = "backend-cpu manifest option";
  const auto options = parse_options(options_json, where + "s");
  for (const auto& [key, value] : options.items()) {
    if (key != "isa") invalid_argument(where + " \"" + key + "\" is unknown (known: isa)");
  }
  manifest_isa() = isa_option(options, where);
}

void create(const strata_backend_config* config, strata_backend** out) {
  const auto& checked = deref(config, "config");
  deref(out, "out");
  if (checked.struct_size < sizeof(strata_backend_config)) invalid_argument("config: struct_size is too small");
  if (checked.n_threads > STRATA_MAX_THREADS) {
    invalid_argument("config: n_threads is " + std::to_string(checked.n_threads) + ", more than STRATA_MAX_THREADS (" +
                     std::to_string(STRATA_MAX_THREADS) + ")");
  }
  // Instances also get options meant for other backends (vram_reserve_mib): "isa", "memory_budget_mib", "poll_us",
  // "pin_threads" and "repacked_weights" (which a GPU backend reads too) are the CPU's.
  const auto options = parse_options(checked.options_json, "backend-cpu options");
  const CpuIsa isa = select_isa(isa_option(options, "backend-cpu option"), manifest_isa());
  const int n_threads = checked.n_threads > 0 ? checked.n_threads : std::min(physical_core_count(), STRATA_MAX_THREADS);
  auto instance = std::make_unique<strata_backend>(n_threads, poll_option(options), isa, checked);
  instance->memory.set_limit(memory_budget_option(options));
  // The plugins' CPU layouts have SIMD kernels (avx2, avx512); at the scalar level a repack would only cost memory.
  instance->repack_weights = repacked_weights_option(options) && isa >= CpuIsa::avx2;
  if (instance->repack_weights) instance->description += ", weights repacked";
  if (pin_threads_option(options)) pin_pool(*instance);
  *out = instance.release();
}

void destroy(strata_backend* backend) { delete backend; }

const char* describe(strata_backend* backend) { return deref(backend, "backend").description.c_str(); }

}  // namespace strata::cpu

strata_backend::strata_backend(int n_threads, std::chrono::microseconds poll, strata::cpu::CpuIsa isa,
                               const strata_backend_config& config)
    : pool(n_threads, poll),
      isa(isa),
      kernels(strata::cpu::float_kernels(isa)),
      quant_context(config.quant_context),
      find_quant_type(config.find_quant_type),
      description("cpu: " + std::to_string(pool.size()) + " threads, " + strata::sdk::cpu_isa_name(isa)),
      thread_floats(pool.size()) {}
