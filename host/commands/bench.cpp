// strata bench --model M [-p 512] [-n 128] [-d 0] [-t T] [--json]: prompt and decode tokens/s, one line per
// configuration in the style of llama-bench; with --ops, single ops of the model timed alone instead.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/engine/benchmark.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/op_benchmark.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

struct BenchOptions {
  EngineOptions engine;
  std::vector<int32_t> prompt = {512};
  std::vector<int32_t> decode = {128};
  std::vector<int32_t> depth = {0};
  std::vector<int32_t> threads;
  int32_t repetitions = 3;
  std::string kv = "f16";
  int32_t batch = 512;
  bool json = false;
  bool stats = false;
  std::vector<std::string> ops;
  int32_t op_calls = 200;
  int32_t op_tokens = 1;
  int32_t op_experts = 0;
};

uint64_t model_params(const gguf::Model& file) {
  uint64_t params = 0;
  for (const auto& tensor : file.tensors()) params += tensor.n_elements;
  return params;
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  auto* command =
      app.add_subcommand("bench", "Measure prompt (pp) and decode (tg) tokens/s, one line per configuration");
  add_engine_options(command, options->engine);
  command->add_option("-p,--n-prompt", options->prompt, "Prompt lengths to test (0 skips)")->capture_default_str();
  command->add_option("-n,--n-gen", options->decode, "Decode lengths to test (0 skips)")->capture_default_str();
  command
      ->add_option("-d,--depth", options->depth,
                   "Tokens already in the cache when each test starts (read untimed first), as llama-bench's -d")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option(
          "--thread-counts", options->threads,
          thread_count_help("Several thread counts to compare, overriding --threads; each", "0: the physical cores"))
      ->check(thread_count_check());
  command
      ->add_option("-r,--repetitions", options->repetitions,
                   "Timed runs per test, after one warm-up, all in one session whose cache is emptied before each (as "
                   "llama-bench); with --ops, timed rounds per op")
      ->capture_default_str();
  command->add_option("--kv", options->kv, "KV cache type: f16 or int8")->capture_default_str();
  command->add_option("--batch", options->batch, "Tokens per forward step for prompts")->capture_default_str();
  command->add_flag("--json", options->json,
                    "Print a JSON array, one object per configuration (with a hybrid expert placement, its stats)");
  command->add_flag("--stats", options->stats,
                    "With a hybrid expert placement, a line of its stats under each test (hit rate, pairs per tier, "
                    "pool and waiting ms per step, PCIe bytes, adaptive rounds)");
  command
      ->add_option("--ops", options->ops,
                   "Instead of pp/tg, time these ops of the model alone, each call on the next layer's weights: "
                   "moe_ffn, attn_q, attn_k, attn_v, attn_output, output (comma-separated; without step graphs "
                   "or the kernels around them in a step)")
      ->delimiter(',');
  command->add_option("--op-calls", options->op_calls, "Calls per timed round of an op (--ops)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--op-tokens", options->op_tokens, "Tokens per call of an op (--ops)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--op-experts", options->op_experts,
                   "moe_ffn (--ops): experts each token computes, the others weighted 0 as a hybrid placement hands "
                   "the pool its share (0: all the model's n_expert_used)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  command->callback([options] {
    auto thread_counts = options->threads;
    if (thread_counts.empty()) thread_counts.push_back(options->engine.threads);
    nlohmann::ordered_json results = nlohmann::ordered_json::array();
    for (const int32_t threads : thread_counts) {
      EngineOptions engine_options = options->engine;
      engine_options.threads = threads;
      const Engine engine(engine_options);
      if (!options->ops.empty()) {
        for (const std::string& op : options->ops) {
          const auto result = run_op_benchmark(engine.model(), engine.file(), op,
                                               {.n_tokens = options->op_tokens,
                                                .calls = options->op_calls,
                                                .repetitions = options->repetitions,
                                                .layers = {},
                                                .experts_per_token = options->op_experts});
          const double gbps = result.weight_bytes_per_call / (result.us_per_call * 1e3);
          const double gflops = result.flops_per_call / (result.us_per_call * 1e3);
          nlohmann::ordered_json line = {{"model", engine.file().first().path().filename().string()},
                                         {"backend", engine.backend().name()},
                                         {"backend_info", engine.backend().describe()},
                                         {"threads", threads},
                                         {"op", result.op},
                                         {"n_tokens", result.n_tokens},
                                         {"experts_per_token", result.experts_per_token},
                                         {"calls", options->op_calls},
                                         {"avg_us", result.us_per_call},
                                         {"stddev_us", result.stddev_us},
                                         {"samples_us", result.samples},
                                         {"weight_bytes", result.weight_bytes_per_call},
                                         {"weight_gbps", gbps},
                                         {"flops", result.flops_per_call},
                                         {"gflops", gflops}};
          if (options->json) {
            results.push_back(line);
          } else {
            std::printf("%-32s %-40s %-12s x%-3d %10.2f ± %.2f us  (%.2f MB weights, %.1f GB/s, %.1f GFLOP/s)\n",
                        line["model"].get<std::string>().c_str(), engine.backend().describe().c_str(), op.c_str(),
                        result.n_tokens, result.us_per_call, result.stddev_us, result.weight_bytes_per_call / 1e6, gbps,
                        gflops);
            std::fflush(stdout);
          }
        }
        engine.finish_expert_trace();
        continue;
      }
      const uint64_t bytes_per_token = weight_bytes_per_decoded_token(engine.file(), engine.model().config());
      std::vector<BenchmarkTest> tests;
      for (const int32_t d : options->depth) {
        for (const int32_t p : options->prompt)
          if (p > 0) tests.push_back({.n_prompt = p, .n_depth = d});
        for (const int32_t n : options->decode)
          if (n > 0) tests.push_back({.n_decode = n, .n_depth = d});
      }
      for (const BenchmarkTest& test : tests) {
        const HybridExperts* experts = engine.model().experts();
        const ExpertStats before = experts != nullptr ? experts->stats() : ExpertStats{};
        const auto result = run_benchmark(engine.model(), test, options->repetitions,
                                          {.kv_type = parse_kv_type(options->kv),
                                           .max_batch = options->batch,
                                           .execution = options->engine.execution});
        nlohmann::ordered_json line = {
            {"model", engine.file().first().path().filename().string()},
            {"model_size", engine.file().tensor_bytes()},
            {"model_params", model_params(engine.file())},
            {"backend", engine.backend().name()},
            {"backend_info", engine.backend().describe()},
            {"threads", threads},
            {"kv", options->kv},
            {"graphs", options->engine.execution.step_graphs && engine.backend().has_graphs()},
            {"fused_ops", options->engine.execution.fused_ops &&
                              (engine.backend().has_attention_rope() || engine.backend().has_add_rms_norm() ||
                               engine.backend().has_route_experts())},
            {"concurrent_ops", options->engine.execution.concurrent_ops && engine.backend().has_concurrency()},
            {"normed_inputs", options->engine.execution.fused_ops && options->engine.execution.normed_inputs &&
                                  engine.backend().has_normed_inputs()},
            {"test", result.test},
            {"n_prompt", result.n_prompt},
            {"n_gen", result.n_decode},
            {"n_depth", result.n_depth},
            {"avg_ts", result.tokens_per_second},
            {"stddev_ts", result.stddev},
            {"samples_ts", result.samples},
            {"weight_bytes_per_token", bytes_per_token}};
        if (test.n_decode > 0)
          line["weight_gbps"] = result.tokens_per_second * static_cast<double>(bytes_per_token) / 1e9;
        if (experts != nullptr) {
          line["expert_cache"] = experts->describe();
          line["expert_pool"] = engine.expert_pool()->describe();
          line["experts"] = experts->stats().since(before).to_json();
        }
        if (options->json) {
          results.push_back(line);
        } else {
          std::printf("%-32s %8.2f GiB  %-40s %-6s %14s  %10.2f ± %.2f t/s", line["model"].get<std::string>().c_str(),
                      engine.file().tensor_bytes() / 1073741824.0, engine.backend().describe().c_str(),
                      options->kv.c_str(), result.test.c_str(), result.tokens_per_second, result.stddev);
          if (test.n_decode > 0)
            std::printf("  (%.1f MB weights/token, %.2f GB/s)", bytes_per_token / 1e6,
                        line["weight_gbps"].get<double>());
          std::printf("\n");
          if (experts != nullptr && options->stats)
            std::printf("  %s\n", experts->stats().since(before).text().c_str());
          std::fflush(stdout);
        }
      }
      engine.finish_expert_trace();
    }
    if (options->json) std::cout << results.dump(1) << "\n";
  });
}

}  // namespace strata::host
