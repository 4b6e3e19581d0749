// Prompt and decode speed of a model on a backend, measured the way llama-bench does: a prompt test
// reads n_prompt tokens in one forward call; a decode test generates n_decode tokens one at a time. Both
// start after n_depth tokens already in the cache (read untimed first; 0: an empty cache). Each test runs
// once to warm up, then `repetitions` times.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model/session.hpp"

namespace strata {

// One test: a prompt test (n_prompt > 0) or a decode test (n_decode > 0), after n_depth cached tokens.
struct BenchmarkTest {
  int32_t n_prompt = 0;
  int32_t n_decode = 0;
  int32_t n_depth = 0;
};

struct BenchmarkResult {
  std::string test;  // "pp512" or "tg128", with " @ d4096" after 4096 cached tokens
  int32_t n_prompt = 0;
  int32_t n_decode = 0;
  int32_t n_depth = 0;
  double tokens_per_second = 0.0;
  double stddev = 0.0;  // of tokens_per_second over the repetitions
  std::vector<double> samples;
};

// Wall-clock seconds that work() takes.
double seconds_of(const std::function<void()>& work);

// The mean of samples and their sample standard deviation (0 for a single sample), as llama-bench reports.
struct SampleStats {
  double mean = 0.0;
  double stddev = 0.0;
};
SampleStats sample_stats(const std::vector<double>& samples);

// Runs one test with a fresh session each time, made with session's options (its context is sized to the
// depth plus the test).
BenchmarkResult run_benchmark(const Model& model, const BenchmarkTest& test, int32_t repetitions,
                              SessionOptions session);

// Bytes of weights one decoded token reads: every dense tensor once, the routed share (used / total)
// of each expert tensor, and one row of the embedding table. The memory-bandwidth floor of decoding.
uint64_t weight_bytes_per_decoded_token(const gguf::Model& file, const ModelConfig& config);

}  // namespace strata
