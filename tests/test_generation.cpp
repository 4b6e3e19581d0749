// Generation: greedy decoding follows the forward's argmax, seeds reproduce, stop strings never leak; the
// options' checks and the context a generation needs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include "core/engine/engine.hpp"
#include "core/engine/generation.hpp"
#include "core/util/error.hpp"
#include "plugins/plugin_test_support.hpp"
#include "support/error_message.hpp"
#include "support/model_copy.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

TEST(StopStrings, HoldsBackAPossibleStartAndCutsAtTheStop) {
  StopStrings stops({"</end>", "STOP"});
  EXPECT_EQ(stops.push("hello </"), "hello ");  // "</" may begin "</end>"
  EXPECT_EQ(stops.push("b> and S"), "</b> and ");
  EXPECT_FALSE(stops.stopped());
  EXPECT_EQ(stops.push("TO"), "");
  EXPECT_EQ(stops.push("P tail"), "");
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(stops.push("more"), "");
  EXPECT_EQ(stops.finish(), "");
}

TEST(StopStrings, ReleasesWhatWasHeldAtTheEnd) {
  StopStrings stops({"STOP"});
  EXPECT_EQ(stops.push("abc ST"), "abc ");
  EXPECT_EQ(stops.finish(), "ST");
  StopStrings none({});
  EXPECT_EQ(none.push("anything"), "anything");
}

using test::error_of;

TEST(GenerationOptions, NegativeMaxTokensAndBadSamplingAreRefusedNamingTheFlag) {
  GenerationOptions options;
  options.max_tokens = -1;
  EXPECT_EQ(error_of([&] { check_generation_options(options); }).rfind("--max-tokens (-n) is -1", 0), 0u);
  options.max_tokens = 0;
  EXPECT_EQ(error_of([&] { check_generation_options(options); }), "");
  options.sampling.min_p = 1.5f;
  EXPECT_EQ(error_of([&] { check_generation_options(options); }).rfind("--min-p is 1.5", 0), 0u);
}

// Without --ctx the context is the prompt plus the tokens to generate, which must fit the model's trained
// context and an int32 (-n 2147483647 used to overflow into a negative context).
TEST(GenerationContext, IsThePromptAndMaxTokensWithinTheTrainedContext) {
  EXPECT_EQ(generation_context(3, 6, 4096), 9);
  EXPECT_EQ(generation_context(4000, 96, 4096), 4096);
  const int32_t most = std::numeric_limits<int32_t>::max();
  const std::string past = error_of([&] { generation_context(5, most, 4096); });
  EXPECT_NE(past.find("--max-tokens (-n) 2147483647 need a context of 2147483652 tokens, more than the model's "
                      "context_length 4096"),
            std::string::npos)
      << past;
  EXPECT_EQ(generation_context(1, most - 1, 0), most);  // no trained context: only an int32 bounds it
  EXPECT_NE(error_of([&] { generation_context(5, most, 0); }).find("the largest context, 2147483647"),
            std::string::npos);
}

class GenerationOnReference : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
    ASSERT_REFERENCE(path_);
    EngineOptions options;
    options.model = path_;
    options.manifest = test::default_manifest_path();
    options.threads = 2;
    engine_ = std::make_unique<Engine>(options);
  }
  std::filesystem::path path_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(GenerationOnReference, GreedyFollowsTheArgmaxOfTheForward) {
  const std::vector<int32_t> prompt = {5, 17, 42, 99};
  GenerationOptions options;
  options.max_tokens = 12;
  options.sampling.temperature = 0.0f;
  Session session(engine_->model(), {.n_ctx = 64, .execution = {}});
  const auto generated = generate(session, prompt, options, [](int32_t) { return true; });
  ASSERT_EQ(generated.size(), 12u);

  // The same sequence through one forward call: each generated token is the argmax before it.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end() - 1);
  Session check(engine_->model(), {.n_ctx = 64, .execution = {}});
  const auto logits = check.forward(all, true);
  const auto vocab = static_cast<size_t>(engine_->model().config().n_vocab);
  for (size_t i = 0; i < generated.size(); ++i) {
    const auto row = logits.begin() + static_cast<std::ptrdiff_t>((prompt.size() - 1 + i) * vocab);
    EXPECT_EQ(std::max_element(row, row + static_cast<std::ptrdiff_t>(vocab)) - row, generated[i]) << "step " << i;
  }
}

TEST_F(GenerationOnReference, SameSeedSameOutputAndTheCallbackCanStop) {
  GenerationOptions options;
  options.max_tokens = 16;
  options.sampling.temperature = 1.0f;
  options.sampling.seed = 7;
  auto run = [&] {
    Session session(engine_->model(), {.n_ctx = 64, .execution = {}});
    return generate(session, std::vector<int32_t>{1, 2, 3}, options, [](int32_t) { return true; });
  };
  EXPECT_EQ(run(), run());
  Session session(engine_->model(), {.n_ctx = 64, .execution = {}});
  int calls = 0;
  const auto stopped = generate(session, std::vector<int32_t>{1, 2, 3}, options, [&](int32_t) { return ++calls < 3; });
  EXPECT_EQ(stopped.size(), 3u);
}

// A cache past the memory left fails at once with the numbers, instead of the CPU backend zeroing it until the
// OOM killer comes.
TEST_F(GenerationOnReference, AKvCacheLargerThanTheMemoryIsRefusedWithItsSize) {
  try {
    Session session(engine_->model(), {.n_ctx = 1 << 30, .execution = {}});
    FAIL() << "a KV cache of 2^30 positions was allocated";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("the KV cache of " + std::to_string(1 << 30) + " positions"), std::string::npos) << message;
    EXPECT_NE(message.find(" GiB of memory available"), std::string::npos) << message;
  }
}

// A tokenizer whose token count differs from the embedding rows would fail only mid-generation (an id with no
// row, or a row with no token): the model refuses to load, naming both counts and the tensor.
TEST_F(GenerationOnReference, AVocabularyThatDoesNotMatchTheEmbeddingsIsRefusedAtLoad) {
  const gguf::Model model(path_);
  gguf::Value tokens = *model.find("tokenizer.ggml.tokens");
  const auto rows = std::get<gguf::Array>(tokens.data).items.size();
  std::get<gguf::Array>(tokens.data).items.pop_back();
  testing::ScratchFolder folder;
  const auto copy = folder.path() / "short-vocabulary.gguf";
  test::ModelChanges changes;
  changes.metadata["tokenizer.ggml.tokens"] = tokens;
  test::write_model_copy(model, copy, changes);
  EngineOptions options;
  options.model = copy;
  options.manifest = test::default_manifest_path();
  try {
    const Engine engine(options);
    FAIL() << "a model whose vocabulary has one token less than its embeddings loaded";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), copy.string() + ": tokenizer.ggml.tokens holds " + std::to_string(rows - 1) +
                                             " tokens, but token_embd.weight has " + std::to_string(rows) +
                                             " rows (one per token): the vocabulary does not match the model");
  }
}

TEST(GenerateCli, PrintsTokenIdsAndIsDeterministicWithASeed) {
  const auto model = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const std::string command = test::shell_quote(test::strata_executable().string()) +
                              " generate --log-level warn --model " + test::shell_quote(model.string()) +
                              " --tokens 10,20,30 -n 6 --temp 0.9 --seed 3";
  const auto first = test::run_command(command);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, test::run_command(command).out);
  int count = 0;
  for (size_t i = 0; i < first.out.size(); ++i) count += first.out[i] == ' ' ? 1 : 0;
  EXPECT_EQ(count, 5) << first.out;
  // Flags for the GPU backend change nothing on the CPU backend (graphs are off there anyway), nor does
  // running the separate ops in place of the fused ones.
  const auto on_cpu = test::run_command(command + " --backend cpu");
  const auto with_gpu_flags =
      test::run_command(command + " --backend cpu --vram-reserve-mib 100000000 --no-graphs --no-fused-ops");
  ASSERT_EQ(with_gpu_flags.exit_code, 0) << with_gpu_flags.err;
  EXPECT_EQ(with_gpu_flags.out, on_cpu.out);
  const auto negative = test::run_command(command + " --vram-reserve-mib -5");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.err.find("--vram-reserve-mib"), std::string::npos) << negative.err;
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(GenerateCli, StreamsTextFromASynthModel) {
  const auto model = std::filesystem::temp_directory_path() / "strata-generate-text.gguf";
  const std::string strata = test::shell_quote(test::strata_executable().string());
  const auto synth = test::run_command(strata + " synth --arch qwen2moe --preset tiny --type q8_0 --output " +
                                       test::shell_quote(model.string()));
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const auto result = test::run_command(strata + " generate --log-level warn --model " +
                                        test::shell_quote(model.string()) + " -p 'The experts' -n 12 --seed 5");
  std::filesystem::remove(model);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_GT(result.out.size(), 1u) << "some text, then a newline";
  EXPECT_EQ(result.out.back(), '\n');
}

}  // namespace
}  // namespace strata
