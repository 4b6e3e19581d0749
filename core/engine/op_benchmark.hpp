// One backend op of a model timed alone, call after call (llama.cpp's test-backend-ops perf mode, on the
// model's own weights): what a kernel costs without the rest of a decode step around it, with less spread
// than a whole tg test, for work on one kernel. Each call takes the next layer's weights, and moe_ffn the
// next of 16 fixed routings, so that a call's weights come from memory, not from a cache the call before
// filled. What it leaves out: the kernels around the op in a step (whose tails and starts overlap it
// there), and step graphs (the ops are called one by one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gguf/gguf_file.hpp"
#include "core/model/session.hpp"

namespace strata {

struct OpBenchmarkResult {
  std::string op;  // moe_ffn, attn_q, attn_k, attn_v, attn_output or output
  int32_t n_tokens = 0;
  int32_t experts_per_token = 0;       // moe_ffn: the experts each token computed; else 0
  double us_per_call = 0.0;            // mean over the repetitions
  double stddev_us = 0.0;              // of us_per_call over the repetitions
  double weight_bytes_per_call = 0.0;  // the weights a call reads, a mean over the layers (moe_ffn: its experts')
  double flops_per_call = 0.0;         // 2 x the multiply-adds of its products (moe_ffn: every token's experts)
  std::vector<double> samples;         // us per call, one per repetition
};

struct OpBenchmarkOptions {
  int32_t n_tokens = 1;         // tokens per call
  int32_t calls = 200;          // calls per timed round
  int32_t repetitions = 3;      // timed rounds
  std::vector<int32_t> layers;  // the layers whose weights the calls take in turn; empty: every layer
  // moe_ffn: experts each token computes, its first ones (the others' weights 0, skipped, as a hybrid placement
  // hands the pool its share of a token's experts); 0: all n_expert_used
  int32_t experts_per_token = 0;
};

// Times `calls` calls of op (moe_ffn: the routed experts' FFN of a layer, its input normed as in a step; or
// the matmuls attn_q, attn_k, attn_v, attn_output and output, the head) over n_tokens tokens, after one
// untimed round, `repetitions` times; each round ends by reading the op's output back, so it counts every
// call's whole run. The calls take the weights of the layers in turn (the head has one weight).
// Throws strata::Error naming an unknown op, one the model lacks (moe_ffn without routed experts), a layer
// outside the model, or bad counts.
OpBenchmarkResult run_op_benchmark(const Model& model, const gguf::Model& file, const std::string& op,
                                   const OpBenchmarkOptions& options);

}  // namespace strata
