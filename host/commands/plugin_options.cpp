#include "host/commands/plugin_options.hpp"

#include <filesystem>

#include "core/plugin/manifest.hpp"
#include "core/util/log.hpp"
#include "core/util/user_file.hpp"

namespace strata::host {

void add_manifest_option(CLI::App* command, std::string& manifest_path) {
  command->add_option("--manifest", manifest_path,
                      "plugin manifest (JSON, at most " + byte_size_text(kMaxManifestBytes) +
                          "; see docs/manifest.md); default: strata-manifest.json beside the strata executable");
}

std::unique_ptr<PluginHost> open_plugins(const std::string& manifest_path) {
  if (!manifest_path.empty()) return PluginHost::open(load_manifest(manifest_path));
  const auto default_path = default_manifest_path();
  // A build or install without the default manifest still reads the base types the core provides.
  if (!std::filesystem::exists(default_path)) {
    log().warn("no manifest given and none at {}; running with the core's base types only", default_path.string());
    return PluginHost::open(Manifest{default_path, {}, {}});
  }
  return PluginHost::open(load_manifest(default_path));
}

}  // namespace strata::host
