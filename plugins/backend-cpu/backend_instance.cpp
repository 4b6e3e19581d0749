// Creating a backend instance: its options, thread count and instruction set.
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "backend_objects.hpp"
#include "cpu_topology.hpp"
#include "ops.hpp"

namespace strata::cpu {
namespace {

// The "isa" option of options_json ("auto" when absent).
std::string isa_option(const char* options_json) {
  const auto options = nlohmann::json::parse(options_json != nullptr ? options_json : "{}", nullptr, false);
  if (options.is_discarded() || !options.is_object()) invalid_argument("backend-cpu options are not a JSON object");
  const auto isa = options.find("isa");
  if (isa == options.end()) return "auto";
  if (!isa->is_string()) invalid_argument("backend-cpu option \"isa\" must be a string");
  return isa->get<std::string>();
}

}  // namespace

void create(const strata_backend_config* config, strata_backend** out) {
  const auto& checked = deref(config, "config");
  deref(out, "out");
  if (checked.struct_size < sizeof(strata_backend_config)) invalid_argument("config: struct_size is too small");
  if (checked.n_threads > STRATA_MAX_THREADS) {
    invalid_argument("config: n_threads is " + std::to_string(checked.n_threads) + ", more than STRATA_MAX_THREADS (" +
                     std::to_string(STRATA_MAX_THREADS) + ")");
  }
  const CpuIsa isa = select_isa(isa_option(checked.options_json));
  const int n_threads = checked.n_threads > 0 ? checked.n_threads : std::min(physical_core_count(), STRATA_MAX_THREADS);
  *out = new strata_backend(n_threads, isa, checked);
}

void destroy(strata_backend* backend) { delete backend; }

const char* describe(strata_backend* backend) { return deref(backend, "backend").description.c_str(); }

}  // namespace strata::cpu

strata_backend::strata_backend(int n_threads, strata::cpu::CpuIsa isa, const strata_backend_config& config)
    : pool(n_threads),
      isa(isa),
      kernels(strata::cpu::float_kernels(isa)),
      quant_context(config.quant_context),
      find_quant_type(config.find_quant_type),
      description("cpu: " + std::to_string(pool.size()) + " threads, " + strata::sdk::cpu_isa_name(isa)),
      thread_floats(pool.size()) {}
