// `strata bench` end to end on a tiny reference model: the tests it runs, their names and the JSON fields,
// with and without --depth.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

test::CommandResult bench(const std::filesystem::path& model, const std::string& flags) {
  return test::run_command(test::shell_quote(test::strata_executable().string()) + " bench --log-level warn --model " +
                           test::shell_quote(model.string()) + " --backend cpu -t 2 -n 4 -r 1 " + flags);
}

// --depth D runs each test after D tokens in the cache, names it as llama-bench does and reports n_depth;
// several depths run every test at each; without the flag the depth is 0 and the names are the plain ones.
TEST(BenchCli, DepthRunsEachTestAfterThatManyCachedTokens) {
  const auto model = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "reference model missing: " << model;
  const auto deep = bench(model, "-p 8 --depth 0 40 --json");
  ASSERT_EQ(deep.exit_code, 0) << deep.err;
  const auto lines = nlohmann::json::parse(deep.out);
  ASSERT_EQ(lines.size(), 4u) << deep.out;
  const char* names[] = {"pp8", "tg4", "pp8 @ d40", "tg4 @ d40"};
  const int depths[] = {0, 0, 40, 40};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["test"], names[i]) << deep.out;
    EXPECT_EQ(lines[i]["n_depth"], depths[i]) << deep.out;
    EXPECT_GT(lines[i]["avg_ts"].get<double>(), 0.0) << deep.out;
  }

  const auto text = bench(model, "-p 0 --depth 40");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("tg4 @ d40"), std::string::npos) << text.out;

  const auto plain = bench(model, "-p 0 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto plain_lines = nlohmann::json::parse(plain.out);
  ASSERT_EQ(plain_lines.size(), 1u) << plain.out;
  EXPECT_EQ(plain_lines[0]["test"], "tg4");
  EXPECT_EQ(plain_lines[0]["n_depth"], 0);

  const auto negative = bench(model, "--depth -1");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.err.find("--depth"), std::string::npos) << negative.err;
}

}  // namespace
}  // namespace strata
