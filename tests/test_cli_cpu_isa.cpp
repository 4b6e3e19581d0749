// Where the CPU backend's instruction set comes from, end to end: the --cpu-isa flag over STRATA_CPU_ISA over
// the backend-cpu manifest option "isa" (which used to be ignored); a value outside auto, avx512, avx2 and
// scalar is refused naming where it came from.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "plugins/plugin_test_support.hpp"
#include "strata/cpu_isa.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CpuIsaCli : public ::testing::Test {
 protected:
  // The default manifest (the plugins of this build) with backend-cpu's options set to these.
  fs::path manifest_with(const json& backend_cpu_options) const {
    json manifest = json::parse(std::ifstream(test::default_manifest_path()));
    for (auto& plugin : manifest["plugins"]) {
      const fs::path file = plugin["file"].get<std::string>();
      plugin["file"] = (test::default_manifest_path().parent_path() / file).string();
      if (file.filename() == "libstrata-backend-cpu.so") plugin["options"] = backend_cpu_options;
    }
    return folder_.write("manifest.json", manifest.dump());
  }

  // strata (after environment, e.g. "STRATA_CPU_ISA=scalar") running a tiny model's logits with these flags.
  test::CommandResult logits(const std::string& environment, const std::string& flags) const {
    return test::run_command(environment + " " + test::shell_quote(test::strata_executable().string()) +
                             " logits --log-level info --backend cpu -t 2 --model " +
                             test::shell_quote(model_.string()) + " --tokens 1,2,3 -o /dev/null " + flags);
  }

  // The backend's description when a request for `name` runs on this CPU (a level it lacks falls back).
  static std::string running(const char* name) {
    const auto isa = sdk::choose_cpu_isa(name, sdk::detect_cpu_isa()).isa;
    return std::string("backend: cpu: 2 threads, ") + sdk::cpu_isa_name(isa) +
           (isa >= sdk::CpuIsa::avx2 ? ", weights repacked" : "") + "\n";
  }

  void SetUp() override { ASSERT_REFERENCE(model_); }

  const fs::path model_ = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  strata::testing::ScratchFolder folder_;
};

TEST_F(CpuIsaCli, FlagOverEnvironmentOverManifestOption) {
  const std::string manifest = "--manifest " + test::shell_quote(manifest_with({{"isa", "scalar"}}).string());
  const struct {
    const char* environment;
    const char* flags;
    const char* wins;
  } cases[] = {
      {"STRATA_CPU_ISA=", "", "scalar"},  // the manifest's option alone
      {"STRATA_CPU_ISA=avx2", "", "avx2"},
      {"STRATA_CPU_ISA=avx2", "--cpu-isa scalar", "scalar"},
      {"STRATA_CPU_ISA=scalar", "--cpu-isa auto", "auto"},
  };
  for (const auto& c : cases) {
    const std::string label = std::string(c.environment) + " " + c.flags;
    const auto result = logits(c.environment, manifest + " " + c.flags);
    ASSERT_EQ(result.exit_code, 0) << label << ": " << result.err;
    EXPECT_NE(result.err.find(running(c.wins)), std::string::npos) << label << ": " << result.err;
  }
}

TEST_F(CpuIsaCli, UnknownLevelsAreRefusedNamingWhereTheyCameFrom) {
  const std::string levels = "not one of auto, avx512, avx2, scalar";
  const auto flag = logits("", "--cpu-isa neon");
  EXPECT_EQ(flag.exit_code, 1) << flag.err;
  EXPECT_NE(flag.err.find("strata: error: --cpu-isa is \"neon\", " + levels), std::string::npos) << flag.err;

  const auto environment = logits("STRATA_CPU_ISA=sse9", "");
  EXPECT_EQ(environment.exit_code, 1) << environment.err;
  EXPECT_NE(environment.err.find("strata: error: STRATA_CPU_ISA is \"sse9\", " + levels), std::string::npos)
      << environment.err;

  // A plugin that refuses its options is skipped, with the reason, and the command has no CPU backend.
  const fs::path manifest = manifest_with({{"isa", "neon"}});
  const auto listed =
      test::run_command(test::shell_quote(test::strata_executable().string()) +
                        " plugins --json --log-level error --manifest " + test::shell_quote(manifest.string()));
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("backend-cpu manifest option \\\"isa\\\" is \\\"neon\\\", " + levels), std::string::npos)
      << listed.out;
  const auto run = logits("", "--manifest " + test::shell_quote(manifest.string()));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("backend-cpu manifest option \"isa\" is \"neon\""), std::string::npos) << run.err;
}

}  // namespace
}  // namespace strata
