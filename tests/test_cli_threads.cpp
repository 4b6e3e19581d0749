// Thread counts on the command line: every flag that takes one refuses more than STRATA_MAX_THREADS naming
// itself, and a thread the system cannot start fails the command naming the count, instead of hanging it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "strata/backend.h"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

std::string strata_command() { return test::shell_quote(test::strata_executable().string()); }

// The flags are checked as the command line is parsed, before the (absent) model is opened.
TEST(ThreadsCli, EveryThreadCountFlagRefusesMoreThanTheLimit) {
  const std::string too_many = std::to_string(STRATA_MAX_THREADS + 1);
  const struct {
    std::string arguments;
    const char* flag;
  } cases[] = {
      {"logits --model absent.gguf --tokens 1 -o /dev/null --threads " + too_many, "--threads"},
      {"generate --model absent.gguf --tokens 1 -t " + too_many, "--threads"},
      {"chat --model absent.gguf --threads -1", "--threads"},
      {"bench --model absent.gguf --thread-counts 2 " + too_many, "--thread-counts"},
      {"synth --output absent.gguf --threads " + too_many, "--threads"},
  };
  for (const auto& c : cases) {
    const auto result = test::run_command(strata_command() + " " + c.arguments + " </dev/null");
    EXPECT_NE(result.exit_code, 0) << c.arguments;
    EXPECT_NE(result.err.find(c.flag), std::string::npos) << c.arguments << ": " << result.err;
    EXPECT_NE(result.err.find(std::to_string(STRATA_MAX_THREADS)), std::string::npos)
        << c.arguments << ": " << result.err;
  }
}

constexpr const char* kNoAddressLimitUnderAsan =
    "AddressSanitizer build: ulimit -v cannot make threads fail to start (ASan reserves terabytes of address space)";

// Runs strata with arguments where each thread's stack takes RLIMIT_STACK of address space: with 1 GB stacks in
// 4 GB, 16 threads cannot all start. Exit code 77: this shell cannot raise the stack limit. (The pool's own
// failure path is also tested without a shell: ThreadPool.AWorkerThatCannotStart...)
test::CommandResult run_short_of_threads(const std::string& arguments) {
  return test::run_command(
      "ulimit -s 1000000 2>/dev/null && ulimit -v 4000000 2>/dev/null || exit 77; "
      "exec timeout 120 " +
      strata_command() + " " + arguments);
}

// The CPU backend's pool used to leave the started workers running and never return.
TEST(ThreadsCli, AThreadTheBackendCannotStartFailsTheCommandNamingTheCount) {
  if (test::kAddressSanitizer) GTEST_SKIP() << kNoAddressLimitUnderAsan;
  const auto model = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const auto result = run_short_of_threads("logits --log-level warn --backend cpu --threads 16 --model " +
                                           test::shell_quote(model.string()) + " --tokens 1,2,3 -o /dev/null");
  if (result.exit_code == 77) GTEST_SKIP() << "this shell cannot raise the stack limit";
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("strata: error: backend-cpu: create: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("cannot start 16 threads"), std::string::npos) << result.err;
}

// synth's workers (here the pooled blocks of the fast path) used to end it with an unexpected error.
TEST(ThreadsCli, AThreadSynthCannotStartFailsTheCommandNamingTheCount) {
  if (test::kAddressSanitizer) GTEST_SKIP() << kNoAddressLimitUnderAsan;
  const auto output = std::filesystem::temp_directory_path() / "strata-threads-synth.gguf";
  const auto result = run_short_of_threads(
      "synth --log-level warn --preset tiny --type q8_0 --exact-max-values 0 "
      "--threads 16 --output " +
      test::shell_quote(output.string()));
  std::filesystem::remove(output);
  if (result.exit_code == 77) GTEST_SKIP() << "this shell cannot raise the stack limit";
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("strata: error: cannot start 16 worker threads"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace strata
