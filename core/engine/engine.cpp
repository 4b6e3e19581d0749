#include "core/engine/engine.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/experts/expert_profile.hpp"
#include "core/plugin/manifest.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata {
namespace {

// Memory a model that fits must leave over its weights for the KV cache and the ops' scratch, without placement:
// 2 GiB, or an eighth of a smaller device (a stand-in of --vram-budget-gib).
uint64_t fit_margin(uint64_t limit) { return std::min(uint64_t{2} << 30, limit / 8); }

}  // namespace

Engine::Engine(const EngineOptions& options) {
  const auto manifest_path = options.manifest.empty() ? default_manifest_path() : options.manifest;
  plugins_ = PluginHost::open(load_manifest(manifest_path));
  file_ = std::make_unique<gguf::Model>(options.model);
  const BackendPlugin& chosen = plugins_->choose_backend(options.backend);
  const BackendPlugin& cpu = plugins_->choose_backend("cpu");
  // Instance options override the manifest's; the CPU backend ignores the GPU's keys (it has no VRAM), while a GPU
  // backend refuses keys it does not know, so the CPU's own go to CPU instances only.
  nlohmann::json instance_options = nlohmann::json::object();
  if (options.vram_reserve_mib >= 0) instance_options["vram_reserve_mib"] = options.vram_reserve_mib;
  if (options.repacked_weights >= 0) instance_options["repacked_weights"] = options.repacked_weights;
  nlohmann::json pool_options = instance_options;
  if (options.gpu >= 0) instance_options["device"] = options.gpu;  // the device's alone: the pool is the CPU
  if (options.cpu_poll_us >= 0) {
    pool_options["poll_us"] = options.cpu_poll_us;
    if (chosen.name == cpu.name) instance_options["poll_us"] = options.cpu_poll_us;
  }
  if (options.cpu_pin >= 0) {
    pool_options["pin_threads"] = options.cpu_pin;
    if (chosen.name == cpu.name) instance_options["pin_threads"] = options.cpu_pin;
  }
  if (options.vram_budget_gib > 0.0) {
    instance_options["memory_budget_mib"] = options.vram_budget_gib * 1024.0;
  }
  backend_ = std::make_unique<Backend>(chosen.name, *chosen.table, plugins_->quants(), options.threads,
                                       instance_options.dump());
  log().info("backend: {}", backend_->describe());
  std::optional<ExpertCacheOptions> placement =
      expert_placement(options, chosen.name == cpu.name, *backend_, file_->tensor_bytes());
  if (!placement) {
    const std::string none_here =
        "of a hybrid placement, and there is none here (" +
        (options.expert_cache == "off" ? std::string("--expert-cache off") : backend_->name()) + ")";
    if (!options.expert_profile.empty()) throw Error("--expert-profile ranks the experts " + none_here);
    if (!options.expert_trace.empty()) throw Error("--trace-experts records the split layers " + none_here);
    model_ = std::make_unique<Model>(*file_, *backend_);
    return;
  }
  if (!options.expert_profile.empty()) {
    const ModelConfig config = ModelConfig::from_gguf(*file_);
    placement->profile = read_expert_profile(options.expert_profile, config.n_layer, config.n_expert).counts;
  }
  if (!options.expert_trace.empty()) {
    expert_trace_ = std::make_shared<TimelineTrace>(options.expert_trace);
    placement->trace = expert_trace_;
  }
  const int pool_workers = options.pool_workers >= 0 ? options.pool_workers : options.threads;
  expert_pool_ = std::make_unique<Backend>(cpu.name, *cpu.table, plugins_->quants(), pool_workers, pool_options.dump());
  log().info("expert pool: {}", expert_pool_->describe());
  model_ = std::make_unique<Model>(*file_, *backend_, *expert_pool_, std::move(*placement));
}

void Engine::finish_expert_trace() const {
  if (expert_trace_) expert_trace_->finish();
}

std::optional<ExpertCacheOptions> expert_placement(const EngineOptions& options, bool cpu_device, Backend& device,
                                                   uint64_t model_bytes) {
  const std::string& mode = options.expert_cache;
  if (mode == "off") return std::nullopt;
  if (mode.empty() && (!device.has_expert_cache() || (cpu_device && options.vram_budget_gib <= 0.0))) {
    return std::nullopt;
  }
  // By default a model that fits with room to spare (a repacked layout a quarter larger, the KV cache and scratch)
  // is loaded whole, as without placement: no expert pool, no host copy of the experts.
  if (const auto info = device.memory_info();
      mode.empty() && info && info->limit_bytes > info->used_bytes &&
      info->limit_bytes - info->used_bytes >= model_bytes / 4 * 5 + fit_margin(info->limit_bytes)) {
    return std::nullopt;
  }
  ExpertCacheOptions placement = options.expert_options;
  placement.host_memory = parse_expert_memory(options.host_experts);
  if (!placement.pool_thread) placement.pool_thread = !cpu_device;
  if (options.cpu_poll_us >= 0) placement.poll = std::chrono::microseconds(options.cpu_poll_us);
  if (mode.empty() || mode == "auto") {
    placement.slots.reset();
    return placement;
  }
  int64_t slots = -1;
  const auto [end, error] = std::from_chars(mode.data(), mode.data() + mode.size(), slots);
  if (error != std::errc() || end != mode.data() + mode.size() || slots < 0) {
    throw Error("--expert-cache takes auto, off or a number of expert slots (0 or more), not '" + mode + "'");
  }
  placement.slots = slots;
  return placement;
}

int32_t parse_kv_type(const std::string& text) {
  if (text == "f16") return STRATA_KV_F16;
  if (text == "int8") return STRATA_KV_INT8;
  throw Error("unknown KV cache type '" + text + "' (use f16 or int8)");
}

}  // namespace strata
