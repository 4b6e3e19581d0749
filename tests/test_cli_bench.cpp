// `strata bench` end to end on a tiny reference model: the tests it runs, their names and the JSON fields,
// with and without --depth (and the path flags a line reports); single ops timed alone (--ops).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/gguf/gguf_file.hpp"
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
  ASSERT_REFERENCE(model);
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

  // The execution paths a line ran are in it: normed inputs on by default on the CPU, off with the flag.
  EXPECT_EQ(plain_lines[0]["normed_inputs"], true) << plain.out;
  const auto separate = bench(model, "-p 0 --no-normed-inputs --json");
  ASSERT_EQ(separate.exit_code, 0) << separate.err;
  EXPECT_EQ(nlohmann::json::parse(separate.out)[0]["normed_inputs"], false) << separate.out;

  const auto negative = bench(model, "--depth -1");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.err.find("--depth"), std::string::npos) << negative.err;
}

// --ops times each named op alone: one line per op, in order, with the weights a call reads (moe_ffn: for
// one token its n_used experts' rows of gate, up and down; a matmul: its tensor), the floating-point operations
// of its products (2 per multiply-add) and a positive time. An unknown op fails naming it.
TEST(BenchCli, OpsTimesEachNamedOpAloneWithTheWeightsItReads) {
  const auto model = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const auto run = bench(model, "--ops moe_ffn,attn_q,output --op-calls 8 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto lines = nlohmann::json::parse(run.out);
  ASSERT_EQ(lines.size(), 3u) << run.out;

  const gguf::Model file(model);
  const auto count = [&](const char* key) { return static_cast<double>(file.find(key)->as_uint().value()); };
  const double n_expert = count("qwen2moe.expert_count"), n_used = count("qwen2moe.expert_used_count");
  const auto n_layer = static_cast<int>(count("qwen2moe.block_count"));
  // Means over the layers, which a mix may give different types.
  const auto layers_mean = [&](const std::string& suffix) {
    double bytes = 0.0;
    for (int il = 0; il < n_layer; ++il)
      bytes += static_cast<double>(file.tensor("blk." + std::to_string(il) + "." + suffix).bytes);
    return bytes / n_layer;
  };
  const double expert_bytes =
      (layers_mean("ffn_gate_exps.weight") + layers_mean("ffn_up_exps.weight") + layers_mean("ffn_down_exps.weight")) /
      n_expert;
  const double expected_bytes[] = {n_used * expert_bytes, layers_mean("attn_q.weight"),
                                   static_cast<double>(file.tensor("output.weight").bytes)};
  const auto shape = [&](const std::string& name, int axis) {
    return static_cast<double>(file.tensor(name).shape[axis]);
  };
  const double n_embd = shape("blk.0.ffn_gate_exps.weight", 0), expert_ffn = shape("blk.0.ffn_gate_exps.weight", 1);
  const double expected_flops[] = {2.0 * n_used * 3.0 * n_embd * expert_ffn,
                                   2.0 * shape("blk.0.attn_q.weight", 0) * shape("blk.0.attn_q.weight", 1),
                                   2.0 * shape("output.weight", 0) * shape("output.weight", 1)};
  const char* ops[] = {"moe_ffn", "attn_q", "output"};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_DOUBLE_EQ(lines[i]["flops"].get<double>(), expected_flops[i]) << ops[i];
    EXPECT_NEAR(lines[i]["gflops"].get<double>(), expected_flops[i] / (lines[i]["avg_us"].get<double>() * 1e3),
                1e-9 * expected_flops[i])
        << ops[i];
    EXPECT_EQ(lines[i]["op"], ops[i]) << run.out;
    EXPECT_EQ(lines[i]["n_tokens"], 1) << run.out;
    EXPECT_EQ(lines[i]["calls"], 8) << run.out;
    EXPECT_GT(lines[i]["avg_us"].get<double>(), 0.0) << run.out;
    EXPECT_NEAR(lines[i]["weight_bytes"].get<double>(), expected_bytes[i], 1e-6 * expected_bytes[i]) << ops[i];
  }

  const auto unknown = bench(model, "--ops attn_z");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("unknown op 'attn_z'"), std::string::npos) << unknown.err;
}

// --op-experts K: each token of moe_ffn computes its first K experts (the pool's share in a hybrid step), so a
// one-token call reads and multiplies K experts' rows; more than the model's n_used fails naming the range.
TEST(BenchCli, OpExpertsTimesAShareOfEachTokensExperts) {
  const auto model = test::reference_dir() / "models" / "qwen2moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const gguf::Model file(model);
  const auto n_used = static_cast<int>(file.find("qwen2moe.expert_used_count")->as_uint().value());
  ASSERT_GE(n_used, 2);
  const auto all = bench(model, "--ops moe_ffn --op-calls 4 --json");
  const auto one = bench(model, "--ops moe_ffn --op-calls 4 --op-experts 1 --json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto all_line = nlohmann::json::parse(all.out).at(0), one_line = nlohmann::json::parse(one.out).at(0);
  EXPECT_EQ(all_line["experts_per_token"], n_used);
  EXPECT_EQ(one_line["experts_per_token"], 1);
  EXPECT_NEAR(one_line["weight_bytes"].get<double>() * n_used, all_line["weight_bytes"].get<double>(),
              1e-6 * all_line["weight_bytes"].get<double>());
  EXPECT_DOUBLE_EQ(one_line["flops"].get<double>() * n_used, all_line["flops"].get<double>());

  const auto too_many = bench(model, "--ops moe_ffn --op-experts " + std::to_string(n_used + 1));
  EXPECT_NE(too_many.exit_code, 0);
  EXPECT_NE(too_many.err.find("experts per token"), std::string::npos) << too_many.err;
}

}  // namespace
}  // namespace strata
