// Runs the strata executable: `strata plugins --manifest F [--json]`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "plugins/plugin_test_support.hpp"
#include "strata/plugin.h"

namespace {

// "major.minor" of the ABI these tests and the host are built with.
std::string host_abi() { return std::to_string(STRATA_ABI_MAJOR) + "." + std::to_string(STRATA_ABI_MINOR); }

namespace fs = std::filesystem;
using nlohmann::json;
using strata::testing::test_plugin_path;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct RunResult {
  int exit_code = -1;
  std::string output;
};

// Runs strata with arguments (already shell-quoted where needed) through the shell.
RunResult run_strata(const std::string& arguments) {
  const std::string command = std::string("'") + STRATA_BIN_DIR + "/strata' " + arguments;
  RunResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  while (const std::size_t count = std::fread(buffer.data(), 1, buffer.size(), pipe))
    result.output.append(buffer.data(), count);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

class CliPlugins : public ::testing::Test {
 protected:
  fs::path write_manifest(const json& manifest) { return folder_.write("manifest.json", manifest.dump()); }

  strata::testing::ScratchFolder folder_;
};

const json* find_by(const json& array, const std::string& key, const json& value) {
  for (const auto& element : array) {
    if (element.value(key, json()) == value) return &element;
  }
  return nullptr;
}

TEST_F(CliPlugins, JsonListsLoadedSkippedProblemsAndProviders) {
  const auto example = test_plugin_path("quant-q4_0");
  const auto newer = test_plugin_path("test-abi-major-newer");
  const auto manifest = write_manifest({{"plugins",
                                         {{{"file", example.string()}},
                                          {{"file", newer.string()}},
                                          {{"file", test_plugin_path("test-q8_0-alt").string()}}}}});
  const auto run = run_strata("--log-level off plugins --manifest " + quoted(manifest) + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json report = json::parse(run.output);

  EXPECT_EQ(report["manifest"], manifest.string());
  EXPECT_EQ(report["host_abi"], host_abi());

  const json* loaded = find_by(report["loaded"], "name", "quant-q4_0");
  ASSERT_NE(loaded, nullptr) << report.dump(2);
  EXPECT_EQ(*loaded, (json{{"name", "quant-q4_0"},
                           {"kind", "quant"},
                           {"version", "1.0.0"},
                           {"abi", host_abi()},
                           {"file", example.string()},
                           {"score", 1}}));
  EXPECT_EQ(report["loaded"].size(), 2u);

  ASSERT_EQ(report["skipped"].size(), 1u);
  EXPECT_EQ(report["skipped"][0]["file"], newer.string());
  EXPECT_EQ(report["skipped"][0]["reason"], "built for plugin ABI 2.0, this host speaks " + host_abi());

  ASSERT_EQ(report["problems"].size(), 1u);
  EXPECT_THAT(report["problems"][0].get<std::string>(), HasSubstr("Q8_0 is offered by core, test-q8_0-alt"));

  const json* q4_0 = find_by(report["quant_types"], "name", "Q4_0");
  ASSERT_NE(q4_0, nullptr);
  EXPECT_EQ(*q4_0, (json{{"id", 2}, {"name", "Q4_0"}, {"provider", "quant-q4_0"}, {"offered_by", {"quant-q4_0"}}}));
  const json* q8_0 = find_by(report["quant_types"], "name", "Q8_0");
  ASSERT_NE(q8_0, nullptr);
  EXPECT_TRUE((*q8_0)["provider"].is_null());
  EXPECT_EQ((*q8_0)["offered_by"], (json{"core", "test-q8_0-alt"}));
  EXPECT_EQ(find_by(report["quant_types"], "name", "F16")->at("provider"), "core");
  EXPECT_TRUE(report["default_backend"].is_null()) << "no backend plugin is listed";
}

TEST_F(CliPlugins, SaysWhichBackendRunsByDefault) {
  const auto cpu = fs::path(STRATA_BIN_DIR) / "plugins" / "libstrata-backend-cpu.so";
  const auto manifest = write_manifest({{"plugins", {{{"file", cpu.string()}}}}});
  const auto as_json = run_strata("--log-level off plugins --manifest " + quoted(manifest) + " --json");
  ASSERT_EQ(as_json.exit_code, 0) << as_json.output;
  EXPECT_EQ(json::parse(as_json.output)["default_backend"], "backend-cpu");
  const auto as_text = run_strata("--log-level off plugins --manifest " + quoted(manifest));
  EXPECT_THAT(as_text.output, HasSubstr("default backend: backend-cpu (--backend"));
  const auto none =
      run_strata("--log-level off plugins --manifest " + quoted(write_manifest({{"plugins", json::array()}})));
  EXPECT_THAT(none.output, HasSubstr("default backend: none loaded"));
}

TEST_F(CliPlugins, TextListsTheSkippedPluginWithItsReason) {
  const auto newer = test_plugin_path("test-abi-major-newer");
  const auto manifest = write_manifest({{"plugins", {{{"file", newer.string()}}}}});
  const auto run = run_strata("--log-level off plugins --manifest " + quoted(manifest));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("skipped plugins (1):\n  " + newer.string() +
                                    ": built for plugin ABI 2.0, this host speaks " + host_abi() + "\n"));
  EXPECT_THAT(run.output, HasSubstr("loaded plugins (0):\n  none\n"));
}

TEST_F(CliPlugins, InvalidManifestFailsWithOneLine) {
  const auto manifest = folder_.write("manifest.json", R"({"plugins": [{"file": "a.so", "optoins": {}}]})");
  const auto run = run_strata("plugins --manifest " + quoted(manifest) + " --json 2>&1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(run.output,
            "strata: error: " + manifest.string() + ": plugins[0].optoins: unknown key (did you mean \"options\"?)\n");
}

TEST_F(CliPlugins, MissingManifestFailsWithOneLine) {
  const auto missing = folder_.path() / "absent.json";
  const auto run = run_strata("plugins --manifest " + quoted(missing) + " 2>&1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.output, StartsWith("strata: error: " + missing.string() + ": cannot read the manifest: "));
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1);
}

TEST_F(CliPlugins, WithoutManifestUsesTheOneBesideTheExecutable) {
  const auto run = run_strata("--log-level off plugins --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json report = json::parse(run.output);
  EXPECT_TRUE(fs::equivalent(report["manifest"].get<std::string>(), fs::path(STRATA_BIN_DIR) / "strata-manifest.json"));
}

}  // namespace
