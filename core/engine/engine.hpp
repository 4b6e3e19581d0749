// Everything a command needs to run a model: the plugins, the mapped GGUF file, the chosen backend and
// the model's weights on it. Commands fill EngineOptions from their flags and open an Engine.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/backend/backend.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/session.hpp"
#include "core/plugin/plugin_host.hpp"

namespace strata {

struct EngineOptions {
  std::filesystem::path model;
  std::filesystem::path manifest;  // empty: the default manifest beside the executable
  std::string backend;             // empty: the manifest's preference, else the best-scoring backend
  int threads = 0;                 // <= 0: the backend's default (physical cores)
  ExecutionOptions execution;      // how sessions drive the backend (step graphs, fused ops)
  int64_t vram_reserve_mib = -1;   // VRAM a GPU backend leaves free; < 0: its default (manifest or 512 MiB)
  int repacked_weights = -1;       // 1: a GPU backend keeps weights in faster, larger layouts; 0: as in the file;
                                   // < 0: its default (manifest or off)
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);

  const PluginHost& plugins() const { return *plugins_; }
  const gguf::Model& file() const { return *file_; }
  Backend& backend() const { return *backend_; }
  const Model& model() const { return *model_; }

 private:
  // Declaration order matters: members are destroyed last-first, so the model's weights and the backend
  // go before the plugins whose code they run in.
  std::unique_ptr<PluginHost> plugins_;
  std::unique_ptr<gguf::Model> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

// Parses "--kv" values: "f16" or "int8" to STRATA_KV_*; throws strata::Error naming the value.
int32_t parse_kv_type(const std::string& text);

}  // namespace strata
