// Picks the next token from a logits row, with llama.cpp's default chain and semantics:
// penalties (repetition, presence, frequency over the last repeat_last_n tokens), top-k, top-p, min-p,
// temperature, then a draw. Temperature 0 is greedy: the argmax after penalties.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace strata {

// The ranges check_sampling_params enforces are in the comments.
struct SamplingParams {
  float temperature = 0.8f;         // >= 0; 0: greedy
  int32_t top_k = 40;               // >= 0; 0: off
  float top_p = 0.95f;              // in (0, 1]; 1: off
  float min_p = 0.05f;              // in [0, 1]; 0: off; keeps tokens with p >= min_p * p(most likely)
  float repetition_penalty = 1.0f;  // > 0; 1: off; a seen token's logit is divided by it if positive, else multiplied
  float presence_penalty = 0.0f;    // finite; subtracted once from every seen token
  float frequency_penalty = 0.0f;   // finite; subtracted once per occurrence
  int32_t repeat_last_n = 64;       // >= -1: how much history the penalties see; 0: none, -1: all of it
  uint64_t seed = 0;                // any value
};

// What check_sampling_params calls each parameter in its messages: the command line's flags, or an HTTP
// request's fields.
struct SamplingParamNames {
  const char* temperature;
  const char* top_k;
  const char* top_p;
  const char* min_p;
  const char* repetition_penalty;
  const char* presence_penalty;
  const char* frequency_penalty;
  const char* repeat_last_n;
};
inline constexpr SamplingParamNames kSamplingFlags{
    "--temp",         "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--presence-penalty", "--frequency-penalty",
    "--repeat-last-n"};

// Throws strata::Error naming (names) the first parameter outside its range, NaN and infinities included. A
// Sampler checks its parameters; a command checks them before it loads a model.
void check_sampling_params(const SamplingParams& params, const SamplingParamNames& names = kSamplingFlags);

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
