// Picks the next token from a logits row, with llama.cpp's default chain and semantics:
// penalties (repetition, presence, frequency over the last repeat_last_n tokens), top-k, top-p, min-p,
// temperature, then a draw. Temperature 0 is greedy: the argmax after penalties.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace strata {

struct SamplingParams {
  float temperature = 0.8f;         // 0: greedy
  int32_t top_k = 40;               // <= 0: off
  float top_p = 0.95f;              // >= 1: off
  float min_p = 0.05f;              // <= 0: off; keeps tokens with p >= min_p * p(most likely)
  float repetition_penalty = 1.0f;  // 1: off; a seen token's logit is divided by it if positive, else multiplied
  float presence_penalty = 0.0f;    // subtracted once from every seen token
  float frequency_penalty = 0.0f;   // subtracted once per occurrence
  int32_t repeat_last_n = 64;       // how much history the penalties see; 0: none, -1: all of it
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits: one row over the vocabulary; history: the tokens so far (prompt and output), oldest first.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  void apply_penalties(std::span<const int32_t> history);
  void keep_top_k();
  void keep_top_p();
  void keep_min_p();
  int32_t draw();
  // Sorts the candidates by logit, most likely first.
  void sort_candidates();

  SamplingParams params_;
  std::mt19937_64 random_;
  std::vector<Candidate> candidates_;
  bool sorted_ = false;
};

}  // namespace strata
