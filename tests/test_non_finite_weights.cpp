// A model whose weights hold NaN or infinity: `strata logits` and `generate` fail with one line that names
// the first layer and op whose output is not finite (never all-zero logits and exit 0), and
// `strata inspect --check` names each such tensor; a clean model passes the check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/gguf/ggml_types.hpp"
#include "plugins/plugin_test_support.hpp"
#include "support/model_copy.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::shell_quote;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint16_t kHalfInfinity = 0x7c00;

// Log lines are left out: the error line is the one line expected.
test::CommandResult strata(const std::string& arguments) {
  return run_command(shell_quote(test::strata_executable().string()) + " --log-level error " + arguments);
}

class NonFiniteWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
    ASSERT_REFERENCE(source_);
  }

  // A copy of the model with patch applied to the bytes of one tensor.
  fs::path copy_with(const std::string& tensor, const std::function<void(std::vector<uint8_t>&)>& patch) {
    const gguf::Model model(source_);
    const fs::path path = folder_.path() / "patched.gguf";
    test::ModelChanges changes;
    changes.patch = [&](const gguf::TensorInfo& info, std::vector<uint8_t>& bytes) {
      if (info.name == tensor) patch(bytes);
    };
    test::write_model_copy(model, path, changes);
    return path;
  }

  test::CommandResult logits(const fs::path& model, const std::string& extra = "") {
    return strata("logits -m " + shell_quote(model.string()) + " --tokens 5,17,42,99 -t 2 -o " +
                  shell_quote((folder_.path() / "logits.f32").string()) + " " + extra);
  }

  // One line, exit 1, naming the logits and where the first non-finite value came from.
  static void expect_named_failure(const test::CommandResult& result, const std::string& origin) {
    EXPECT_EQ(result.signal, 0);
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(result.err.find("strata: error: the logits are not finite"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("the first non-finite output is " + origin), std::string::npos) << result.err;
  }

  fs::path source_;
  testing::ScratchFolder folder_;
};

TEST_F(NonFiniteWeights, LogitsNameTheLayerWhoseNormWeightIsNaN) {
  const auto model = copy_with("blk.1.attn_norm.weight", [](auto& bytes) { test::set_f32(bytes, 5, kNaN); });
  const auto result = logits(model);
  expect_named_failure(result, "layer 1's rms_norm (blk.1.attn_norm.weight): NaN at position 0, value 5");
  EXPECT_FALSE(fs::exists(folder_.path() / "logits.f32")) << "no half-made output is left behind";
}

TEST_F(NonFiniteWeights, GenerateNamesTheLayerToo) {
  const auto model = copy_with("blk.1.attn_norm.weight", [](auto& bytes) { test::set_f32(bytes, 5, kNaN); });
  const auto result = strata("generate -m " + shell_quote(model.string()) + " --tokens 5,17,42 -n 4 -t 2");
  expect_named_failure(result, "layer 1's rms_norm (blk.1.attn_norm.weight)");
  EXPECT_EQ(result.out, "");
}

// An infinite Q8_0 scale makes one value of v infinite or NaN: every cache type (f16 and int8) and every
// activation the CPU rounds to 8 bits must carry it to the logits instead of rounding it away.
TEST_F(NonFiniteWeights, AnInfiniteScaleInAValueProjectionReachesTheLogitsThroughEitherCache) {
  const auto model =
      copy_with("blk.1.attn_v.weight", [](auto& bytes) { std::memcpy(bytes.data(), &kHalfInfinity, 2); });
  for (const std::string kv : {"f16", "int8"}) {
    expect_named_failure(logits(model, "--kv " + kv), "layer 1's matmul (blk.1.attn_v.weight)");
  }
}

TEST_F(NonFiniteWeights, InspectCheckNamesEachTensorWithCountAndFirstIndex) {
  const gguf::Model model(source_);
  const gguf::TensorInfo& experts = model.tensor("blk.0.ffn_down_exps.weight");
  ASSERT_EQ(experts.type, gguf::type_id::Q8_0);
  // Row 3's second block: an infinite scale makes its 32 values infinite (or NaN where the level is 0).
  const uint64_t row_blocks = experts.shape[0] / 32;
  const fs::path path = folder_.path() / "patched.gguf";
  test::ModelChanges changes;
  changes.patch = [&](const gguf::TensorInfo& info, std::vector<uint8_t>& bytes) {
    if (info.name == "blk.1.attn_norm.weight") test::set_f32(bytes, 5, kNaN);
    if (info.name == experts.name) std::memcpy(bytes.data() + (3 * row_blocks + 1) * 34, &kHalfInfinity, 2);
  };
  test::write_model_copy(model, path, changes);
  const auto result = strata("inspect --check " + shell_quote(path.string()));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.out.find("blk.1.attn_norm.weight: 1 NaN or infinite value, the first at index 5 (NaN)\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find(experts.name + ": 32 NaN or infinite values, the first at index " +
                            std::to_string(3 * experts.shape[0] + 32)),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.err.find("strata: error: " + path.string() + ": 2 tensors hold NaN or infinity"), std::string::npos)
      << result.err;
}

TEST_F(NonFiniteWeights, InspectCheckPassesACleanModel) {
  const gguf::Model model(source_);
  const auto result = strata("inspect --check " + shell_quote(source_.string()));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("checked " + std::to_string(model.tensors().size()) + " tensors"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find(": 0 hold NaN or infinity"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace strata
