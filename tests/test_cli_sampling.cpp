// Sampling flags and -n on the command line: a value outside its range fails the command with one line naming
// the flag (--min-p 1.5 used to drop every candidate and read past the empty list; -n 2147483647 overflowed
// the context).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

class SamplingCli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_REFERENCE(model_); }
  test::CommandResult run(const std::string& command, const std::string& flags) const {
    return test::run_command(test::shell_quote(test::strata_executable().string()) + " " + command +
                             " --log-level warn --backend cpu -t 2 --model " + test::shell_quote(model_.string()) +
                             " " + flags + " </dev/null");
  }

  const std::filesystem::path model_ = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
};

TEST_F(SamplingCli, OutOfRangeValuesFailNamingTheFlag) {
  const struct {
    const char* flags;
    const char* error;
  } cases[] = {
      {"--min-p 1.5", "--min-p is 1.5"},
      {"--min-p -0.5", "--min-p is -0.5"},
      {"--temp nan", "--temp is nan"},
      {"--temp -1", "--temp is -1"},
      {"--top-p 0", "--top-p is 0"},
      {"--top-p 1.5", "--top-p is 1.5"},
      {"--top-k -1", "--top-k is -1"},
      {"--repeat-penalty 0", "--repeat-penalty is 0"},
      {"--presence-penalty inf", "--presence-penalty is inf"},
      {"--frequency-penalty nan", "--frequency-penalty is nan"},
      {"--repeat-last-n -2", "--repeat-last-n is -2"},
      {"-n -1", "--max-tokens (-n) is -1"},
  };
  for (const auto& c : cases) {
    const auto result = run("generate", std::string("--tokens 1,2,3 ") + c.flags);
    EXPECT_EQ(result.exit_code, 1) << c.flags << ": " << result.err;
    EXPECT_EQ(result.err.rfind(std::string("strata: error: ") + c.error, 0), 0u) << c.flags << ": " << result.err;
  }
  const auto chat = run("chat", "-n -1");
  EXPECT_EQ(chat.exit_code, 1) << chat.err;
  EXPECT_NE(chat.err.find("--max-tokens (-n) is -1"), std::string::npos) << chat.err;
}

TEST_F(SamplingCli, MaxTokensPastTheModelsContextFailsNamingIt) {
  const auto result = run("generate", "--tokens 1,2,3 -n 2147483647");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("--max-tokens (-n) 2147483647 need a context of 2147483650 tokens"), std::string::npos)
      << result.err;
  // With --ctx the generation stops where the context is full.
  const auto bounded = run("generate", "--tokens 1,2,3 -n 2147483647 --ctx 8 --temp 0");
  EXPECT_EQ(bounded.exit_code, 0) << bounded.err;
}

TEST_F(SamplingCli, SeedsTakeTheWholeUnsignedRangeAndNothingElse) {
  EXPECT_EQ(run("generate", "--tokens 1,2,3 -n 2 --seed 18446744073709551615").exit_code, 0);
  for (const char* seed : {"-1", "18446744073709551616", "1.5"}) {
    const auto result = run("generate", std::string("--tokens 1,2,3 -n 2 --seed ") + seed);
    EXPECT_NE(result.exit_code, 0) << seed;
    EXPECT_NE(result.err.find("--seed"), std::string::npos) << seed << ": " << result.err;
  }
}

}  // namespace
}  // namespace strata
