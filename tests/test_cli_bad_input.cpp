// Bad command-line input ends in one line `strata: error: ...` naming the path or flag, and exit 1, at once:
// a FIFO, device, folder or oversized file where a file is read, an output path that cannot be written, and
// --ctx values the model cannot take. Commands that could hang run under `timeout`, so a hang fails the test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gguf/gguf_file.hpp"
#include "core/plugin/manifest.hpp"
#include "core/util/user_file.hpp"
#include "plugins/plugin_test_support.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::shell_quote;

// A few seconds are plenty for a refusal; a command that blocks or reads forever is stopped by `timeout`
// (exit 124) and, when it would read forever, by a 4 GiB memory limit (not in a sanitized build: see
// memory_limit_prefix). Log lines below log_level are left out (the error line is the one line expected).
test::CommandResult strata(const std::string& arguments, const std::string& log_level = "error") {
  return test::run_command(test::memory_limit_prefix(4194304) + "timeout 20 " +
                           shell_quote(test::strata_executable().string()) + " --log-level " + log_level + " " +
                           arguments);
}

void expect_one_line_error(const test::CommandResult& result, const std::string& expected) {
  EXPECT_EQ(result.signal, 0) << result.err;
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("strata: error: " + expected), std::string::npos) << result.err;
}

class BadInputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
    ASSERT_REFERENCE(model_);
  }
  fs::path fifo(const std::string& name) const {
    const fs::path path = folder_.path() / name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  std::string model() const { return shell_quote(model_.string()); }

  fs::path model_;
  testing::ScratchFolder folder_;
};

TEST_F(BadInputCli, AFifoAsTheModelIsRefusedWithoutOpeningIt) {
  const fs::path path = fifo("model.gguf");
  expect_one_line_error(strata("inspect " + shell_quote(path.string())),
                        path.string() + ": cannot read the GGUF file: it is a FIFO (named pipe), not a regular file");
  expect_one_line_error(strata("logits -m " + shell_quote(path.string()) + " --tokens 1,2 -o " +
                               shell_quote((folder_.path() / "out.f32").string())),
                        path.string() + ": cannot read the GGUF file: it is a FIFO");
  expect_one_line_error(strata("inspect /dev/null"), "/dev/null: cannot read the GGUF file: it is a character device");
}

TEST_F(BadInputCli, ManifestsThatAreNotSmallRegularFilesAreRefused) {
  const fs::path pipe = fifo("manifest.json");
  const auto with_manifest = [&](const std::string& manifest) {
    return strata("generate -m " + model() + " --tokens 1,2 -n 1 --manifest " + shell_quote(manifest));
  };
  expect_one_line_error(with_manifest(pipe.string()), pipe.string() + ": cannot read the manifest: it is a FIFO");
  expect_one_line_error(with_manifest("/dev/zero"),
                        "/dev/zero: cannot read the manifest: it is a character device, not a regular file");
  expect_one_line_error(with_manifest(folder_.path().string()),
                        folder_.path().string() + ": cannot read the manifest: it is a folder");
  // A regular file past the limit: spaces are valid JSON, so only the size can refuse it.
  const fs::path large = folder_.write("large.json", "{}" + std::string(kMaxManifestBytes, ' '));
  expect_one_line_error(with_manifest(large.string()), large.string() + ": cannot read the manifest: it holds " +
                                                           std::to_string(kMaxManifestBytes + 2) +
                                                           " bytes, more than the 1 MiB allowed");
}

TEST_F(BadInputCli, APluginFileThatIsAFifoIsSkippedUnopened) {
  const fs::path pipe = fifo("libplugin.so");
  const fs::path manifest = folder_.write("manifest.json", R"({"plugins": [{"file": "libplugin.so"}]})");
  const auto result = strata("plugins --json --manifest " + shell_quote(manifest.string()));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const auto report = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << result.out;
  EXPECT_EQ(report["skipped"],
            nlohmann::json::parse(R"([{"file": ")" + pipe.string() + R"(", "reason": "not a regular file"}])"));
}

TEST_F(BadInputCli, TextFilesThatAreFoldersOrFifosAreRefused) {
  const std::string folder = folder_.path().string();
  expect_one_line_error(strata("tokenize --model " + model() + " --text-file " + shell_quote(folder)),
                        folder + ": cannot read the text (--text-file): it is a folder");
  const fs::path pipe = fifo("prompt.txt");
  expect_one_line_error(strata("generate -m " + model() + " -f " + shell_quote(pipe.string()) + " -n 1"),
                        pipe.string() + ": cannot read the prompt (--prompt-file): it is a FIFO");
  expect_one_line_error(strata("logits -m " + model() + " --tokens " + shell_quote(folder) + " -o " +
                               shell_quote((folder_.path() / "out.f32").string())),
                        folder + ": cannot read the token list (--tokens): it is a folder");
}

TEST_F(BadInputCli, AnOutputThatCannotBeCreatedFailsBeforeTheWorkWithTheReason) {
  const std::string missing = (folder_.path() / "no-such-folder" / "x.f32").string();
  // The model does not exist either: the output is opened first, so its error is the one reported.
  expect_one_line_error(strata("logits -m /no/such/model.gguf --tokens 1,2 -o " + shell_quote(missing)),
                        missing + ": cannot write the logits: No such file or directory");
  expect_one_line_error(strata("logits -m " + model() + " --tokens 1,2 -o " + shell_quote(missing)),
                        missing + ": cannot write the logits: No such file or directory");
  expect_one_line_error(strata("inspect " + model() + " --dequant output.weight --output " + shell_quote(missing)),
                        missing + ": cannot write the tensor: No such file or directory");
}

TEST_F(BadInputCli, ContextSizesBelowOneAreRefused) {
  const std::string out = shell_quote((folder_.path() / "out.f32").string());
  for (const std::string ctx : {"0", "-5"}) {
    expect_one_line_error(strata("logits -m " + model() + " --tokens 1,2 -o " + out + " --ctx " + ctx),
                          "--ctx " + ctx + ": the context must hold at least 1 token");
    expect_one_line_error(strata("generate -m " + model() + " --tokens 1,2 -n 1 --ctx " + ctx),
                          "--ctx " + ctx + ": the context must hold at least 1 token");
  }
}

TEST_F(BadInputCli, AContextAboveTheModelsIsLoweredToItWithAWarning) {
  const gguf::Model file(model_);
  const auto trained = file.find("qwen3moe.context_length")->as_int().value();
  const auto result =
      strata("generate -m " + model() + " --tokens 1,2 -n 1 --ctx " + std::to_string(trained * 1000), "warn");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("--ctx " + std::to_string(trained * 1000) + " is above the model's context length of " +
                            std::to_string(trained) + " (qwen3moe.context_length): using " + std::to_string(trained)),
            std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace strata
