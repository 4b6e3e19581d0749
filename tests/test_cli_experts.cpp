// The hybrid expert placement's flags end to end, on the CPU backend standing in for a GPU (--vram-budget-gib):
// stats in `strata bench --json` and `generate --stats`, and start-ups with little locked or host memory, which end
// in a result or a clear error, never a stall.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

std::filesystem::path tiny_model() { return test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf"; }

test::CommandResult strata(const std::string& arguments, const std::string& prefix = "") {
  return test::run_command(prefix + test::shell_quote(test::strata_executable().string()) + " " + arguments);
}

std::string model_flags() {
  return "--model " + test::shell_quote(tiny_model().string()) + " --backend cpu -t 2 --vram-budget-gib 0.25 ";
}

TEST(ExpertsCli, BenchJsonReportsThePlacement) {
  ASSERT_REFERENCE(tiny_model());
  const auto result = strata("bench --log-level warn " + model_flags() + "--expert-cache 4 -p 16 -n 4 -r 1 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = nlohmann::json::parse(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  for (const auto& line : lines) {
    ASSERT_TRUE(line.contains("experts")) << line.dump();
    const auto& experts = line["experts"];
    const int64_t pairs = experts["pairs_device"].get<int64_t>() + experts["pairs_pcie"].get<int64_t>() +
                          experts["pairs_pool"].get<int64_t>();
    EXPECT_GT(pairs, 0) << line.dump();
    EXPECT_GT(experts["pairs_pool"].get<int64_t>(), 0) << "4 of 16 experts resident: most pairs miss";
    EXPECT_GE(experts["hit_rate"].get<double>(), 0.0);
    EXPECT_LT(experts["hit_rate"].get<double>(), 1.0);
    EXPECT_GT(experts["split_steps"].get<int64_t>(), 0);
    EXPECT_NE(line["expert_cache"].get<std::string>().find("4 of 16 experts resident"), std::string::npos);
  }
  // The pool runs --threads threads unless --pool-workers says otherwise.
  EXPECT_EQ(lines[0]["expert_pool"].get<std::string>().rfind("cpu: 2 threads", 0), 0u) << lines[0].dump();
  const auto one_worker =
      strata("bench --log-level warn " + model_flags() + "--expert-cache 4 --pool-workers 1 -p 0 -n 2 -r 1 --json");
  ASSERT_EQ(one_worker.exit_code, 0) << one_worker.err;
  const auto pool = nlohmann::json::parse(one_worker.out).at(0).at("expert_pool").get<std::string>();
  EXPECT_EQ(pool.rfind("cpu: 1 threads", 0), 0u) << pool;
  // Without a placement there is nothing to report.
  const auto plain = strata("bench --log-level warn " + model_flags() + "--expert-cache off -p 0 -n 4 -r 1 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out)[0].contains("experts")) << plain.out;
}

TEST(ExpertsCli, GenerateStatsAndTheSameTokensAsWithoutPlacement) {
  ASSERT_REFERENCE(tiny_model());
  const std::string generate = "generate --log-level warn " + model_flags() + "--tokens 3,14,15,92 -n 8 ";
  const auto placed = strata(generate + "--expert-cache 3 --pcie-frac 0.5 --stats");
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_NE(placed.err.find("experts: hit rate"), std::string::npos) << placed.err;
  const auto plain = strata(generate + "--expert-cache off");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(placed.out, plain.out);
}

// --expert-prefetch reaches the placement: bench --json counts the experts copied ahead and those then chosen, and
// generate's tokens stay those without placement.
TEST(ExpertsCli, PrefetchIsCountedAndChangesNoTokens) {
  ASSERT_REFERENCE(tiny_model());
  const auto bench =
      strata("bench --log-level warn " + model_flags() + "--expert-cache 4 --expert-prefetch 4 -p 0 -n 8 -r 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const auto experts = nlohmann::json::parse(bench.out).at(0).at("experts");
  EXPECT_GT(experts.at("prefetched").get<int64_t>(), 0) << experts.dump();
  EXPECT_GT(experts.at("prefetch_used").get<int64_t>(), 0) << experts.dump();
  EXPECT_LE(experts.at("prefetch_used").get<int64_t>(), experts.at("prefetched").get<int64_t>());
  const std::string generate = "generate --log-level warn " + model_flags() + "--tokens 3,14,15,92 -n 8 ";
  const auto prefetched = strata(generate + "--expert-cache 4 --expert-prefetch 4");
  ASSERT_EQ(prefetched.exit_code, 0) << prefetched.err;
  const auto plain = strata(generate + "--expert-cache off");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(prefetched.out, plain.out);
}

// --trace-experts writes the split layers' host-side timeline: the caller's routing reads and the pool's runs on a
// lane of its own, each pool run after its layer's routing was read; it needs a placement, and a path it can write.
TEST(ExpertsCli, TraceExpertsWritesTheSplitLayersTimeline) {
  ASSERT_REFERENCE(tiny_model());
  const auto path = std::filesystem::temp_directory_path() / ("strata-trace-" + std::to_string(::getpid()) + ".json");
  const std::string generate = "generate --log-level warn " + model_flags() + "--tokens 3,14,15,92 -n 4 ";
  const auto traced =
      strata(generate + "--expert-cache 4 --pool-thread 1 --trace-experts " + test::shell_quote(path.string()));
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  const auto trace = nlohmann::json::parse(test::read_file(path));
  std::filesystem::remove(path);
  std::map<int64_t, std::string> lanes;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M") lanes[event.at("tid").get<int64_t>()] = event.at("args").at("name").get<std::string>();
  }
  ASSERT_EQ(lanes.size(), 2u) << trace.dump();
  // Per layer, when its last routing read ended; each pool run starts after the read of its layer's routing.
  std::map<int64_t, double> routing_read;
  int routing_reads = 0, pool_runs = 0;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") != "X") continue;
    const double start = event.at("ts").get<double>(), duration = event.at("dur").get<double>();
    const auto layer = event.at("args").at("layer").get<int64_t>();
    EXPECT_GE(start, 0.0);
    EXPECT_GE(duration, 0.0);
    const std::string lane = lanes.at(event.at("tid").get<int64_t>());
    if (event.at("name") == "read routing") {
      EXPECT_EQ(lane, "caller");
      routing_read[layer] = start + duration;
      ++routing_reads;
    } else if (event.at("name") == "pool") {
      EXPECT_EQ(lane, "pool");
      ASSERT_TRUE(routing_read.contains(layer)) << "a pool run of layer " << layer << " before its routing was read";
      EXPECT_GE(start, routing_read[layer]) << "layer " << layer;
      ++pool_runs;
    }
  }
  // A prompt step and three decode steps over 2 split layers (4 of 16 experts resident), nearly all with misses.
  EXPECT_EQ(routing_reads, 8) << trace.dump();
  EXPECT_GT(pool_runs, 0) << trace.dump();

  const auto unwritable = strata(generate + "--expert-cache 4 --trace-experts /nonexistent-folder/trace.json");
  EXPECT_NE(unwritable.exit_code, 0);
  EXPECT_NE(unwritable.err.find("/nonexistent-folder/trace.json: cannot write the timeline trace"), std::string::npos)
      << unwritable.err;
  const auto no_placement = strata(generate + "--expert-cache off --trace-experts " + test::shell_quote(path.string()));
  EXPECT_NE(no_placement.exit_code, 0);
  EXPECT_NE(no_placement.err.find("--trace-experts records the split layers of a hybrid placement, and there is none"),
            std::string::npos)
      << no_placement.err;
  EXPECT_FALSE(std::filesystem::exists(path));
}

// --pcie-frac takes auto (one log line with what was measured) or a share from 0 to 1; anything else is a one-line
// error naming the flag.
TEST(ExpertsCli, PcieFractionTakesAutoOrAShare) {
  ASSERT_REFERENCE(tiny_model());
  const std::string generate = "generate " + model_flags() + "--tokens 3,14,15,92 -n 2 --expert-cache 4 ";
  const auto automatic = strata(generate + "--pcie-frac auto");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  const size_t line = automatic.err.find("--pcie-frac auto: ");
  ASSERT_NE(line, std::string::npos) << automatic.err;
  EXPECT_NE(automatic.err.find(" ms, pooled in ", line), std::string::npos) << automatic.err;
  for (const std::string bad : {"1.5", "-0.1", "half", ""}) {
    const auto refused = strata(generate + "--pcie-frac '" + bad + "'");
    EXPECT_EQ(refused.exit_code, 105) << bad << ": " << refused.err;
    EXPECT_NE(refused.err.find("--pcie-frac: '" + bad + "' is neither auto nor a number from 0 to 1"),
              std::string::npos)
        << refused.err;
  }
}

// Nothing of the placement is page-locked on the CPU stand-in (the pool reads the mapped file in place), so a
// locked-memory limit of 0 changes nothing.
TEST(ExpertsCli, NoLockedMemoryNeeded) {
  ASSERT_REFERENCE(tiny_model());
  const std::string generate = "generate --log-level warn " + model_flags() + "--tokens 3,14,15,92 -n 4 ";
  const auto locked = strata(generate + "--expert-cache 4", "ulimit -l 0; ");
  ASSERT_EQ(locked.exit_code, 0) << locked.err;
  EXPECT_EQ(locked.out, strata(generate + "--expert-cache off").out);
}

// Page-locked experts need a backend that gives page-locked memory: the CPU stand-in does not, so asking for them
// is a one-line error, and auto reads the mapped file.
TEST(ExpertsCli, PinnedExpertsNeedPageLockedMemory) {
  ASSERT_REFERENCE(tiny_model());
  const std::string generate = "generate " + model_flags() + "--tokens 3,14,15,92 -n 2 --expert-cache 4 ";
  const auto pinned = strata(generate + "--host-experts pinned");
  EXPECT_EQ(pinned.exit_code, 1);
  EXPECT_NE(pinned.err.find("strata: error: --host-experts pinned: backend-cpu gives no page-locked host memory"),
            std::string::npos)
      << pinned.err;
  const auto automatic = strata(generate + "--host-experts auto");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.err;
  EXPECT_NE(automatic.err.find("expert store: the mapped file (backend-cpu gives no page-locked host memory)"),
            std::string::npos)
      << automatic.err;
}

// Too little host memory for the steps' buffers: a one-line error naming the allocation, at once.
TEST(ExpertsCli, LittleHostMemoryIsAClearError) {
  ASSERT_REFERENCE(tiny_model());
  if (test::kAddressSanitizer) GTEST_SKIP() << "ulimit -v cannot bound an AddressSanitizer build";
  const auto result =
      strata("logits --log-level warn " + model_flags() + "--expert-cache 4 --tokens 1,2,3 --batch 200000 -o /dev/null",
             test::memory_limit_prefix(250000));
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("out of memory"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("bytes"), std::string::npos) << "the error names the allocation's size: " << result.err;
  EXPECT_LT(result.seconds, 30.0);
}

}  // namespace
}  // namespace strata
