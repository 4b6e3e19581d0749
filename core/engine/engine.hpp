// Everything a command needs to run a model: the plugins, the mapped GGUF file, the chosen backend and
// the model's weights on it. Commands fill EngineOptions from their flags and open an Engine.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "core/backend/backend.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/model/session.hpp"
#include "core/plugin/plugin_host.hpp"
#include "core/util/timeline_trace.hpp"

namespace strata {

struct EngineOptions {
  std::filesystem::path model;
  std::filesystem::path manifest;  // empty: the default manifest beside the executable
  std::string backend;             // empty: the manifest's preference, else the best-scoring backend
  int threads = 0;                 // <= 0: the backend's default (physical cores)
  int pool_workers = -1;           // a hybrid placement's expert pool's threads; < 0: threads; 0: physical cores
  int32_t cpu_pin = -1;            // 1: CPU backends pin their worker threads, one per core; < 0: their default (0)
  int64_t cpu_poll_us = -1;        // how long idle CPU threads poll for work; < 0: the CPU backend's default
  ExecutionOptions execution;      // how sessions drive the backend (step graphs, fused ops)
  int64_t vram_reserve_mib = -1;   // VRAM a GPU backend leaves free; < 0: its default (manifest or 512 MiB)
  int gpu = -1;                    // the GPU a GPU backend runs on (its option "device"); < 0: its default (0)
  int repacked_weights = -1;       // 1: a GPU backend keeps weights in faster, larger layouts; 0: as in the file;
                                   // < 0: its default (manifest or off)
  // Hybrid expert placement (docs/experts.md): "auto", "off" or a slot count; empty: auto on a backend that can
  // hold an expert cache, off on the CPU backend unless vram_budget_gib makes it stand in for a GPU.
  std::string expert_cache;
  double vram_budget_gib = 0.0;          // > 0: the memory the backend may use in all (its option memory_budget_mib)
  ExpertCacheOptions expert_options;     // slots come from expert_cache
  std::filesystem::path expert_profile;  // a `strata profile` file that ranks the experts for the cache
  std::string host_experts = "auto";     // the experts' host memory: auto, pinned or mapped (expert_store.hpp)
  std::filesystem::path expert_trace;  // a timeline of the placement's split layers is written there (--trace-experts)
};

class Engine {
 public:
  explicit Engine(const EngineOptions& options);

  const PluginHost& plugins() const { return *plugins_; }
  const gguf::Model& file() const { return *file_; }
  Backend& backend() const { return *backend_; }
  // The CPU backend serving the experts the device does not hold, or nullptr without a hybrid placement.
  Backend* expert_pool() const { return expert_pool_.get(); }
  const Model& model() const { return *model_; }
  // Writes the timeline that --trace-experts asked for, if it did (the spans recorded so far).
  void finish_expert_trace() const;

 private:
  // Declaration order matters: members are destroyed last-first, so the model's weights and the backend
  // go before the plugins whose code they run in.
  std::unique_ptr<PluginHost> plugins_;
  std::unique_ptr<gguf::Model> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> expert_pool_;  // the CPU backend of a hybrid placement
  std::unique_ptr<Model> model_;
  std::shared_ptr<TimelineTrace> expert_trace_;
};

// The placement options asks for on device (cpu_device: the CPU backend) for a model of model_bytes, or nothing
// where the backend holds every expert (off; by default, a backend without an expert cache or a model that fits
// with room to spare); throws strata::Error for a bad --expert-cache value.
std::optional<ExpertCacheOptions> expert_placement(const EngineOptions& options, bool cpu_device, Backend& device,
                                                   uint64_t model_bytes);

// Parses "--kv" values: "f16" or "int8" to STRATA_KV_*; throws strata::Error naming the value.
int32_t parse_kv_type(const std::string& text);

}  // namespace strata
