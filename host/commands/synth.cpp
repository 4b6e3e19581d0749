// strata synth --arch A --preset P --type T --output F [--seed S] [--routing-skew S] [--threads N]
#include <chrono>
#include <cstdio>
#include <regex>
#include <set>

#include "core/gguf/ggml_types.hpp"
#include "core/synth/synth_model.hpp"
#include "core/util/log.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"
#include "host/commands/plugin_options.hpp"

namespace strata::host {
namespace {

struct SynthCommandOptions {
  std::string arch = "qwen3moe";
  std::string preset = "tiny";
  std::string type = "iq3_s";
  std::string output;
  uint64_t seed = 0;
  float routing_skew = 0.0f;
  uint64_t exact_max_values = synth::SynthOptions{}.exact_max_values;
  unsigned threads = 0;
  std::string manifest;
};

// "blk.7.ffn_up_exps.weight" -> "blk.*.ffn_up_exps.weight", so the fast-path list stays one line.
std::string fast_path_summary(const synth::SynthReport& report) {
  static const std::regex block_index(R"(^blk\.\d+\.)");
  std::set<std::string> patterns;
  size_t count = 0;
  for (const auto& tensor : report.tensors) {
    if (!tensor.fast_path) continue;
    ++count;
    patterns.insert(std::regex_replace(tensor.name, block_index, "blk.*."));
  }
  std::string list;
  for (const auto& pattern : patterns) list += (list.empty() ? "" : ", ") + pattern;
  return std::to_string(count) + " tensors" + (list.empty() ? "" : " (" + list + ")");
}

void run_synth(const SynthCommandOptions& o) {
  synth::SynthOptions options;
  options.shape = synth::preset_shape(synth::parse_arch(o.arch), o.preset);
  options.mix = synth::parse_quant_mix(o.type);
  options.seed = o.seed;
  options.routing_skew = o.routing_skew;
  options.exact_max_values = o.exact_max_values;
  options.threads = o.threads;

  const auto plugins = open_plugins(o.manifest);
  const auto start = std::chrono::steady_clock::now();
  const auto report = synth::synthesize(
      options, plugins->quants(), o.output, [](const synth::SynthTensorReport& tensor, size_t index, size_t count) {
        log().debug("[{}/{}] {} {}{}", index + 1, count, tensor.name, gguf::find_type(tensor.type)->name,
                    tensor.fast_path ? " (fast path)" : "");
      });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %zu tensors, %llu bytes (%.1f MiB) in %.1f s\n", o.output.c_str(), report.tensors.size(),
              static_cast<unsigned long long>(report.file_bytes), report.file_bytes / 1048576.0, seconds);
  std::printf("fast path (pooled codec blocks): %s\n", fast_path_summary(report).c_str());
}

}  // namespace

void register_synth_command(CLI::App& app) {
  auto o = std::make_shared<SynthCommandOptions>();
  auto* command =
      app.add_subcommand("synth", "Write a random-weight MoE model with real shapes, metadata and quant mix");
  command->footer(
      "Weights are random (seeded: one seed gives a byte-identical file). Tensors above --exact-max-values values\n"
      "are assembled from a pool of blocks made by the real quantizer instead of quantizing every row.\n"
      "--routing-skew is a SIMULATION of trained routers' uneven expert use, not a model of a real router:\n"
      "token embeddings share a direction that each layer's router rows favour by a per-layer random expert\n"
      "ranking, so top-1 expert popularity follows roughly a Zipf law with that exponent. See docs/synth.md.");
  command->add_option("--arch", o->arch, "qwen3moe or qwen2moe")->capture_default_str();
  command->add_option("--preset", o->preset, "tiny, cpu-bench or qwen3-30b-a3b")->capture_default_str();
  command->add_option("--type", o->type, "quant mix: iq3_s, iq3_xxs, q8_0 or f32")->capture_default_str();
  command->add_option("--output", o->output, "GGUF file to write")->required();
  command->add_option("--seed", o->seed, "random seed")->capture_default_str();
  command
      ->add_option("--routing-skew", o->routing_skew,
                   "Zipf exponent of the SIMULATED expert popularity (0 = uniform routing)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--exact-max-values", o->exact_max_values,
                   "quantize tensors up to this many values row by row; larger ones take the fast path")
      ->capture_default_str();
  command->add_option("--threads", o->threads, thread_count_help("worker threads", "0: all hardware threads"))
      ->capture_default_str()
      ->check(thread_count_check());
  add_manifest_option(command, o->manifest);
  command->callback([o] { run_synth(*o); });
}

}  // namespace strata::host
