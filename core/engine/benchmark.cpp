#include "core/engine/benchmark.hpp"

#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <span>

#include "core/util/error.hpp"

namespace strata {
namespace {

// Random tokens from a fixed seed: the same input on every run and every machine.
std::vector<int32_t> bench_tokens(int32_t count, int32_t n_vocab) {
  std::mt19937 random(42);
  std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
  std::vector<int32_t> tokens(count);
  for (auto& token : tokens) token = pick(random);
  return tokens;
}

}  // namespace

BenchmarkResult run_benchmark(const Model& model, const BenchmarkTest& test, int32_t repetitions,
                              SessionOptions options) {
  const int32_t n_prompt = test.n_prompt, n_decode = test.n_decode, n_depth = test.n_depth;
  if ((n_prompt > 0) == (n_decode > 0)) throw Error("a benchmark test is either a prompt or a decode test");
  if (n_depth < 0) throw Error("a benchmark's depth must not be negative");
  if (repetitions < 1) throw Error("benchmark repetitions must be at least 1");
  const ModelConfig& config = model.config();
  const int32_t n_tested = std::max(n_prompt, n_decode);
  // The depth's tokens, then the test's.
  const auto tokens = bench_tokens(n_depth + n_tested, config.n_vocab);
  const auto depth_tokens = std::span(tokens).first(n_depth), test_tokens = std::span(tokens).subspan(n_depth);
  options.n_ctx = n_depth + n_tested;
  options.max_batch = std::max(1, std::min(options.max_batch, options.n_ctx));

  // One session for the warm-up and the timed runs, its cache emptied before each (rewound to position 0), as
  // llama-bench clears its context's cache between runs: what a session sets up once (its step graphs,
  // recorded in the warm-up's second decode step; its scratch sizes) is not timed again in every run.
  Session session(model, options);
  auto run_once = [&] {
    session.rewind(0);
    if (n_depth > 0) session.forward_last(depth_tokens);
    if (n_prompt > 0) return seconds_of([&] { session.forward_last(test_tokens); });
    return seconds_of([&] {
      for (int32_t i = 0; i < n_decode; ++i) session.forward_last(test_tokens.subspan(i, 1));
    });
  };

  BenchmarkResult result;
  result.n_prompt = n_prompt;
  result.n_decode = n_decode;
  result.n_depth = n_depth;
  result.test = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_decode);
  if (n_depth > 0) result.test += " @ d" + std::to_string(n_depth);
  run_once();  // warm-up: page in the weights, settle the threads, record the step graphs
  for (int32_t r = 0; r < repetitions; ++r) result.samples.push_back(n_tested / run_once());
  const SampleStats stats = sample_stats(result.samples);
  result.tokens_per_second = stats.mean;
  result.stddev = stats.stddev;
  return result;
}

double seconds_of(const std::function<void()>& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

SampleStats sample_stats(const std::vector<double>& samples) {
  if (samples.empty()) return {};
  const double n = static_cast<double>(samples.size());
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  double variance = 0.0;
  for (const double sample : samples) variance += (sample - mean) * (sample - mean);
  return {mean, n > 1 ? std::sqrt(variance / (n - 1)) : 0.0};
}

uint64_t weight_bytes_per_decoded_token(const gguf::Model& file, const ModelConfig& config) {
  double bytes = 0.0;
  for (const auto& tensor : file.tensors()) {
    if (tensor.name == "token_embd.weight") {
      bytes += static_cast<double>(tensor.bytes) / static_cast<double>(config.n_vocab);
      if (file.find_tensor("output.weight") == nullptr) bytes += static_cast<double>(tensor.bytes);  // tied output
    } else if (tensor.name.ends_with("_exps.weight")) {
      bytes += static_cast<double>(tensor.bytes) * config.n_expert_used / config.n_expert;
    } else {
      bytes += static_cast<double>(tensor.bytes);
    }
  }
  return static_cast<uint64_t>(bytes);
}

}  // namespace strata
