// The CPU forward against the reference logits: for every reference model, the distance to the exact
// float64 forward stays within the bar of tests/reference/README.md (mean KL at most twice the peer
// engine's own, or 1e-5; top-1 agreement at most 0.05 below the peer's), with one thread and with all,
// f16 KV; int8 KV within four times the KL bar.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/engine/benchmark.hpp"
#include "core/engine/engine.hpp"
#include "support/logit_metrics.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

using test::logit_distance;
using test::read_f32;

std::vector<int32_t> reference_tokens() {
  std::ifstream in(test::reference_dir() / "tokens-a.txt");
  std::vector<int32_t> tokens;
  std::string item;
  while (std::getline(in, item, ',')) tokens.push_back(std::stoi(item));
  return tokens;
}

struct Bar {
  double kl;
  double top1;
};

class ReferenceLogits : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_path_ = test::reference_dir() / "models" / (GetParam() + ".gguf");
    const auto stem = test::reference_dir() / "logits" / (GetParam() + ".tokens-a");
    ASSERT_REFERENCE(model_path_);
    ASSERT_REFERENCE(stem.string() + ".exact.f32");
    exact_ = read_f32(stem.string() + ".exact.f32");
    peer_ = read_f32(stem.string() + ".peer.f32");
    tokens_ = reference_tokens();
    ASSERT_EQ(exact_.size() % tokens_.size(), 0u);
    n_vocab_ = exact_.size() / tokens_.size();
    const auto peer = logit_distance(exact_, peer_, n_vocab_);
    bar_ = {std::max(2.0 * peer.mean_kl, 1e-5), peer.top1 - 0.05};
  }

  std::vector<float> run(int threads, int32_t kv_type, int32_t batch, bool fused_ops = true) const {
    EngineOptions options;
    options.model = model_path_;
    options.manifest = test::default_manifest_path();
    options.backend = "cpu";
    options.threads = threads;
    const Engine engine(options);
    SessionOptions session_options;
    session_options.n_ctx = static_cast<int32_t>(tokens_.size());
    session_options.kv_type = kv_type;
    session_options.max_batch = batch;
    session_options.execution.fused_ops = fused_ops;
    Session session(engine.model(), session_options);
    return session.forward(tokens_, true);
  }

  std::filesystem::path model_path_;
  std::vector<float> exact_, peer_;
  std::vector<int32_t> tokens_;
  size_t n_vocab_ = 0;
  Bar bar_{};
};

TEST_P(ReferenceLogits, MeetsTheBarWithOneThreadAndWithAll) {
  for (const int threads : {1, 0}) {
    const auto ours = run(threads, STRATA_KV_F16, 256);
    ASSERT_EQ(ours.size(), exact_.size());
    const auto distance = logit_distance(exact_, ours, n_vocab_);
    std::printf("%s threads=%d kv=f16: mean KL %.3g (bar %.3g), top-1 %.4f (bar %.4f)\n", GetParam().c_str(), threads,
                distance.mean_kl, bar_.kl, distance.top1, bar_.top1);
    EXPECT_LE(distance.mean_kl, bar_.kl) << "threads " << threads;
    EXPECT_GE(distance.top1, bar_.top1) << "threads " << threads;
  }
}

TEST_P(ReferenceLogits, Int8KvCacheStaysWithinFourTimesTheBar) {
  const auto ours = run(0, STRATA_KV_INT8, 256);
  const auto distance = logit_distance(exact_, ours, n_vocab_);
  std::printf("%s kv=int8: mean KL %.3g (bar %.3g), top-1 %.4f\n", GetParam().c_str(), distance.mean_kl, 4 * bar_.kl,
              distance.top1);
  EXPECT_LE(distance.mean_kl, 4.0 * bar_.kl);
  EXPECT_GE(distance.top1, bar_.top1 - 0.05);
}

TEST_P(ReferenceLogits, DoNotDependOnHowTheSequenceIsSplitIntoSteps) {
  const auto one_step = run(0, STRATA_KV_F16, 256);
  for (const int32_t batch : {1, 7}) {
    const auto split = run(0, STRATA_KV_F16, batch);
    ASSERT_EQ(split.size(), one_step.size());
    double worst = 0.0;
    for (size_t i = 0; i < split.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(split[i] - one_step[i])));
    EXPECT_LT(worst, 1e-3) << "steps of " << batch << " tokens";
  }
}

// The fused entries (attention_rope, add_rms_norm) and the separate ops the core falls back to for a backend
// without them do the same float operations on the CPU: the same logits to the bit, in one step and in
// single-token steps (each block's residual waits for the next block's norm, across layers).
TEST_P(ReferenceLogits, FusedAndSeparateOpsGiveTheSameLogits) {
  for (const int32_t batch : {256, 1}) {
    const auto fused = run(0, STRATA_KV_F16, batch, true);
    const auto separate = run(0, STRATA_KV_F16, batch, false);
    ASSERT_EQ(fused.size(), separate.size());
    size_t differing = 0;
    for (size_t i = 0; i < fused.size(); ++i) differing += fused[i] != separate[i] ? 1 : 0;
    EXPECT_EQ(differing, 0u) << "steps of " << batch << " tokens";
  }
}

// The portable scalar kernels (what a CPU without AVX2 runs) and the AVX2 level (where IQ3_S weights are repacked
// too) meet the same bar, through the command line; the in-process tests above run this CPU's best level.
TEST_P(ReferenceLogits, TheLowerInstructionSetsMeetTheBarToo) {
  const auto tokens_file = test::reference_dir() / "tokens-a.txt";
  for (const std::string isa : {"scalar", "avx2"}) {
    const auto out = std::filesystem::temp_directory_path() / ("strata-" + isa + "-" + GetParam() + ".f32");
    const auto result =
        test::run_command("STRATA_CPU_ISA=" + isa + " " + test::shell_quote(test::strata_executable().string()) +
                          " logits --log-level warn --model " + test::shell_quote(model_path_.string()) + " --tokens " +
                          test::shell_quote(tokens_file.string()) + " --output " + test::shell_quote(out.string()));
    ASSERT_EQ(result.exit_code, 0) << isa << ": " << result.err;
    const auto ours = read_f32(out);
    std::filesystem::remove(out);
    ASSERT_EQ(ours.size(), exact_.size()) << isa;
    const auto distance = logit_distance(exact_, ours, n_vocab_);
    EXPECT_LE(distance.mean_kl, bar_.kl) << isa;
    EXPECT_GE(distance.top1, bar_.top1) << isa;
  }
}

// The tests that wrap the CPU backend's table: the tiny reference model on the CPU backend with 2 threads.
class BackendTable : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.model = test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
    ASSERT_REFERENCE(options.model);
    options.manifest = test::default_manifest_path();
    options.backend = "cpu";
    options.threads = 2;
    engine_.emplace(options);
  }

  std::optional<Engine> engine_;
};

// A backend built for ABI 1.1 hands over a shorter table (struct_size ends before attention_rope): the core
// must not read the entries past it, whatever bytes lie there, and must run the separate ops instead.
TEST_F(BackendTable, AnAbi11TableRunsTheSeparateOpsToTheSameLogits) {
  const Engine& engine = *engine_;
  ASSERT_TRUE(engine.backend().has_attention_rope());
  ASSERT_TRUE(engine.backend().has_add_rms_norm());
  ASSERT_TRUE(engine.backend().has_route_experts());
  strata_backend_table older = engine.backend().table();  // its fused entries stay set past struct_size
  older.struct_size = STRATA_FIELD_END(strata_backend_table, graph_discard);
  Backend older_backend("backend-cpu 1.1", older, engine.plugins().quants(), 2, "{}");
  EXPECT_FALSE(older_backend.has_attention_rope());
  EXPECT_FALSE(older_backend.has_add_rms_norm());
  EXPECT_FALSE(older_backend.has_route_experts());
  const Model older_model(engine.file(), older_backend);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  Session current(engine.model(), {.n_ctx = 16, .execution = {}});
  Session separate(older_model, {.n_ctx = 16, .execution = {}});
  EXPECT_EQ(separate.forward(tokens, true), current.forward(tokens, true));
}

// What a backend with concurrent regions (ABI 1.3) is asked: the CPU table with counting region entries.
struct RegionLog {
  int begun = 0, ended = 0, nested = 0, matmuls_inside = 0;
  bool open = false;
};
RegionLog region_log;
strata_status (*cpu_matmul)(strata_backend*, const strata_weight*, int32_t, const strata_buffer*, int32_t,
                            const strata_weight*, strata_buffer*, strata_error*) = nullptr;
decltype(strata_backend_table::matmul_normed) cpu_matmul_normed = nullptr;

// The core puts each layer's q, k and v projections (and nothing else) in a region, and none with
// concurrent_ops off; the logits are the same either way.
TEST_F(BackendTable, TheQkvProjectionsRunInAConcurrentRegion) {
  const Engine& engine = *engine_;
  EXPECT_FALSE(engine.backend().has_concurrency());
  strata_backend_table with_regions = engine.backend().table();
  cpu_matmul = with_regions.matmul;
  with_regions.concurrent_begin = [](strata_backend*, strata_error*) -> strata_status {
    region_log.nested += region_log.open ? 1 : 0;
    region_log.open = true;
    ++region_log.begun;
    return STRATA_OK;
  };
  with_regions.concurrent_end = [](strata_backend*, strata_error*) -> strata_status {
    region_log.open = false;
    ++region_log.ended;
    return STRATA_OK;
  };
  with_regions.matmul = [](strata_backend* b, const strata_weight* w, int32_t expert, const strata_buffer* x,
                           int32_t n_tokens, const strata_weight* bias, strata_buffer* out, strata_error* e) {
    region_log.matmuls_inside += region_log.open ? 1 : 0;
    return cpu_matmul(b, w, expert, x, n_tokens, bias, out, e);
  };
  cpu_matmul_normed = with_regions.matmul_normed;
  with_regions.matmul_normed = [](strata_backend* b, const strata_weight* w, const strata_normed_input* in,
                                  int32_t n_tokens, const strata_weight* bias, strata_buffer* out, strata_error* e) {
    region_log.matmuls_inside += region_log.open ? 1 : 0;
    return cpu_matmul_normed(b, w, in, n_tokens, bias, out, e);
  };
  Backend backend("backend-cpu with regions", with_regions, engine.plugins().quants(), 2, "{}");
  ASSERT_TRUE(backend.has_concurrency());
  const Model regions_model(engine.file(), backend);
  const int32_t n_layers = engine.model().config().n_layer;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  Session plain(engine.model(), {.n_ctx = 16, .execution = {}});
  const auto expected = plain.forward(tokens, true);
  for (const bool concurrent : {true, false}) {
    region_log = {};
    Session session(regions_model, {.n_ctx = 16, .execution = {.concurrent_ops = concurrent}});
    EXPECT_EQ(session.forward(tokens, true), expected);
    EXPECT_EQ(region_log.begun, concurrent ? n_layers : 0);
    EXPECT_EQ(region_log.ended, region_log.begun);
    EXPECT_EQ(region_log.nested, 0);
    EXPECT_EQ(region_log.matmuls_inside, 3 * region_log.begun);
  }
}

// What a backend with host memory (ABI 1.4) is asked: the CPU table with host_alloc and host_free that
// count their blocks, and buffer_read noting whether it reads into one of them.
struct HostMemoryLog {
  int allocated = 0, freed = 0, reads_into_blocks = 0;
  std::vector<std::pair<const char*, size_t>> blocks;
};
HostMemoryLog host_memory_log;
decltype(strata_backend_table::buffer_read) cpu_buffer_read = nullptr;

// forward_last reads the last token's logits into one block of the backend's host memory per session, the
// values forward gives for the same steps, and frees it with the session; forward keeps its own vector.
TEST_F(BackendTable, ForwardLastReadsIntoTheBackendsHostMemory) {
  const Engine& engine = *engine_;
  strata_backend_table with_host_memory = engine.backend().table();
  cpu_buffer_read = with_host_memory.buffer_read;
  with_host_memory.host_alloc = [](strata_backend*, size_t bytes, void** out, strata_error*) -> strata_status {
    *out = ::operator new(bytes);
    host_memory_log.blocks.emplace_back(static_cast<const char*>(*out), bytes);
    ++host_memory_log.allocated;
    return STRATA_OK;
  };
  with_host_memory.host_free = [](strata_backend*, void* memory) {
    ++host_memory_log.freed;
    ::operator delete(memory);
  };
  with_host_memory.buffer_read = [](strata_backend* b, strata_buffer* buffer, size_t offset, void* dst, size_t bytes,
                                    strata_error* e) {
    const auto* first = static_cast<const char*>(dst);
    for (const auto& [start, size] : host_memory_log.blocks) {
      if (first >= start && first + bytes <= start + size) ++host_memory_log.reads_into_blocks;
    }
    return cpu_buffer_read(b, buffer, offset, dst, bytes, e);
  };
  Backend backend("backend-cpu with host memory", with_host_memory, engine.plugins().quants(), 2, "{}");
  const Model host_memory_model(engine.file(), backend);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  // A prompt of 5, then one token at a time, in both sessions.
  const auto steps = [&](auto&& forward) {
    std::vector<std::vector<float>> logits;
    logits.push_back(forward(std::span(tokens).first(5)));
    for (size_t i = 5; i < tokens.size(); ++i) logits.push_back(forward(std::span(tokens).subspan(i, 1)));
    return logits;
  };
  Session plain(engine.model(), {.n_ctx = 16, .execution = {}});
  const auto expected = steps([&](std::span<const int32_t> step) { return plain.forward(step, false); });
  plain.rewind(0);
  const auto expected_all = plain.forward(tokens, true);
  host_memory_log = {};
  {
    Session session(host_memory_model, {.n_ctx = 16, .execution = {}});
    const float* block = nullptr;
    const auto logits = steps([&](std::span<const int32_t> step) {
      const auto last = session.forward_last(step);
      if (block == nullptr) block = last.data();
      EXPECT_EQ(last.data(), block);  // the same block every call
      return std::vector<float>(last.begin(), last.end());
    });
    EXPECT_EQ(logits, expected);
    EXPECT_EQ(host_memory_log.reads_into_blocks, 4);
    session.rewind(0);
    EXPECT_EQ(session.forward(tokens, true), expected_all);
    EXPECT_EQ(host_memory_log.reads_into_blocks, 4);
    EXPECT_EQ(host_memory_log.allocated, 1);
    EXPECT_EQ(host_memory_log.freed, 0);
  }
  EXPECT_EQ(host_memory_log.freed, 1);
}

// How the core routes: the CPU table with counting route and route_experts entries.
struct RouterLog {
  int fused = 0, routes = 0;
};
RouterLog router_log;
decltype(strata_backend_table::route) cpu_route = nullptr;
decltype(strata_backend_table::route_experts) cpu_route_experts = nullptr;

// With fused_ops (and normed inputs off) the core routes each layer by route_experts (ABI 1.3) where the table
// has it; without the entry, or with fused_ops off, by matmul and route. The logits are the same to the bit
// every way.
TEST_F(BackendTable, TheRouterRunsAsOneOpWhereTheBackendHasIt) {
  const Engine& engine = *engine_;
  ASSERT_TRUE(engine.backend().has_route_experts());
  strata_backend_table counting = engine.backend().table();
  cpu_route = counting.route;
  cpu_route_experts = counting.route_experts;
  counting.route = [](strata_backend* b, const strata_buffer* logits, int32_t n_tokens, int32_t n_experts,
                      int32_t n_used, int32_t routing, strata_buffer* ids, strata_buffer* weights, strata_error* e) {
    ++router_log.routes;
    return cpu_route(b, logits, n_tokens, n_experts, n_used, routing, ids, weights, e);
  };
  counting.route_experts = [](strata_backend* b, const strata_buffer* x, const strata_weight* router, int32_t n_tokens,
                              int32_t n_experts, int32_t n_used, int32_t routing, strata_buffer* logits,
                              strata_buffer* ids, strata_buffer* weights, strata_error* e) {
    ++router_log.fused;
    return cpu_route_experts(b, x, router, n_tokens, n_experts, n_used, routing, logits, ids, weights, e);
  };
  strata_backend_table without_entry = counting;
  without_entry.route_experts = nullptr;
  Backend with_backend("backend-cpu counting", counting, engine.plugins().quants(), 2, "{}");
  Backend without_backend("backend-cpu without route_experts", without_entry, engine.plugins().quants(), 2, "{}");
  EXPECT_FALSE(without_backend.has_route_experts());
  const Model with_model(engine.file(), with_backend), without_model(engine.file(), without_backend);
  const int32_t n_layers = engine.model().config().n_layer;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  Session plain(engine.model(), {.n_ctx = 16, .execution = {}});
  const auto expected = plain.forward(tokens, true);
  struct Case {
    const Model& model;
    bool fused_ops;
    int fused, routes;
  };
  for (const Case& c : {Case{with_model, true, n_layers, 0}, Case{with_model, false, 0, n_layers},
                        Case{without_model, true, 0, n_layers}}) {
    router_log = {};
    Session session(c.model, {.n_ctx = 16, .execution = {.fused_ops = c.fused_ops, .normed_inputs = false}});
    EXPECT_EQ(session.forward(tokens, true), expected);
    EXPECT_EQ(router_log.fused, c.fused) << "fused_ops " << c.fused_ops;
    EXPECT_EQ(router_log.routes, c.routes) << "fused_ops " << c.fused_ops;
  }
}

// How the core reaches the residual stream's norms: the CPU table with counting add_rms_norm, matmul_normed
// and route_experts_normed entries, which note what they are given.
struct NormLog {
  int add_rms_norms = 0, matmuls = 0, routers = 0, sums_written = 0, norms_kept = 0, without_y = 0;
};
NormLog norm_log;
decltype(strata_backend_table::add_rms_norm) cpu_add_rms_norm = nullptr;
decltype(strata_backend_table::route_experts_normed) cpu_route_experts_normed = nullptr;

void note_normed_input(const strata_normed_input* in) {
  norm_log.sums_written += in->sum != nullptr ? 1 : 0;
  norm_log.norms_kept += in->normed != nullptr ? 1 : 0;
  norm_log.without_y += in->y == nullptr ? 1 : 0;
}

// With normed inputs (ABI 1.5) the projections q, k and v and the router each read the residual stream through
// its norm, q and the router writing the sum (the first layer's q a copy of the stream: it has no output to add
// yet) and the router keeping the norm for the experts; add_rms_norm is not called. The CPU computes the same floats
// either way, in one step and in single-token steps (the stream moving between its two buffers).
TEST_F(BackendTable, TheNormsRunInsideTheOpsThatReadThemWhereTheBackendHasThem) {
  const Engine& engine = *engine_;
  ASSERT_TRUE(engine.backend().has_normed_inputs());
  strata_backend_table counting = engine.backend().table();
  cpu_add_rms_norm = counting.add_rms_norm;
  cpu_matmul_normed = counting.matmul_normed;
  cpu_route_experts_normed = counting.route_experts_normed;
  counting.add_rms_norm = [](strata_backend* b, strata_buffer* x, const strata_buffer* y, const strata_weight* w,
                             int32_t rows, int32_t width, float eps, strata_buffer* out, strata_error* e) {
    ++norm_log.add_rms_norms;
    return cpu_add_rms_norm(b, x, y, w, rows, width, eps, out, e);
  };
  counting.matmul_normed = [](strata_backend* b, const strata_weight* w, const strata_normed_input* in,
                              int32_t n_tokens, const strata_weight* bias, strata_buffer* out, strata_error* e) {
    ++norm_log.matmuls;
    note_normed_input(in);
    return cpu_matmul_normed(b, w, in, n_tokens, bias, out, e);
  };
  counting.route_experts_normed = [](strata_backend* b, const strata_normed_input* in, const strata_weight* router,
                                     int32_t n_tokens, int32_t n_experts, int32_t n_used, int32_t routing,
                                     strata_buffer* logits, strata_buffer* ids, strata_buffer* weights,
                                     strata_error* e) {
    ++norm_log.routers;
    note_normed_input(in);
    return cpu_route_experts_normed(b, in, router, n_tokens, n_experts, n_used, routing, logits, ids, weights, e);
  };
  strata_backend_table older = counting;
  older.struct_size = STRATA_FIELD_END(strata_backend_table, host_free);  // an ABI 1.4 table
  Backend counting_backend("backend-cpu counting", counting, engine.plugins().quants(), 2, "{}");
  Backend older_backend("backend-cpu 1.4", older, engine.plugins().quants(), 2, "{}");
  EXPECT_FALSE(older_backend.has_normed_inputs());
  const Model counting_model(engine.file(), counting_backend), older_model(engine.file(), older_backend);
  const int32_t n_layers = engine.model().config().n_layer;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const int32_t batch : {8, 1}) {
    Session plain(engine.model(), {.n_ctx = 16, .max_batch = batch, .execution = {.normed_inputs = false}});
    const auto expected = plain.forward(tokens, true);
    const int32_t steps = static_cast<int32_t>(tokens.size()) / batch;
    struct Case {
      const Model& model;
      bool normed_inputs;
      NormLog log;
    };
    const NormLog fused{0, 3 * n_layers * steps, n_layers * steps, 2 * n_layers * steps, n_layers * steps, 3 * steps};
    const NormLog separate{(2 * n_layers - 1) * steps, 0, 0, 0, 0, 0};
    for (const Case& c : {Case{counting_model, true, fused}, Case{counting_model, false, separate},
                          Case{older_model, true, separate}}) {
      norm_log = {};
      Session session(c.model, {.n_ctx = 16, .max_batch = batch, .execution = {.normed_inputs = c.normed_inputs}});
      const std::string what =
          "normed_inputs " + std::to_string(c.normed_inputs) + ", steps of " + std::to_string(batch);
      EXPECT_EQ(session.forward(tokens, true), expected) << what;
      EXPECT_EQ(norm_log.add_rms_norms, c.log.add_rms_norms) << what;
      EXPECT_EQ(norm_log.matmuls, c.log.matmuls) << what;
      EXPECT_EQ(norm_log.routers, c.log.routers) << what;
      EXPECT_EQ(norm_log.sums_written, c.log.sums_written) << what;
      EXPECT_EQ(norm_log.norms_kept, c.log.norms_kept) << what;
      EXPECT_EQ(norm_log.without_y, c.log.without_y) << what;
    }
  }
}

// How many step graphs a backend is asked for: the CPU table with graph entries that always answer RUN.
int graphs_created = 0;

// strata bench times its runs in the session of its warm-up, the cache emptied before each (as llama-bench
// does): a decode test's step graph is made once, not once per run, and each run decodes from position 0.
TEST_F(BackendTable, BenchmarkRunsShareOneSessionAndItsStepGraphs) {
  const Engine& engine = *engine_;
  strata_backend_table with_graphs = engine.backend().table();
  with_graphs.graph_create = [](strata_backend*, strata_graph** out, strata_error*) -> strata_status {
    ++graphs_created;
    *out = reinterpret_cast<strata_graph*>(new int(0));
    return STRATA_OK;
  };
  with_graphs.graph_free = [](strata_backend*, strata_graph* graph) { delete reinterpret_cast<int*>(graph); };
  with_graphs.graph_begin = [](strata_backend*, strata_graph*, const int32_t*, int32_t, int32_t* mode,
                               strata_error*) -> strata_status {
    *mode = STRATA_GRAPH_RUN;
    return STRATA_OK;
  };
  with_graphs.graph_end = [](strata_backend*, strata_graph*, strata_error*) -> strata_status { return STRATA_OK; };
  with_graphs.graph_discard = [](strata_backend*, strata_graph*) {};
  Backend backend("backend-cpu with graphs", with_graphs, engine.plugins().quants(), 2, "{}");
  ASSERT_TRUE(backend.has_graphs());
  const Model graphs_model(engine.file(), backend);
  graphs_created = 0;
  run_benchmark(graphs_model, {.n_decode = 3}, 1, {});
  const int graphs_of_one_run = graphs_created;
  EXPECT_GT(graphs_of_one_run, 0);
  graphs_created = 0;
  const BenchmarkResult result = run_benchmark(graphs_model, {.n_decode = 3}, 3, {});
  EXPECT_EQ(result.samples.size(), 3u);
  EXPECT_EQ(graphs_created, graphs_of_one_run);
}

TEST(LogitsCli, WritesTheSameLogitsAsTheLibrary) {
  const auto model = test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const auto out = std::filesystem::temp_directory_path() / "strata-logits-cli.f32";
  const auto result = test::run_command(test::shell_quote(test::strata_executable().string()) + " logits --model " +
                                        test::shell_quote(model.string()) + " --tokens 1,2,3,4 --threads 1 --output " +
                                        test::shell_quote(out.string()));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto logits = read_f32(out);
  std::filesystem::remove(out);
  EXPECT_EQ(logits.size(), 4u * 346u);
  const auto bad = test::run_command(test::shell_quote(test::strata_executable().string()) + " logits --model " +
                                     test::shell_quote(model.string()) + " --tokens 1,2,99999 --output /dev/null");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("outside the vocabulary"), std::string::npos) << bad.err;
}

INSTANTIATE_TEST_SUITE_P(All, ReferenceLogits, ::testing::ValuesIn(test::reference_model_names()),
                         [](const auto& info) { return test::test_name(info.param); });

}  // namespace
}  // namespace strata
