#include "core/engine/engine.hpp"

#include <nlohmann/json.hpp>

#include "core/plugin/manifest.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata {

Engine::Engine(const EngineOptions& options) {
  const auto manifest_path = options.manifest.empty() ? default_manifest_path() : options.manifest;
  plugins_ = PluginHost::open(load_manifest(manifest_path));
  file_ = std::make_unique<gguf::Model>(options.model);
  const BackendPlugin& chosen = plugins_->choose_backend(options.backend);
  // Instance options override the manifest's; backends ignore keys that are not theirs (the CPU backend
  // has no VRAM).
  nlohmann::json instance_options = nlohmann::json::object();
  if (options.vram_reserve_mib >= 0) instance_options["vram_reserve_mib"] = options.vram_reserve_mib;
  if (options.repacked_weights >= 0) instance_options["repacked_weights"] = options.repacked_weights;
  backend_ = std::make_unique<Backend>(chosen.name, *chosen.table, plugins_->quants(), options.threads,
                                       instance_options.dump());
  log().info("backend: {}", backend_->describe());
  model_ = std::make_unique<Model>(*file_, *backend_);
}

int32_t parse_kv_type(const std::string& text) {
  if (text == "f16") return STRATA_KV_F16;
  if (text == "int8") return STRATA_KV_INT8;
  throw Error("unknown KV cache type '" + text + "' (use f16 or int8)");
}

}  // namespace strata
