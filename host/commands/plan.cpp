// strata plan --model M --profile P [--budgets-gib a,b | --budgets-percent p,q] [--json]: for each VRAM budget
// for experts, the slots it holds, the hit rate the profile predicts and a predicted decode speed (docs/experts.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "core/engine/engine.hpp"
#include "core/engine/expert_pool_timing.hpp"
#include "core/experts/expert_profile.hpp"
#include "core/experts/placement_estimate.hpp"
#include "core/model/model_config.hpp"
#include "core/plugin/manifest.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

// Assumed tier times, from the trace of a qwen3-30b-a3b IQ3_S decode step on an H200 at 06628f7 (docs/cuda.md,
// "At 06628f7"): gate+up 8.7 us and down 7.7 us a layer for its 8 experts; the rest of the ~2270 us token (48
// layers' attention, router, norms and projections, the head, the gaps between steps) 2270 - 48 x 16.4 = ~1480 us.
constexpr double kDefaultGpuExpertUs = 2.05;
constexpr double kDefaultDenseMs = 1.48;

struct PlanCommandOptions {
  std::filesystem::path model;
  std::filesystem::path manifest;
  int threads = 0;
  std::string profile;
  std::vector<double> budgets_gib;
  std::vector<double> budgets_percent;
  double gpu_expert_us = kDefaultGpuExpertUs;
  double dense_ms = kDefaultDenseMs;
  std::optional<double> pool_expert_us;
  int32_t pool_calls = 32;
  int32_t repetitions = 3;
  bool json = false;
};

struct Budget {
  uint64_t bytes = 0;
  double percent = 0.0;  // of all experts' bytes
};

void run_plan(const PlanCommandOptions& o) {
  // The file and the profile first: a bad profile fails before anything is loaded or timed.
  const gguf::Model file(o.model);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const ExpertProfile profile = read_expert_profile(o.profile, config.n_layer, config.n_expert);
  const auto expert_bytes = expert_bytes_per_layer(file, config.n_layer, config.n_expert);
  const uint64_t all_bytes =
      std::accumulate(expert_bytes.begin(), expert_bytes.end(), uint64_t{0}) * static_cast<uint64_t>(config.n_expert);

  std::vector<Budget> budgets;
  for (const double gib : o.budgets_gib) {
    const double bytes = std::min(std::floor(gib * 1073741824.0), 0x1p63);  // a budget past any GPU
    budgets.push_back({static_cast<uint64_t>(bytes), 100.0 * bytes / static_cast<double>(all_bytes)});
  }
  for (const double percent : o.budgets_percent) {
    budgets.push_back({static_cast<uint64_t>(std::floor(static_cast<double>(all_bytes) * percent / 100.0)), percent});
  }

  TierTimes times;
  times.dense_us = o.dense_ms * 1000.0;
  times.gpu_expert_us = o.gpu_expert_us;
  std::string pool_source;
  if (o.pool_expert_us) {
    times.pool_expert_us.assign(static_cast<size_t>(config.n_layer), *o.pool_expert_us);
    pool_source = "given (--pool-expert-us)";
  } else {
    // The CPU pool is the CPU backend; it keeps the weights in the file's mapping, so loading costs no copy.
    EngineOptions engine_options;
    engine_options.model = o.model;
    engine_options.manifest = o.manifest;
    engine_options.backend = "cpu";
    engine_options.threads = o.threads;
    const Engine engine(engine_options);
    const PoolTiming timing = time_expert_pool(engine.model(), engine.file(), o.pool_calls, o.repetitions);
    times.pool_expert_us = timing.us_per_expert;
    pool_source = "measured here: " + engine.backend().describe() + ", moe_ffn of 1 token and " +
                  std::to_string(config.n_expert_used) + " experts divided by " + std::to_string(config.n_expert_used) +
                  ", " + std::to_string(o.repetitions) + " x " + std::to_string(o.pool_calls) + " calls on " +
                  std::to_string(timing.measured_layers.size()) + " layer(s)";
  }
  const double pool_mean =
      std::accumulate(times.pool_expert_us.begin(), times.pool_expert_us.end(), 0.0) / config.n_layer;

  const std::string model_name = file.first().path().filename().string();
  if (!o.json) {
    std::printf("model %s: %d layers x %d experts (%d used), %.2f GiB of experts (%.2f MiB an expert on average)\n",
                model_name.c_str(), config.n_layer, config.n_expert, config.n_expert_used, all_bytes / 1073741824.0,
                all_bytes / 1048576.0 / config.n_layer / config.n_expert);
    std::printf("profile %s (of %s): %lld tokens over %lld prompts\n", o.profile.c_str(),
                profile.info.model_file.c_str(), static_cast<long long>(profile.info.tokens),
                static_cast<long long>(profile.info.prompts));
    std::printf("CPU pool: %.2f us per missed expert (%s)\n", pool_mean, pool_source.c_str());
    std::printf(
        "GPU: %.2f us per resident expert (assumed: --gpu-expert-us); dense part: %.3f ms per token (assumed: "
        "--dense-ms)\n",
        o.gpu_expert_us, o.dense_ms);
    std::printf("%12s %10s %9s %8s %10s %12s %12s\n", "budget GiB", "experts %", "slots", "slots %", "hit %",
                "experts ms", "decode t/s");
  }
  nlohmann::ordered_json lines = nlohmann::ordered_json::array();
  const int64_t all_pairs = int64_t{config.n_layer} * config.n_expert;
  for (const Budget& budget : budgets) {
    const ExpertPlan plan =
        plan_for_budget(config.n_layer, config.n_expert, profile.counts, expert_bytes, budget.bytes);
    const DecodeEstimate estimate = estimate_decode(plan, profile.counts, config.n_expert_used, times);
    int32_t whole_layers = 0;
    for (int32_t layer = 0; layer < config.n_layer; ++layer) whole_layers += plan.whole_layer(layer) ? 1 : 0;
    if (o.json) {
      lines.push_back({{"model", model_name},
                       {"profile", o.profile},
                       {"budget_bytes", budget.bytes},
                       {"budget_gib", budget.bytes / 1073741824.0},
                       {"budget_percent", budget.percent},
                       {"slots", plan.total_slots()},
                       {"experts", all_pairs},
                       {"slot_bytes", plan_bytes(plan, expert_bytes)},
                       {"whole_layers", whole_layers},
                       {"hit_rate", estimate.hit_rate},
                       {"expert_us", estimate.expert_us},
                       {"decode_us", estimate.us_per_token},
                       {"decode_ts", estimate.tokens_per_second},
                       {"pool_expert_us", pool_mean},
                       {"pool_measured", !o.pool_expert_us.has_value()},
                       {"gpu_expert_us", o.gpu_expert_us},
                       {"dense_ms", o.dense_ms}});
    } else {
      std::printf("%12.4g %10.1f %9lld %8.1f %10.2f %12.3f %12.1f\n", budget.bytes / 1073741824.0, budget.percent,
                  static_cast<long long>(plan.total_slots()), 100.0 * plan.total_slots() / all_pairs,
                  100.0 * estimate.hit_rate, estimate.expert_us / 1000.0, estimate.tokens_per_second);
    }
  }
  if (o.json) std::cout << lines.dump(1) << "\n";
}

}  // namespace

void register_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanCommandOptions>();
  auto* command = app.add_subcommand(
      "plan", "For VRAM budgets for experts: the slots each holds, the profile's hit rate and a predicted decode t/s");
  command->footer(
      "Slots: a budget over the bytes of one expert's gate, up and down rows in each layer, as the file stores them,\n"
      "filled with the (layer, expert) pairs the profile counts most, wherever their layer (ExpertPlan).\n"
      "Hit rate: the share of the profile's routed pairs those slots take; it predicts the cache's only as far\n"
      "as the profile's text is like what is served.\n"
      "Decode time per token = dense + sum over layers of max(hits x GPU time, misses x CPU pool time), a layer's\n"
      "hits being n_used x its own hit rate. MEASURED here (unless --pool-expert-us): the CPU pool's time per missed\n"
      "expert, the CPU backend's moe_ffn of 1 token and n_used experts on the file's own expert tensors (one layer\n"
      "per combination of their types), divided by n_used. ASSUMED: the GPU's time per resident expert\n"
      "(--gpu-expert-us) and the dense part (--dense-ms), whose defaults are a qwen3-30b-a3b IQ3_S decode on an\n"
      "H200 (docs/cuda.md; 440 t/s for the whole model in VRAM): set them from `strata bench` on the target GPU.\n"
      "LEFT OUT: copying a layer's activations to the host and back, the cache's swaps, prompts (decode only).");
  command->add_option("-m,--model", o->model, "GGUF model (any part of a split model)")->required();
  command->add_option("--manifest", o->manifest,
                      "Plugin manifest, a JSON file of at most " + byte_size_text(kMaxManifestBytes) +
                          " (default: strata-manifest.json beside the binary)");
  command->add_option("-t,--threads", o->threads, thread_count_help("CPU pool threads", "0: the physical cores"))
      ->check(thread_count_check());
  command->add_option("--profile", o->profile, "Expert profile (from strata profile)")->required();
  auto* gib =
      command
          ->add_option("--budgets-gib", o->budgets_gib, "VRAM budgets for experts in GiB (comma-separated), each >= 0")
          ->delimiter(',')
          ->check(CLI::NonNegativeNumber);
  auto* percent = command
                      ->add_option("--budgets-percent", o->budgets_percent,
                                   "Budgets as percents of all experts' bytes, each in [0, 100] (default: "
                                   "0,10,25,50,100 when --budgets-gib is not given)")
                      ->delimiter(',')
                      ->check(CLI::Range(0.0, 100.0));
  gib->excludes(percent);
  command
      ->add_option("--gpu-expert-us", o->gpu_expert_us,
                   "ASSUMED time of one resident expert for one token on the GPU, us, >= 0")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--dense-ms", o->dense_ms,
                   "ASSUMED time of a decoded token outside the routed experts (attention, router, head, gaps), ms, "
                   ">= 0")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--pool-expert-us", o->pool_expert_us,
                   "Time of one missed expert for one token on the CPU pool, us, > 0, instead of measuring it (the "
                   "model is then only read, not loaded)")
      ->check(CLI::PositiveNumber);
  command->add_option("--pool-calls", o->pool_calls, "moe_ffn calls per timed round of the CPU pool")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("-r,--repetitions", o->repetitions, "Timed rounds of the CPU pool, after one warm-up")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--json", o->json, "Print a JSON array, one object per budget");
  command->callback([o] {
    if (o->budgets_gib.empty() && o->budgets_percent.empty()) o->budgets_percent = {0, 10, 25, 50, 100};
    run_plan(*o);
  });
}

}  // namespace strata::host
