// Generating tokens: the prompt read in one forward call, then one sampled token per step, streamed to a
// callback, until max tokens, an end-of-generation token, or the callback says stop.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/model/session.hpp"
#include "core/sampling/sampler.hpp"

namespace strata {

struct GenerationOptions {
  int32_t max_tokens = 128;  // >= 0
  SamplingParams sampling;
  std::set<int32_t> end_tokens;  // tokens that end the generation (EOS, EOT); they are not passed on
};

// Throws strata::Error naming the flag of the first invalid option: --max-tokens below 0, or a sampling parameter
// (check_sampling_params). generate() checks too; a command checks before it loads a model.
void check_generation_options(const GenerationOptions& options);

// The context a generation needs when none is given: the prompt and max_tokens after it. Throws strata::Error
// naming --max-tokens when that is more than the model was trained for (n_ctx_train; not checked when 0, unknown).
int32_t generation_context(size_t prompt_tokens, int32_t max_tokens, int32_t n_ctx_train);

// How many of a session's cached tokens (cached, in order) a new prompt can keep: their common prefix, less what
// leaves the prompt nothing to read (its last token is read again, for its logits). A chat resent with one more
// turn then reads only the new part.
size_t reusable_prefix(std::span<const int32_t> cached, std::span<const int32_t> prompt);

// Returns the generated tokens (without an end token). on_token returns false to stop early.
std::vector<int32_t> generate(Session& session, std::span<const int32_t> prompt, const GenerationOptions& options,
                              const std::function<bool(int32_t)>& on_token);

// Holds back streamed text that could be the start of a stop string, so that a stop string never reaches
// the output, even when it arrives split over several tokens.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds text; returns what can be printed now. After a stop string appears, stopped() is true and the
  // text before it is the last output.
  std::string push(const std::string& text);
  // What was held back, at the end of generation.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace strata
