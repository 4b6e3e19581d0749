// The --manifest option every command that loads plugins shares, and opening the plugins it names.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/plugin/plugin_host.hpp"

namespace strata::host {

void add_manifest_option(CLI::App* command, std::string& manifest_path);

// Loads the manifest (an empty path means the default manifest beside the executable) and its plugins.
// Throws strata::Error for an unreadable or invalid manifest; plugins that cannot load are only skipped.
std::unique_ptr<PluginHost> open_plugins(const std::string& manifest_path);

}  // namespace strata::host
