// `strata profile` and `strata plan` end to end on a small synthetic model with skewed routing: the profile the
// first writes is what the second reads; bad profile files end in one line naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/experts/expert_profile.hpp"
#include "plugins/plugin_test_support.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

test::CommandResult strata(const std::string& arguments) {
  return test::run_command("timeout 120 " + shell_quote(test::strata_executable().string()) + " --log-level error " +
                           arguments);
}

void expect_one_line_error(const test::CommandResult& result, const std::string& expected) {
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("strata: error: " + expected), std::string::npos) << result.err;
}

// One tiny qwen3moe (2 layers x 8 experts, 2 used) with routing skew 1, and its profile, for every test.
class ProfileCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    folder_ = new testing::ScratchFolder();
    model_ = folder_->path() / "skewed.gguf";
    const auto synth = strata("synth --arch qwen3moe --preset tiny --type q8_0 --routing-skew 1 --threads 2 --output " +
                              shell_quote(model_.string()));
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
    prompts_ = folder_->write("prompts.txt",
                              "The quick brown fox jumps over the lazy dog.\n\n"
                              "Experts are chosen by the router, token by token.\r\n"
                              "   \n"
                              "A third prompt, a little longer than the others, to be read in one step.\n");
    profile_ = folder_->path() / "profile.json";
    profile_run_ = strata("profile --backend cpu -t 2 --model " + shell_quote(model_.string()) + " --prompts " +
                          shell_quote(prompts_.string()) + " --decode 5 --output " + shell_quote(profile_.string()));
  }
  static void TearDownTestSuite() {
    delete folder_;
    folder_ = nullptr;
  }

  static std::string model() { return shell_quote(model_.string()); }
  static test::CommandResult plan(const std::string& profile, const std::string& flags) {
    return strata("plan --model " + model() + " --profile " + shell_quote(profile) + " " + flags);
  }

  static inline testing::ScratchFolder* folder_ = nullptr;
  static inline fs::path model_, prompts_, profile_;
  static inline test::CommandResult profile_run_;
};

// The profile holds the model's shape and the run's counts: every layer's sum is the tokens routed times the
// experts a token uses; the summary line says what was counted.
TEST_F(ProfileCli, ProfileWritesTheCountsOfEveryRoutedToken) {
  ASSERT_EQ(profile_run_.exit_code, 0) << profile_run_.err;
  EXPECT_NE(profile_run_.out.find("profiled 3 prompts, "), std::string::npos) << profile_run_.out;
  EXPECT_NE(profile_run_.out.find("15 decoded), 2 layers x 8 experts (2 used): the top 25% of (layer, expert) pairs "
                                  "took "),
            std::string::npos)
      << profile_run_.out;
  const ExpertProfile profile = read_expert_profile(profile_, 2, 8);
  EXPECT_EQ(profile.info.model_file, "skewed.gguf");
  EXPECT_EQ(profile.info.architecture, "qwen3moe");
  EXPECT_EQ(profile.info.n_expert_used, 2);
  EXPECT_EQ(profile.info.prompts, 3);
  EXPECT_GT(profile.info.tokens, 15);
  EXPECT_NE(profile_run_.out.find("profiled 3 prompts, " + std::to_string(profile.info.tokens) + " tokens"),
            std::string::npos)
      << profile_run_.out;
  for (int32_t layer = 0; layer < 2; ++layer) {
    double sum = 0.0;
    for (const double count : profile.counts.layer(layer)) sum += count;
    EXPECT_EQ(sum, 2.0 * static_cast<double>(profile.info.tokens)) << "layer " << layer;
  }
  // The same run again gives the same file (greedy decoding, one thread count).
  const fs::path again = folder_->path() / "again.json";
  const auto rerun = strata("profile --backend cpu -t 2 --model " + model() + " --prompts " +
                            shell_quote(prompts_.string()) + " --decode 5 -o " + shell_quote(again.string()));
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_EQ(read_expert_profile(again, 2, 8).counts.layer(1)[3], profile.counts.layer(1)[3]);

  // JSON lines: one prompt a JSON string, line breaks inside.
  const auto jsonl = folder_->write("prompts.jsonl", "\"first line\\nsecond line\"\n\n\"another\"\n");
  const fs::path from_jsonl = folder_->path() / "jsonl.json";
  const auto json_run = strata("profile --backend cpu -t 2 --model " + model() + " --jsonl --decode 0 --prompts " +
                               shell_quote(jsonl.string()) + " -o " + shell_quote(from_jsonl.string()));
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  EXPECT_NE(json_run.out.find("profiled 2 prompts, "), std::string::npos) << json_run.out;
  EXPECT_NE(json_run.out.find(" read, 0 decoded)"), std::string::npos) << json_run.out;
}

// plan --json: one object per budget (0, 10, 25, 50 and 100% of the experts' bytes by default); slots and hit
// rates grow with the budget, from nothing resident to everything; the predicted decode time follows the tier
// times given.
TEST_F(ProfileCli, PlanReadsTheProfileAndPredictsEachBudget) {
  ASSERT_EQ(profile_run_.exit_code, 0) << profile_run_.err;
  const auto run = plan(profile_.string(), "--pool-expert-us 50 --gpu-expert-us 2 --dense-ms 1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto lines = nlohmann::json::parse(run.out);
  ASSERT_EQ(lines.size(), 5u) << run.out;
  const double percents[] = {0, 10, 25, 50, 100};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& line = lines[i];
    EXPECT_EQ(line["budget_percent"].get<double>(), percents[i]) << run.out;
    EXPECT_EQ(line["experts"], 16) << run.out;
    EXPECT_LE(line["slot_bytes"].get<uint64_t>(), line["budget_bytes"].get<uint64_t>()) << run.out;
    EXPECT_EQ(line["pool_measured"], false);
    EXPECT_EQ(line["pool_expert_us"], 50.0);
    if (i > 0) {
      EXPECT_GE(line["slots"].get<int>(), lines[i - 1]["slots"].get<int>());
      EXPECT_GE(line["hit_rate"].get<double>(), lines[i - 1]["hit_rate"].get<double>());
    }
  }
  // Nothing resident: every expert on the pool, 2 layers x 2 used x 50 us beside 1 ms of the rest.
  EXPECT_EQ(lines[0]["slots"], 0);
  EXPECT_EQ(lines[0]["hit_rate"], 0.0);
  EXPECT_DOUBLE_EQ(lines[0]["decode_us"].get<double>(), 1000.0 + 200.0);
  // Everything resident: whole layers, every pair a hit, the GPU's time alone.
  EXPECT_EQ(lines[4]["slots"], 16);
  EXPECT_EQ(lines[4]["whole_layers"], 2);
  EXPECT_EQ(lines[4]["hit_rate"], 1.0);
  EXPECT_DOUBLE_EQ(lines[4]["decode_us"].get<double>(), 1000.0 + 8.0);
  // Half the experts hold more than half the pairs: the routing is skewed.
  EXPECT_EQ(lines[3]["slots"], 8);
  EXPECT_GT(lines[3]["hit_rate"].get<double>(), 0.5);

  // Budgets in GiB; the text table has a line per budget under its header.
  const auto text = plan(profile_.string(), "--pool-expert-us 50 --budgets-gib 0,0.001,1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("CPU pool: 50.00 us per missed expert (given (--pool-expert-us))"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("(assumed: --gpu-expert-us)"), std::string::npos) << text.out;
  const auto header = text.out.find("budget GiB");
  ASSERT_NE(header, std::string::npos) << text.out;
  EXPECT_EQ(std::count(text.out.begin() + static_cast<std::ptrdiff_t>(header), text.out.end(), '\n'), 4) << text.out;
}

// Without --pool-expert-us the CPU pool is timed here on the model's own experts.
TEST_F(ProfileCli, PlanMeasuresTheCpuPool) {
  ASSERT_EQ(profile_run_.exit_code, 0) << profile_run_.err;
  const auto run = plan(profile_.string(), "-t 2 --pool-calls 4 -r 1 --budgets-percent 50 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto lines = nlohmann::json::parse(run.out);
  ASSERT_EQ(lines.size(), 1u) << run.out;
  EXPECT_EQ(lines[0]["pool_measured"], true);
  EXPECT_GT(lines[0]["pool_expert_us"].get<double>(), 0.0);
  EXPECT_GT(lines[0]["decode_ts"].get<double>(), 0.0);
}

TEST_F(ProfileCli, BadProfileFilesEndInOneLineNamingTheFile) {
  const auto bad = [&](const std::string& name, const std::string& text) {
    return folder_->write(name, text).string();
  };
  const std::string not_json = bad("not-json.json", "counts: 1 2 3\n");
  expect_one_line_error(plan(not_json, "--pool-expert-us 50"), not_json + ":1:1: not JSON");

  const std::string other_model = bad("other.json", R"({"format": "strata-expert-profile", "version": 1,
    "model": {"file": "x.gguf", "architecture": "qwen3moe", "n_layer": 3, "n_expert": 8, "n_expert_used": 2},
    "prompts": 1, "tokens": 1, "counts": [[0,0,0,0,0,0,1,1], [0,0,0,0,0,0,1,1], [0,0,0,0,0,0,1,1]]})");
  expect_one_line_error(plan(other_model, "--pool-expert-us 50"),
                        other_model + ": model.n_layer: the profile is of a model of 3 layers, this model has 2");

  const std::string negative = bad("negative.json", R"({"format": "strata-expert-profile", "version": 1,
    "model": {"file": "x.gguf", "architecture": "qwen3moe", "n_layer": 2, "n_expert": 8, "n_expert_used": 2},
    "prompts": 1, "tokens": 1, "counts": [[0,0,0,0,0,0,1,1], [0,0,0,0,0,0,-1,1]]})");
  expect_one_line_error(plan(negative, "--pool-expert-us 50"),
                        negative + ": counts[1][6]: expected a finite count >= 0, found -1");

  const std::string newer = bad("newer.json", R"({"format": "strata-expert-profile", "version": 7})");
  expect_one_line_error(plan(newer, "--pool-expert-us 50"), newer + ": version: 7 is not a version this strata reads");

  const std::string missing = (folder_->path() / "missing.json").string();
  expect_one_line_error(plan(missing, "--pool-expert-us 50"), missing + ": cannot read the expert profile");
  expect_one_line_error(plan(folder_->path().string(), "--pool-expert-us 50"),
                        folder_->path().string() + ": cannot read the expert profile: it is a folder");
  // A bad profile fails before the CPU pool is timed or anything is loaded.
  expect_one_line_error(plan(not_json, ""), not_json + ":1:1: not JSON");
}

TEST_F(ProfileCli, BadFlagsAndPromptFilesAreRefused) {
  const auto both = plan(profile_.string(), "--budgets-gib 1 --budgets-percent 10");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  const auto over = plan(profile_.string(), "--budgets-percent 150");
  EXPECT_NE(over.exit_code, 0);
  EXPECT_NE(over.err.find("--budgets-percent"), std::string::npos) << over.err;

  const auto empty = folder_->write("empty.txt", "\n  \n");
  const fs::path out = folder_->path() / "unwritten.json";
  expect_one_line_error(strata("profile --backend cpu --model " + model() + " --prompts " +
                               shell_quote(empty.string()) + " -o " + shell_quote(out.string())),
                        empty.string() + ": holds no prompt");
  EXPECT_FALSE(fs::exists(out));
  const auto jsonl = folder_->write("bad.jsonl", "\"ok\"\nnot json\n");
  expect_one_line_error(strata("profile --backend cpu --model " + model() + " --jsonl --prompts " +
                               shell_quote(jsonl.string()) + " -o " + shell_quote(out.string())),
                        jsonl.string() + ":2: not a JSON string");
  // A prompt past --ctx is named by its line; the unfinished profile is removed.
  expect_one_line_error(strata("profile --backend cpu --model " + model() + " --ctx 4 --prompts " +
                               shell_quote(prompts_.string()) + " -o " + shell_quote(out.string())),
                        prompts_.string() + ":1: the prompt's ");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The profile ranks the cache's first experts (--expert-profile): on the skewed model the hit rate of a bench run
// with 4 of 16 slots beats the uniform start's, and without a placement the flag is refused.
TEST_F(ProfileCli, ExpertProfileWarmsTheCacheWithTheHottestExperts) {
  ASSERT_EQ(profile_run_.exit_code, 0) << profile_run_.err;
  const std::string bench =
      "bench --backend cpu -t 2 --vram-budget-gib 0.25 --expert-cache 4 -p 16 -n 16 -r 1 --json "
      "--model " +
      model();
  const auto hit_rate = [](const test::CommandResult& run) {
    return nlohmann::json::parse(run.out).back()["experts"]["hit_rate"].get<double>();
  };
  const auto uniform = strata(bench);
  ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
  const auto profiled = strata(bench + " --expert-profile " + shell_quote(profile_.string()));
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_GT(hit_rate(profiled), hit_rate(uniform)) << uniform.out << profiled.out;

  const auto without_placement = strata("generate --backend cpu --expert-cache off --tokens 1,2 -n 1 --model " +
                                        model() + " --expert-profile " + shell_quote(profile_.string()));
  expect_one_line_error(without_placement, "--expert-profile ranks the experts of a hybrid placement");
}

}  // namespace
}  // namespace strata
