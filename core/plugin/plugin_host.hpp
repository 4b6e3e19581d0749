// Loads the plugins a manifest lists, checks each against the plugin ABI, and builds the quant registry
// from the core's base types and the quant plugins' tables. A plugin that cannot be used is skipped with
// a reason and a log line; the host keeps running with the others.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin/manifest.hpp"
#include "core/quant/quant_registry.hpp"
#include "strata/backend.h"

namespace strata {

struct LoadedPlugin {
  std::string name;
  std::string kind;     // "quant" or "backend"
  std::string version;  // the plugin's own version text
  uint16_t abi_major = 0;
  uint16_t abi_minor = 0;
  std::filesystem::path file;
  int32_t score = 0;  // from the plugin's probe; 1 when it has none
};

struct BackendPlugin {
  std::string name;   // e.g. "backend-cpu"
  int32_t score = 0;  // the probe's: the best-scoring backend is the default
  const strata_backend_table* table = nullptr;
};

struct SkippedPlugin {
  std::filesystem::path file;
  std::string reason;  // e.g. "built for plugin ABI 2.0, this host speaks 1.0"
};

class PluginHost {
 public:
  // Loads every enabled plugin of the manifest, then resolves the quant registry with its preferences.
  static std::unique_ptr<PluginHost> open(const Manifest& manifest);

  // Calls each plugin's shutdown (last loaded first), then unloads the libraries.
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  const std::filesystem::path& manifest_path() const { return manifest_path_; }
  const QuantRegistry& quants() const { return quants_; }
  const std::vector<LoadedPlugin>& loaded() const { return loaded_; }
  const std::vector<SkippedPlugin>& skipped() const { return skipped_; }
  // What the registry could not decide (e.g. two providers of a type and no preference).
  const std::vector<std::string>& problems() const { return problems_; }
  const std::vector<BackendPlugin>& backends() const { return backends_; }

  // The backend to run on: wanted ("cpu", "cuda" or a plugin name) when given, else the first loaded of
  // the manifest's "prefer": {"backend": [...]}, else the highest probe score. Throws when none fits.
  const BackendPlugin& choose_backend(const std::string& wanted = "") const;

 private:
  struct OpenLibrary;  // a loaded library with its descriptor and host services, defined in the .cpp

  PluginHost() = default;
  void load(const ManifestPlugin& entry);
  std::unique_ptr<OpenLibrary> open_library(const ManifestPlugin& entry) const;
  // Probes, initializes and registers the plugin's table; returns its score.
  int32_t start(OpenLibrary& library, const ManifestPlugin& entry);

  std::filesystem::path manifest_path_;
  std::vector<std::unique_ptr<OpenLibrary>> libraries_;
  QuantRegistry quants_;
  std::vector<LoadedPlugin> loaded_;
  std::vector<SkippedPlugin> skipped_;
  std::vector<std::string> problems_;
  std::vector<BackendPlugin> backends_;
  std::vector<std::string> backend_preference_;
};

// Asks every CPU kernel of this process for an instruction set: the --cpu-isa flag's value ("" when not given).
// The core's own kernels take it, and every plugin opened afterwards through its host services; it wins over
// STRATA_CPU_ISA and over a plugin's options (backend-cpu's "isa"). Call it before any kernel runs: a library
// decides its level once. Throws Error naming --cpu-isa, or STRATA_CPU_ISA when that is set, for a value that
// is not auto, avx512, avx2 or scalar.
void request_cpu_isa(const std::string& flag);

// The version text "major.minor", e.g. "1.0".
std::string abi_version_text(uint16_t major, uint16_t minor);

}  // namespace strata
