// The CPU backend of plugins/backend-cpu through its function table: every op against a naive
// double-precision reference, matmul over the base, k-quant and IQ3 types on both the dot-kernel path and
// the dequantizing fallback, attention with f16 and int8 caches, and results that depend neither on the
// thread count nor (beyond float rounding) on the instruction set; where the instruction set comes from, the
// thread limit, and a thread pool whose workers cannot all start.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "cpu_backend.hpp"
#include "cpu_topology.hpp"
#include "float_kernels.hpp"
#include "strata/backend.h"
#include "strata/cpu_isa.hpp"
#include "strata/half.hpp"
#include "strata/plugin.hpp"
#include "support/backend_harness.hpp"
#include "support/scoped_environment.hpp"
#include "thread_pool.hpp"

namespace {

using namespace strata::test;  // NOLINT: the harness's types, constants and helpers

const strata_backend_table& table() { return strata::cpu::cpu_backend_table(); }

const strata_quant_type& q8_0_type() { return test_types().type(kQ8_0); }

std::vector<float> dequantize_q8_0(const void* blocks, int64_t n) {
  std::vector<float> values(n);
  q8_0_type().dequantize(blocks, values.data(), n / 32, nullptr);
  return values;
}

// Test-only types with a CPU dot kernel written here, so the backend's fast path is tested apart from
// the real kernels: Q8_0 blocks under other type ids, one taking Q8_0 activations and one taking floats.
// Each counts its calls.
constexpr uint32_t kTestQ8DotQ8 = 200, kTestQ8DotF32 = 201;
std::atomic<int64_t> test_dot_calls{0};

template <bool FloatActivation>
void test_dot_rows(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, const void* activation,
                   float* out) {
  ++test_dot_calls;
  const std::vector<float> x = FloatActivation ? std::vector<float>(static_cast<const float*>(activation),
                                                                    static_cast<const float*>(activation) + n)
                                               : dequantize_q8_0(activation, n);
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> w = dequantize_q8_0(static_cast<const uint8_t*>(weight) + r * row_bytes, n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += double{w[i]} * x[i];
    out[r] = static_cast<float>(sum);
  }
}

strata_quant_type make_test_type(uint32_t id, uint32_t activation_type, decltype(&test_dot_rows<true>) dot) {
  strata_quant_type type = q8_0_type();
  type.type_id = id;
  type.cpu_activation_type = activation_type;
  type.cpu_dot_rows = dot;
  return type;
}

// IQ3_S under a type id of its own whose int8 row decoder counts its calls: which matrix kernel ran.
constexpr uint32_t kTestIq3SCountedInt8 = 202;
std::atomic<int64_t> int8_decodes{0};
void counted_iq3_s_to_int8(int64_t n, int64_t n_rows, const void* weight, size_t row_bytes, int8_t* levels,
                           int16_t* group_scales, float* block_scales) {
  ++int8_decodes;
  test_types().type(kIQ3_S).cpu_rows_to_int8(n, n_rows, weight, row_bytes, levels, group_scales, block_scales);
}

// The shared test types plus the test-only dot types.
TestTypes& types() {
  static TestTypes& types = []() -> TestTypes& {
    TestTypes& shared = test_types();
    shared.add(make_test_type(kTestQ8DotQ8, kQ8_0, &test_dot_rows<false>));
    shared.add(make_test_type(kTestQ8DotF32, kF32, &test_dot_rows<true>));
    strata_quant_type counted = shared.type(kIQ3_S);
    counted.type_id = kTestIq3SCountedInt8;
    counted.cpu_rows_to_int8 = &counted_iq3_s_to_int8;
    counted.cpu_repacked = nullptr;  // the decodes counted are this type's own
    counted.cpu_repack = nullptr;
    shared.add(counted);
    return shared;
  }();
  return types;
}

// The CPU backend's table, once the test-only types are registered.
const strata_backend_table& table_with_test_types() {
  types();
  return table();
}

// A CPU backend instance whose quant types carry all, some or none of their CPU dot kernels.
class Backend : public TestBackend {
  using Variant = TestTypes::Variant;

 public:
  enum Kernels { with_dot_kernels, without_dot_kernels, one_token_dot_kernels, dot_kernels_without_int8 };

  static auto finder(Kernels kernels) {
    switch (kernels) {
      case without_dot_kernels:
        return &TestTypes::finder<Variant::without_cpu_dot>;
      case one_token_dot_kernels:
        return &TestTypes::finder<Variant::one_token_dot>;
      case dot_kernels_without_int8:
        return &TestTypes::finder<Variant::without_int8>;
      case with_dot_kernels:
        break;
    }
    return &TestTypes::finder<Variant::as_offered>;
  }

  explicit Backend(int n_threads, const std::string& options = "{}", Kernels kernels = with_dot_kernels)
      : TestBackend(table_with_test_types(), n_threads, options, finder(kernels)) {
    EXPECT_EQ(create_status(), STRATA_OK) << message();
  }

  std::vector<float> matmul(const HostWeight& w, int32_t expert, const std::vector<float>& x, int32_t n_tokens,
                            const std::vector<float>* bias = nullptr) {
    strata_weight* weight = load(w);
    strata_buffer* out = alloc_floats(static_cast<size_t>(n_tokens * w.ne1));
    strata_weight* bias_weight = bias != nullptr ? load_f32(*bias) : nullptr;
    EXPECT_EQ(table().matmul(get(), weight, expert, upload(x), n_tokens, bias_weight, out, error()), STRATA_OK)
        << message();
    return read(out, static_cast<size_t>(n_tokens * w.ne1));
  }
};

std::vector<double> reference_matmul(const HostWeight& w, int64_t expert, const std::vector<float>& x,
                                     int64_t n_tokens) {
  std::vector<double> out(static_cast<size_t>(n_tokens * w.ne1));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t o = 0; o < w.ne1; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < w.ne0; ++i) sum += double{w.row(expert, o)[i]} * x[t * w.ne0 + i];
      out[t * w.ne1 + o] = sum;
    }
  }
  return out;
}

// |actual - expected| <= tolerance * (1 + |expected|) everywhere.
template <class Expected>
void expect_near_all(const std::vector<float>& actual, const std::vector<Expected>& expected, double tolerance,
                     const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    const double bound = tolerance * (1.0 + std::fabs(static_cast<double>(expected[i])));
    if (!(std::fabs(actual[i] - static_cast<double>(expected[i])) <= bound)) {
      ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected " << expected[i];
      ++failures;
    }
  }
}

// sqrt(sum (actual - expected)^2 / sum expected^2): how far a result computed from rounded activations is.
template <class Expected>
double relative_rms_error(const std::vector<float>& actual, const std::vector<Expected>& expected) {
  double error = 0.0, norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    error += std::pow(actual[i] - static_cast<double>(expected[i]), 2.0);
    norm += std::pow(static_cast<double>(expected[i]), 2.0);
  }
  return std::sqrt(error / norm);
}

// Instance, options, memory.
TEST(BackendCpu, DescribeNamesThreadsAndInstructionSet) {
  Backend backend(3, R"({"isa": "scalar"})");
  EXPECT_STREQ(table().describe(backend.get()), "cpu: 3 threads, scalar");
  Backend defaults(0);
  EXPECT_NE(std::string(table().describe(defaults.get())).find("threads"), std::string::npos);
}

TEST(BackendCpu, EnvironmentChoosesTheInstructionSetOverTheOption) {
  const ScopedEnvironment environment("STRATA_CPU_ISA", "scalar");  // CI may run the whole suite under one level
  Backend backend(1, R"({"isa": "auto"})");
  EXPECT_STREQ(table().describe(backend.get()), "cpu: 1 threads, scalar");
}

TEST(BackendCpu, RejectsAnUnknownInstructionSet) {
  const strata_backend_config config{sizeof(strata_backend_config), 1, R"({"isa": "neon"})", &types(),
                                     &TestTypes::finder<TestTypes::Variant::as_offered>};
  strata_backend* backend = nullptr;
  char message[256] = "";
  strata_error error{message, sizeof message};
  EXPECT_EQ(table().create(&config, &backend, &error), STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(message).find("neon"), std::string::npos) << message;
}

// The instruction set's sources, from the last to win: the manifest's option (set at init), the instance's
// option, STRATA_CPU_ISA, the host's request (--cpu-isa). Each test starts with none and leaves none set.
class BackendCpuIsa : public testing::Test {
 protected:
  BackendCpuIsa() { clear(); }
  ~BackendCpuIsa() override { clear(); }

  static void clear() {
    strata::cpu::set_plugin_options("{}");
    strata::sdk::host_cpu_isa_request().clear();
  }
  // The description of a one-thread instance with these options.
  static std::string describe(const std::string& options) {
    Backend backend(1, options);
    return table().describe(backend.get());
  }
  // What a one-thread instance describes when it runs `name`'s level on this CPU (a level the CPU lacks falls
  // back to its best).
  static std::string running(const char* name) {
    const auto isa = strata::sdk::choose_cpu_isa(name, strata::sdk::detect_cpu_isa()).isa;
    return std::string("cpu: 1 threads, ") + strata::sdk::cpu_isa_name(isa) +
           (isa >= strata::sdk::CpuIsa::avx2 ? ", weights repacked" : "");
  }
  // The message of the Failure that set_plugin_options throws, or "" when it accepts the options.
  static std::string refusal(const char* options) {
    try {
      strata::cpu::set_plugin_options(options);
    } catch (const strata::sdk::Failure& failure) {
      EXPECT_EQ(failure.status(), STRATA_E_INVALID_ARGUMENT);
      return failure.what();
    }
    return "";
  }

  ScopedEnvironment environment_{"STRATA_CPU_ISA", nullptr};
};

TEST_F(BackendCpuIsa, ManifestOptionChoosesTheLevelOfInstancesThatAskForNone) {
  EXPECT_EQ(refusal(R"({"isa": "scalar"})"), "");
  EXPECT_EQ(describe("{}"), running("scalar"));
  EXPECT_EQ(describe(R"({"isa": "avx2"})"), running("avx2"));              // the instance's own option wins
  EXPECT_EQ(describe(R"({"vram_reserve_mib": 512})"), running("scalar"));  // other backends' options are ignored
}

TEST_F(BackendCpuIsa, HostRequestThenEnvironmentWinOverTheOptions) {
  EXPECT_EQ(refusal(R"({"isa": "avx2"})"), "");
  environment_.set("scalar");
  EXPECT_EQ(describe(R"({"isa": "avx2"})"), running("scalar"));
  strata::sdk::host_cpu_isa_request() = "avx2";
  EXPECT_EQ(describe(R"({"isa": "scalar"})"), running("avx2"));
  strata::sdk::host_cpu_isa_request() = "auto";  // asked for explicitly, auto wins too
  EXPECT_EQ(describe(R"({"isa": "scalar"})"), running("auto"));
}

TEST_F(BackendCpuIsa, InvalidValuesAreRefusedNamingTheOptionAndTheLevels) {
  const std::string unknown = refusal(R"({"isa": "neon"})");
  EXPECT_NE(unknown.find("backend-cpu manifest option \"isa\" is \"neon\""), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("auto, avx512, avx2, scalar"), std::string::npos) << unknown;
  EXPECT_NE(refusal(R"({"isa": 2})").find("must be a string"), std::string::npos);
  EXPECT_NE(refusal(R"({"threads": 4})").find("\"threads\" is unknown"), std::string::npos);
  EXPECT_NE(refusal("[1]").find("not a JSON object"), std::string::npos);

  environment_.set("sse9");
  const strata_backend_config config{sizeof(strata_backend_config), 1, "{}", &types(),
                                     &TestTypes::finder<TestTypes::Variant::as_offered>};
  strata_backend* backend = nullptr;
  char message[256] = "";
  strata_error error{message, sizeof message};
  EXPECT_EQ(table().create(&config, &backend, &error), STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(message).find("STRATA_CPU_ISA is \"sse9\""), std::string::npos) << message;
}

TEST(BackendCpu, RefusesMoreThreadsThanTheLimit) {
  const strata_backend_config config{sizeof(strata_backend_config), STRATA_MAX_THREADS + 1, "{}", &types(),
                                     &TestTypes::finder<TestTypes::Variant::as_offered>};
  strata_backend* backend = nullptr;
  char message[256] = "";
  strata_error error{message, sizeof message};
  ASSERT_EQ(table().create(&config, &backend, &error), STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(message).find("n_threads is " + std::to_string(STRATA_MAX_THREADS + 1)), std::string::npos)
      << message;
}

// A worker that cannot start (the system has no thread to give) fails the pool with the thread count and the
// system's reason, after the workers that did start are stopped and joined.
TEST(ThreadPool, AWorkerThatCannotStartFailsThePoolAfterJoiningTheOthers) {
  std::atomic<int> running{0};
  int calls = 0;
  const auto start_three = [&](std::function<void()> body) {
    if (++calls > 3) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++running;
    return std::thread([&running, body = std::move(body)] {
      body();
      --running;
    });
  };
  try {
    strata::cpu::ThreadPool pool(8, strata::cpu::ThreadPool::kDefaultPoll, start_three);
    ADD_FAILURE() << "the pool started all its workers";
  } catch (const strata::sdk::Failure& failure) {
    const std::string message = failure.what();
    EXPECT_NE(message.find("cannot start 8 threads: thread 5 failed"), std::string::npos) << message;
    EXPECT_NE(message.find(std::make_error_code(std::errc::resource_unavailable_try_again).message()),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(running.load(), 0);
}

// The message with which creating an instance with these options fails, expected as an invalid argument.
std::string refusal(const std::string& options) {
  const strata_backend_config config{sizeof(strata_backend_config), 2, options.c_str(), &types(),
                                     &TestTypes::finder<TestTypes::Variant::as_offered>};
  strata_backend* backend = nullptr;
  char message[256] = "";
  strata_error error{message, sizeof message};
  EXPECT_EQ(table().create(&config, &backend, &error), STRATA_E_INVALID_ARGUMENT) << options;
  return message;
}

// The instance option "poll_us" (--cpu-poll-us) takes a whole number of microseconds up to a second; anything else
// is refused naming it.
TEST(BackendCpuOptions, PollTimeIsAWholeNumberOfMicrosecondsUpToASecond) {
  for (const char* good : {"0", "50", "1000000"}) {
    const std::string options = std::string(R"({"poll_us": )") + good + "}";
    EXPECT_NO_THROW(Backend(2, options)) << options;
  }
  for (const char* bad : {"-1", "2.5", "\"fast\"", "1000001"}) {
    const std::string message = refusal(std::string(R"({"poll_us": )") + bad + "}");
    EXPECT_NE(message.find("\"poll_us\" must be a whole number of microseconds"), std::string::npos) << bad << message;
  }
}

// The instance option "pin_threads" (--cpu-pin) is 0 or 1; anything else is refused naming it. Pinned, the
// description says so (a one-thread instance has no workers to pin, and fits any machine).
TEST(BackendCpuOptions, PinThreadsIsZeroOrOneAndTheDescriptionSaysWhatHappened) {
  for (const char* bad : {"2", "-1", "0.5", "\"yes\""}) {
    const std::string message = refusal(std::string(R"({"pin_threads": )") + bad + "}");
    EXPECT_NE(message.find("\"pin_threads\" must be 0 or 1"), std::string::npos) << bad << message;
  }
  Backend pinned(1, R"({"pin_threads": 1})"), unpinned(1, R"({"pin_threads": 0})");
  EXPECT_NE(std::string(table().describe(pinned.get())).find(", pinned to cores"), std::string::npos);
  EXPECT_EQ(std::string(table().describe(unpinned.get())).find("pinned"), std::string::npos);
}

// IQ3_S weights kept as 4-bit levels (the option "repacked_weights", on by default at the avx2 and avx512 levels)
// give the file layout's floats to the bit, for one token (the dot kernel) and for many (the int8 kernel at the
// avx512 level), and take the layout's bytes from the instance's memory: 136 a block where the file's take 110.
TEST(BackendCpuOptions, RepackedWeightsGiveTheFileLayoutsFloatsInTheirOwnMemory) {
  if (strata::sdk::cpu_isa() < strata::sdk::CpuIsa::avx2) GTEST_SKIP() << "this CPU or STRATA_CPU_ISA has no avx2";
  const HostWeight w = make_weight(kIQ3_S, 512, 40, 2, 91);
  for (int32_t n_tokens : {1, 3, 24}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens * 512), 92 + n_tokens);
    Backend in_place(2, R"({"repacked_weights": 0})"), repacked(2);
    EXPECT_EQ(repacked.matmul(w, 1, x, n_tokens), in_place.matmul(w, 1, x, n_tokens)) << n_tokens << " tokens";
    EXPECT_NE(std::string(table().describe(repacked.get())).find("weights repacked"), std::string::npos);
  }
  const auto used = [&](const char* options) {
    Backend backend(1, options);
    const auto memory_info = reinterpret_cast<strata_backend_memory_info_fn>(
        table().get_proc_address(backend.get(), STRATA_BACKEND_PROC_MEMORY_INFO));
    strata_memory_info before{sizeof(strata_memory_info), 0, 0}, after = before;
    EXPECT_EQ(memory_info(backend.get(), &before, backend.error()), STRATA_OK);
    backend.load(w);
    EXPECT_EQ(memory_info(backend.get(), &after, backend.error()), STRATA_OK);
    return after.used_bytes - before.used_bytes;
  };
  const uint64_t blocks = 512 / 256 * 40 * 2;
  EXPECT_EQ(used(R"({"repacked_weights": 0})"), blocks * 110);
  EXPECT_EQ(used("{}"), blocks * 136);
}

TEST(BackendCpuOptions, RepackedWeightsIsZeroOrOne) {
  for (const char* bad : {"2", "-1", "0.5", "\"yes\""}) {
    const std::string message = refusal(std::string(R"({"repacked_weights": )") + bad + "}");
    EXPECT_NE(message.find("\"repacked_weights\" must be 0 or 1"), std::string::npos) << bad << message;
  }
}

// Jobs of every size, back to back, with and without a minimum share: every item runs once, on a thread of the
// pool, and a job too small to share runs on the caller alone (worker 0). Many small jobs in a row are what a
// decode step issues; a worker left out of one must not run a share of the next.
// Two threads poll on this machine's cores unless told not to; eight outnumber CI's two and sleep at once.
TEST(ThreadPool, EveryItemRunsOnceWhateverTheJobSizes) {
  using std::chrono::microseconds;
  for (const auto& [threads, poll] :
       {std::pair{2, strata::cpu::ThreadPool::kDefaultPoll}, std::pair{2, microseconds(0)},
        std::pair{8, strata::cpu::ThreadPool::kDefaultPoll}}) {
    strata::cpu::ThreadPool pool(threads, poll);
    std::vector<std::atomic<int>> runs(300);
    for (int round = 0; round < 2000; ++round) {
      const int64_t n = 1 + (round * 37) % 300;
      const int64_t min_per_thread = 1 + round % 90;
      for (int64_t i = 0; i < n; ++i) runs[i] = 0;
      std::atomic<int> bad_worker{0}, other_threads{0};
      pool.parallel_for(
          n,
          [&](int64_t begin, int64_t end, int worker) {
            if (worker < 0 || worker >= pool.size()) ++bad_worker;
            if (worker != 0) ++other_threads;
            for (int64_t i = begin; i < end; ++i) ++runs[i];
          },
          min_per_thread);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(runs[i].load(), 1) << "item " << i << " of " << n << ", round " << round;
      ASSERT_EQ(bad_worker.load(), 0);
      if (n < 2 * min_per_thread) {
        ASSERT_EQ(other_threads.load(), 0) << n << " items, at least " << min_per_thread;
      }
    }
  }
}

// pin_workers puts worker w on one_cpu_per_core()[w % cores] alone, and leaves the caller's thread (chunk 0) as
// it was.
TEST(ThreadPool, PinnedWorkersRunOnTheirOwnCoresAndTheCallerStaysAsItWas) {
  const std::vector<int> cpus = strata::cpu::one_cpu_per_core();
  if (cpus.size() < 2) GTEST_SKIP() << "pinning needs 2 cores; this machine shows " << cpus.size();
  cpu_set_t caller;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof caller, &caller), 0);
  strata::cpu::ThreadPool pool(3);
  ASSERT_TRUE(pool.pin_workers(cpus));
  std::vector<cpu_set_t> seen(3);
  std::atomic<int> arrived{0};
  pool.parallel_for(3, [&](int64_t, int64_t, int worker) {
    pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), &seen[static_cast<size_t>(worker)]);
    // Each thread holds its one-item chunk until all three have one, so each of them runs one.
    ++arrived;
    while (arrived.load() < 3) std::this_thread::yield();
  });
  EXPECT_TRUE(CPU_EQUAL(&seen[0], &caller));
  for (size_t worker = 1; worker < seen.size(); ++worker) {
    EXPECT_EQ(CPU_COUNT(&seen[worker]), 1) << worker;
    EXPECT_TRUE(CPU_ISSET(cpus[worker % cpus.size()], &seen[worker])) << worker;
  }
}

// Every instruction set level this CPU runs: to_halves writes what sdk::fp32_to_fp16 does (finite values, strided or
// not, with a tail shorter than a vector), and swiglu is silu(gate) * up within the polynomial e^'s error, from
// the saturated ends of silu to its middle, a NaN staying NaN.
TEST(FloatKernels, HalvesAndSwigluAgreeWithTheScalarDefinitionsAtEveryLevel) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(random));
  x[3] = 0.0f;
  x[4] = 65504.0f;
  for (const strata::sdk::CpuIsa isa : strata::sdk::kAllCpuIsas) {
    if (isa > strata::sdk::detect_cpu_isa()) continue;
    const strata::cpu::FloatKernels& kernels = strata::cpu::float_kernels(isa);
    for (const size_t stride : {size_t{1}, size_t{16}}) {
      std::vector<uint16_t> halves(x.size() * stride, 0x1234);
      kernels.to_halves(x.data(), static_cast<int64_t>(x.size()), halves.data(), stride);
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(halves[i * stride], strata::sdk::fp32_to_fp16(x[i])) << strata::sdk::cpu_isa_name(isa) << " " << i;
        if (stride > 1 && i + 1 < x.size()) {
          EXPECT_EQ(halves[i * stride + 1], 0x1234);  // between: untouched
        }
      }
    }
    std::vector<float> gate, up;
    for (float g = -90.0f; g <= 90.0f; g += 0.37f) {
      gate.push_back(g);
      up.push_back(0.5f + std::fabs(g) * 0.01f);
    }
    gate.push_back(std::nanf(""));
    up.push_back(1.0f);
    std::vector<float> out = gate;
    kernels.swiglu(out.data(), up.data(), static_cast<int64_t>(out.size()));
    for (size_t i = 0; i + 1 < gate.size(); ++i) {
      const double expected = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i];
      EXPECT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-30)
          << strata::sdk::cpu_isa_name(isa) << " " << gate[i];
    }
    EXPECT_TRUE(std::isnan(out.back())) << strata::sdk::cpu_isa_name(isa);
  }
}

// Every level's add, mul and scale_mul give each element the scalar expression's float (p + q, p * q, x * s * g in
// that order), over lengths with and without a tail, in place too, NaN and infinity passing through.
TEST(FloatKernels, ElementwiseKernelsGiveTheScalarFloatsAtEveryLevel) {
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  for (const int64_t n : {int64_t{5}, int64_t{16}, int64_t{53}}) {
    std::vector<float> a(static_cast<size_t>(n)), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = value(random), b[i] = value(random);
    a[1] = std::numeric_limits<float>::infinity();
    b[2] = std::nanf("");
    const float scale = 0.3f;
    for (const strata::sdk::CpuIsa isa : strata::sdk::kAllCpuIsas) {
      if (isa > strata::sdk::detect_cpu_isa()) continue;
      const strata::cpu::FloatKernels& kernels = strata::cpu::float_kernels(isa);
      std::vector<float> sum(a.size()), product(a.size()), scaled(a.size()), in_place = a;
      kernels.add(a.data(), b.data(), sum.data(), n);
      kernels.mul(a.data(), b.data(), product.data(), n);
      kernels.scale_mul(a.data(), scale, b.data(), scaled.data(), n);
      kernels.add(in_place.data(), b.data(), in_place.data(), n);
      for (size_t i = 0; i < a.size(); ++i) {
        const std::string where =
            std::string(strata::sdk::cpu_isa_name(isa)) + " n=" + std::to_string(n) + " i=" + std::to_string(i);
        const auto same = [](float x, float y) {
          return (std::isnan(x) && std::isnan(y)) || std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
        };
        EXPECT_TRUE(same(sum[i], a[i] + b[i])) << where;
        EXPECT_TRUE(same(product[i], a[i] * b[i])) << where;
        EXPECT_TRUE(same(scaled[i], a[i] * scale * b[i])) << where;
        EXPECT_TRUE(same(in_place[i], sum[i])) << where;
      }
    }
  }
}

// A thread that runs late holds up only the chunk it claimed: the others take the rest. Worker 1 stalls in its
// first chunk (as a thread whose core the system gave to other work would); the caller does every other chunk
// meanwhile, where a split fixed in advance would have left half the items to worker 1.
TEST(ThreadPool, TheOtherThreadsTakeTheChunksOfAThreadThatRunsLate) {
  strata::cpu::ThreadPool pool(2);
  std::atomic<int64_t> late_items{0}, caller_items{0};
  std::atomic<bool> stalled{false};
  constexpr int64_t kItems = 400;
  pool.parallel_for(kItems, [&](int64_t begin, int64_t end, int worker) {
    if (worker == 0) {
      caller_items += end - begin;
      return;
    }
    if (!stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    late_items += end - begin;
  });
  EXPECT_EQ(caller_items.load() + late_items.load(), kItems);
  // One chunk of the 2 x kChunksPerThread at most went to the late worker.
  EXPECT_LE(late_items.load(), kItems / (2 * strata::cpu::ThreadPool::kChunksPerThread)) << caller_items.load();
}

// A chunk's exception reaches the caller, and the pool keeps working after it.
TEST(ThreadPool, AChunksExceptionReachesTheCaller) {
  strata::cpu::ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(30,
                                 [](int64_t begin, int64_t, int) {
                                   if (begin > 0) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(30, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 435);
}

TEST(BackendCpu, BuffersRoundTripAndRejectOutOfRangeAccess) {
  Backend backend(1);
  const std::vector<float> values = random_floats(100, 1);
  strata_buffer* buffer = backend.upload(values);
  EXPECT_EQ(backend.read(buffer, values.size()), values);
  float dst[4];
  EXPECT_EQ(table().buffer_read(backend.get(), buffer, 396, dst, 8, backend.error()), STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(backend.message().find("outside"), std::string::npos) << backend.message();
}

// signalled_write (a named function) runs ops as they are called: it waits on the calling thread until another
// thread raises the signal to the value, then copies; a value already reached copies at once; a short struct_size
// is refused.
TEST(BackendCpu, SignalledWriteWaitsForTheSignalThenCopies) {
  Backend backend(1);
  const auto write_fn = reinterpret_cast<strata_backend_signalled_write_fn>(
      table().get_proc_address(backend.get(), STRATA_BACKEND_PROC_SIGNALLED_WRITE));
  ASSERT_NE(write_fn, nullptr);
  strata_buffer* buffer = backend.upload(std::vector<float>(64, 0.0f));
  std::vector<float> bytes = random_floats(64, 3);
  uint64_t signal = 4;
  strata_signalled_write write{sizeof(strata_signalled_write), buffer,  0, bytes.data(),
                               bytes.size() * sizeof(float),   &signal, 4};
  ASSERT_EQ(write_fn(backend.get(), &write, backend.error()), STRATA_OK) << backend.message();
  EXPECT_EQ(backend.read(buffer, bytes.size()), bytes);

  const std::vector<float> later = random_floats(64, 4);
  write.value = 5;
  std::thread maker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    bytes = later;
    __atomic_store_n(&signal, 5, __ATOMIC_RELEASE);
  });
  const auto start = std::chrono::steady_clock::now();
  const strata_status status = write_fn(backend.get(), &write, backend.error());
  const auto waited = std::chrono::steady_clock::now() - start;
  maker.join();
  ASSERT_EQ(status, STRATA_OK) << backend.message();
  EXPECT_GE(waited, std::chrono::milliseconds(25));
  EXPECT_EQ(backend.read(buffer, later.size()), later) << "the bytes made before the signal";
  write.struct_size = 8;
  EXPECT_EQ(write_fn(backend.get(), &write, backend.error()), STRATA_E_INVALID_ARGUMENT);
}

TEST(BackendCpu, WeightOfAnUnknownTypeIsUnsupported) {
  Backend backend(1);
  const uint8_t bytes[64] = {};
  const strata_weight_desc desc{sizeof(strata_weight_desc), "blk.3.ffn_down.weight", 999, 32, 1, 1, bytes};
  strata_weight* weight = nullptr;
  EXPECT_EQ(table().weight_load(backend.get(), &desc, &weight, backend.error()), STRATA_E_UNSUPPORTED);
  EXPECT_NE(backend.message().find("blk.3.ffn_down.weight"), std::string::npos) << backend.message();
}

// Matmul over each weight type, for one token and several, on both paths: the type's dot kernel (with
// activations converted to its activation type) and the dequantizing fallback.
struct MatmulCase {
  uint32_t type;
  int64_t ne0, ne1;
};

class BackendCpuMatmul : public testing::TestWithParam<std::tuple<MatmulCase, bool>> {};

TEST_P(BackendCpuMatmul, MatchesTheDoubleReference) {
  const auto [c, with_dot] = GetParam();
  const HostWeight w = make_weight(c.type, c.ne0, c.ne1, 2, 7 + c.type);
  Backend backend(2, "{}", with_dot ? Backend::with_dot_kernels : Backend::without_dot_kernels);
  for (int32_t n_tokens : {1, 5}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens * c.ne0), 11);
    const auto actual = backend.matmul(w, 1, x, n_tokens);
    const auto expected = reference_matmul(w, 1, x, n_tokens);
    const std::string what = types().type(c.type).name + std::string(" x ") + std::to_string(n_tokens);
    if (with_dot && types().type(c.type).cpu_activation_type != kF32) {
      // Activations rounded to Q8_0 / Q8_K, which the float reference is not; the next test checks these exactly.
      EXPECT_LT(relative_rms_error(actual, expected), 0.02) << what;
    } else {
      expect_near_all(actual, expected, 2e-5 * std::sqrt(double(c.ne0)), what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, BackendCpuMatmul,
    testing::Combine(testing::Values(MatmulCase{kF32, 96, 37}, MatmulCase{kF16, 200, 33}, MatmulCase{kQ8_0, 256, 70},
                                     MatmulCase{kQ4_K, 512, 20}, MatmulCase{kQ5_K, 256, 19}, MatmulCase{kQ6_K, 256, 21},
                                     MatmulCase{kIQ3_XXS, 256, 9}, MatmulCase{kIQ3_S, 256, 9},
                                     MatmulCase{kTestQ8DotQ8, 256, 70}, MatmulCase{kTestQ8DotF32, 96, 37}),
                     testing::Bool()),
    [](const testing::TestParamInfo<std::tuple<MatmulCase, bool>>& info) {
      const uint32_t type = std::get<0>(info.param).type;
      return std::string(types().type(type).name) + "_" + std::to_string(type) +
             (std::get<1>(info.param) ? "_DotKernel" : "_Dequantized");
    });

// Against the activations the kernel saw (rounded to its activation type), the dot path is as exact as the
// fallback is against the floats.
TEST(BackendCpu, MatmulDotPathMatchesTheReferenceOnConvertedActivations) {
  for (uint32_t type : {kQ8_0, kQ4_K, kQ5_K, kQ6_K, kIQ3_XXS, kIQ3_S, kTestQ8DotQ8}) {
    const strata_quant_type& weight_type = types().type(type);
    ASSERT_NE(weight_type.cpu_dot_rows, nullptr) << weight_type.name;
    const strata_quant_type& activation_type = types().type(weight_type.cpu_activation_type);
    const HostWeight w = make_weight(type, 512, 24, 1, 50);
    const std::vector<float> x = random_floats(3 * 512, 51);
    const int64_t n_blocks = 3 * 512 / activation_type.block_elements;
    std::vector<uint8_t> converted(static_cast<size_t>(n_blocks * activation_type.block_bytes));
    ASSERT_EQ(activation_type.quantize(x.data(), converted.data(), 3, 512, nullptr, nullptr), STRATA_OK);
    std::vector<float> seen(x.size());
    ASSERT_EQ(activation_type.dequantize(converted.data(), seen.data(), n_blocks, nullptr), STRATA_OK);
    Backend backend(2);
    test_dot_calls = 0;
    expect_near_all(backend.matmul(w, 0, x, 3), reference_matmul(w, 0, seen, 3), 1e-4, weight_type.name);
    if (type == kTestQ8DotQ8) {
      EXPECT_GT(test_dot_calls.load(), 0);
    }
  }
}

// A multi-token kernel computes, per token, what the one-token kernel does: the same sums in the same order.
TEST(BackendCpu, MatmulMultiTokenKernelMatchesOneTokenAtATime) {
  for (uint32_t type : {kIQ3_XXS, kIQ3_S}) {
    ASSERT_NE(types().type(type).cpu_dot_rows_multi, nullptr) << types().type(type).name;
    const HostWeight w = make_weight(type, 512, 45, 2, 60);
    Backend multi(2, "{}", Backend::dot_kernels_without_int8), one_token(2, "{}", Backend::one_token_dot_kernels);
    for (int32_t n_tokens : {2, 8, 19}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * 512, 61);
      EXPECT_EQ(multi.matmul(w, 1, x, n_tokens), one_token.matmul(w, 1, x, n_tokens))
          << types().type(type).name << " x " << n_tokens;
    }
  }
}

// The int8 kernel (AVX-512 VNNI, int8_gemm.hpp) against the multi-token dot kernel: both read the same Q8_K
// activations and do the same float operations (strata_quant_type::cpu_rows_to_int8, and for Q4_K's and Q5_K's
// mins cpu_rows_int8_offsets), so every product is the same float. Rows 3 blocks long, a row count no multiple of the
// kernel's 4-row block, 1 to 40 tokens (the int8 kernel from 8 on, groups of 16 with a partial one), then 70 and 90
// (5 and 6 groups: passes of two, the odd count's last of three).
TEST(BackendCpu, MatmulInt8KernelGivesTheMultiTokenKernelsFloats) {
  for (uint32_t type : {kIQ3_XXS, kIQ3_S, kQ4_K, kQ5_K}) {
    ASSERT_NE(types().type(type).cpu_rows_to_int8, nullptr) << types().type(type).name;
    const int64_t n = 768, rows = 45;
    const HostWeight w = make_weight(type, n, rows, 2, 70);
    Backend int8(2), dot(2, "{}", Backend::dot_kernels_without_int8);
    for (int32_t n_tokens = 1; n_tokens <= 90; n_tokens += n_tokens < 40 ? 1 : n_tokens == 40 ? 30 : 20) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n_tokens) * n, 71 + n_tokens);
      const auto got = int8.matmul(w, 1, x, n_tokens), expected = dot.matmul(w, 1, x, n_tokens);
      ASSERT_EQ(got, expected) << types().type(type).name << ", " << n_tokens << " tokens";
    }
  }
}

TEST(BackendCpu, MatmulInt8KernelDoesNotDependOnTheThreadCount) {
  const HostWeight w = make_weight(kIQ3_S, 512, 301, 1, 72);
  const std::vector<float> x = random_floats(37 * 512, 73);
  Backend one(1), three(3);
  EXPECT_EQ(one.matmul(w, 0, x, 37), three.matmul(w, 0, x, 37));
}

// Below AVX-512 (VNNI) the dot kernels run; at it, the int8 kernel (its row decoder is called).
TEST(BackendCpu, MatmulInt8KernelRunsAtTheAvx512LevelOnly) {
  const HostWeight w = make_weight(kTestIq3SCountedInt8, 512, 20, 1, 74);
  const std::vector<float> x = random_floats(24 * 512, 75);
  int8_decodes = 0;
  {
    const ScopedEnvironment avx2("STRATA_CPU_ISA", "avx2");  // what the instance's level is decided from first
    Backend(2).matmul(w, 0, x, 24);
    EXPECT_EQ(int8_decodes.load(), 0);
  }
  // The level the next instance takes: this process's own (sdk::cpu_isa) was fixed on its first call, perhaps in
  // the scope above, so it is asked again here as an instance asks.
  const char* forced = std::getenv("STRATA_CPU_ISA");
  if (strata::sdk::choose_cpu_isa(forced != nullptr ? forced : "", strata::sdk::detect_cpu_isa()).isa <
      strata::sdk::CpuIsa::avx512) {
    GTEST_SKIP() << "this CPU or STRATA_CPU_ISA has no avx512";
  }
  Backend(2).matmul(w, 0, x, 24);
  EXPECT_GT(int8_decodes.load(), 0);
}

TEST(BackendCpu, MatmulAddsTheBias) {
  const HostWeight w = make_weight(kF16, 64, 10, 1, 5);
  const std::vector<float> x = random_floats(2 * 64, 6), bias = random_floats(10, 7);
  Backend backend(1);
  const auto actual = backend.matmul(w, 0, x, 2, &bias);
  auto expected = reference_matmul(w, 0, x, 2);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bias[i % 10];
  expect_near_all(actual, expected, 1e-5, "bias");
}

TEST(BackendCpu, MatmulRejectsAnExpertOutOfRange) {
  const HostWeight w = make_weight(kF32, 32, 4, 2, 5);
  Backend backend(1);
  strata_buffer* x = backend.upload(random_floats(32, 1));
  strata_buffer* out = backend.alloc_floats(4);
  EXPECT_EQ(table().matmul(backend.get(), backend.load(w), 2, x, 1, nullptr, out, backend.error()),
            STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(backend.message().find("expert 2"), std::string::npos) << backend.message();
}

TEST(BackendCpu, MatmulDoesNotDependOnTheThreadCount) {
  for (auto kernels : {Backend::with_dot_kernels, Backend::without_dot_kernels}) {
    for (uint32_t type : {kF16, kQ8_0, kQ4_K}) {
      const HostWeight w = make_weight(type, 512, 300, 1, 9);
      const std::vector<float> x = random_floats(7 * 512, 10);
      Backend one(1, "{}", kernels), four(4, "{}", kernels);
      EXPECT_EQ(one.matmul(w, 0, x, 7), four.matmul(w, 0, x, 7)) << types().type(type).name;
    }
  }
}

TEST(BackendCpu, ScalarInstructionSetAgreesWithAuto) {
  const HostWeight w = make_weight(kF16, 1024, 64, 1, 12);
  const std::vector<float> x = random_floats(3 * 1024, 13);
  Backend scalar(2, R"({"isa": "scalar"})", Backend::without_dot_kernels);
  Backend best(2, R"({"isa": "auto"})", Backend::without_dot_kernels);
  const auto expected = scalar.matmul(w, 0, x, 3);
  expect_near_all(best.matmul(w, 0, x, 3), expected, 1e-5, std::string("scalar vs ") + table().describe(best.get()));
}

// Attention: a double reference over every position's keys and values, [position][kv head][head_dim].
struct AttentionShape {
  int32_t n_head, n_head_kv, head_dim;
};

std::vector<double> reference_attention(const AttentionShape& s, const std::vector<int32_t>& positions,
                                        const std::vector<float>& q, const std::vector<float>& k_all,
                                        const std::vector<float>& v_all, double scale) {
  const int64_t n_tokens = static_cast<int64_t>(positions.size());
  const int32_t group = s.n_head / s.n_head_kv;
  std::vector<double> out(static_cast<size_t>(n_tokens * s.n_head * s.head_dim), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int32_t h = 0; h < s.n_head; ++h) {
      const int32_t kv = h / group;
      const float* qh = q.data() + (t * s.n_head + h) * s.head_dim;
      std::vector<double> scores(positions[t] + 1);
      double max_score = -INFINITY;
      for (int32_t j = 0; j <= positions[t]; ++j) {
        double dot = 0.0;
        for (int32_t d = 0; d < s.head_dim; ++d) dot += double{qh[d]} * k_all[(j * s.n_head_kv + kv) * s.head_dim + d];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0.0;
      for (double& score : scores) sum += (score = std::exp(score - max_score));
      for (int32_t j = 0; j <= positions[t]; ++j) {
        for (int32_t d = 0; d < s.head_dim; ++d) {
          out[(t * s.n_head + h) * s.head_dim + d] += scores[j] / sum * v_all[(j * s.n_head_kv + kv) * s.head_dim + d];
        }
      }
    }
  }
  return out;
}

std::vector<float> round_through_f16(std::vector<float> values) {
  for (float& v : values) v = strata::sdk::fp16_to_fp32(strata::sdk::fp32_to_fp16(v));
  return values;
}

// Runs attention on layer 1 of a cache for the tokens at positions [first, first + n) of a sequence whose
// q, k and v are given for all positions.
std::vector<float> run_attention(Backend& backend, strata_kv_cache* cache, const AttentionShape& s, int32_t first,
                                 int32_t n, const std::vector<float>& q_all, const std::vector<float>& k_all,
                                 const std::vector<float>& v_all) {
  const int64_t q_width = s.n_head * s.head_dim, kv_width = s.n_head_kv * s.head_dim;
  const auto slice = [&](const std::vector<float>& all, int64_t width) {
    return std::vector<float>(all.begin() + first * width, all.begin() + (first + n) * width);
  };
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), first);
  const strata_attention_params params{sizeof(strata_attention_params),
                                       1,
                                       n,
                                       s.n_head,
                                       s.n_head_kv,
                                       s.head_dim,
                                       1.0f / std::sqrt(static_cast<float>(s.head_dim)),
                                       positions.data()};
  strata_buffer* out = backend.alloc_floats(static_cast<size_t>(n * q_width));
  EXPECT_EQ(table().attention(backend.get(), cache, &params, backend.upload(slice(q_all, q_width)),
                              backend.upload(slice(k_all, kv_width)), backend.upload(slice(v_all, kv_width)), out,
                              backend.error()),
            STRATA_OK)
      << backend.message();
  return backend.read(out, static_cast<size_t>(n * q_width));
}

// Attention over positions 0 .. n - 1 against the double reference, with the cache type's tolerance (an f16 cache
// rounds k and v to halves first, which the reference then does too).
void expect_matches_reference(const std::vector<float>& actual, const AttentionShape& s, int32_t n,
                              const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int32_t kv_type) {
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  const double scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  if (kv_type == STRATA_KV_F16) {
    expect_near_all(actual, reference_attention(s, positions, q, round_through_f16(k), round_through_f16(v), scale),
                    1e-5, "f16 cache");
  } else {
    expect_near_all(actual, reference_attention(s, positions, q, k, v, scale), 3e-2, "int8 cache");
  }
}

class BackendCpuAttention : public testing::TestWithParam<int32_t> {};

TEST_P(BackendCpuAttention, GroupedQueryHeadsMatchTheReference) {
  const int32_t kv_type = GetParam();
  const AttentionShape s{6, 2, 72};  // three query heads per kv head; 72 exercises the kernels' tails
  const int32_t n = 9;
  const auto q = random_floats(n * s.n_head * s.head_dim, 1), k = random_floats(n * s.n_head_kv * s.head_dim, 2),
             v = random_floats(n * s.n_head_kv * s.head_dim, 3);
  Backend backend(3);
  const auto actual = run_attention(backend, backend.kv(2, 16, s.n_head_kv, s.head_dim, kv_type), s, 0, n, q, k, v);
  expect_matches_reference(actual, s, n, q, k, v, kv_type);
}

// Half keys are stored in blocks of 16 positions per (layer, kv head): a context that is no multiple of 16, heads
// that follow each other and a prompt whose positions cross blocks must each read their own keys.
TEST_P(BackendCpuAttention, ContextsOfAnyLengthKeepEachHeadsPositionsApart) {
  const int32_t kv_type = GetParam();
  const AttentionShape s{6, 3, 40};
  const int32_t n_ctx = 37;
  const auto q = random_floats(n_ctx * s.n_head * s.head_dim, 21),
             k = random_floats(n_ctx * s.n_head_kv * s.head_dim, 22),
             v = random_floats(n_ctx * s.n_head_kv * s.head_dim, 23);
  Backend backend(2);
  strata_kv_cache* cache = backend.kv(3, n_ctx, s.n_head_kv, s.head_dim, kv_type);
  std::vector<float> actual = run_attention(backend, cache, s, 0, 20, q, k, v);
  const auto rest = run_attention(backend, cache, s, 20, n_ctx - 20, q, k, v);
  actual.insert(actual.end(), rest.begin(), rest.end());
  expect_matches_reference(actual, s, n_ctx, q, k, v, kv_type);
}

// A non-finite key poisons what attends to it, on every instruction set: the vector softmax must not lose a NaN
// score (nor turn a far smaller one into a weight that matters).
TEST_P(BackendCpuAttention, ANonFiniteKeyMakesTheHeadsThatSeeItNonFinite) {
  const AttentionShape s{2, 1, 64};
  const int32_t n = 40;  // two whole vectors of scores and a tail
  const auto q = random_floats(n * s.n_head * s.head_dim, 31), v = random_floats(n * s.n_head_kv * s.head_dim, 33);
  auto k = random_floats(n * s.n_head_kv * s.head_dim, 32);
  k[20 * s.head_dim + 5] = std::numeric_limits<float>::quiet_NaN();  // position 20's key
  k[3 * s.head_dim] = 1e4f;  // position 3 outweighs the others by far: e^(-huge) weights must stay ~0
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    Backend backend(2, std::string(R"({"isa": ")") + isa + "\"}");
    const auto out = run_attention(backend, backend.kv(2, n, s.n_head_kv, s.head_dim, GetParam()), s, 0, n, q, k, v);
    for (int32_t t = 0; t < n; ++t) {
      for (int32_t d = 0; d < s.n_head * s.head_dim; ++d) {
        const float value = out[t * s.n_head * s.head_dim + d];
        if (t >= 20) {
          ASSERT_TRUE(std::isnan(value)) << isa << ": token " << t << " sees the NaN key";
        } else {
          ASSERT_TRUE(std::isfinite(value)) << isa << ": token " << t;
        }
      }
    }
  }
}

TEST_P(BackendCpuAttention, PromptThenSingleStepsEqualOneStep) {
  const int32_t kv_type = GetParam();
  const AttentionShape s{4, 1, 64};
  const auto q = random_floats(8 * s.n_head * s.head_dim, 4), k = random_floats(8 * s.n_head_kv * s.head_dim, 5),
             v = random_floats(8 * s.n_head_kv * s.head_dim, 6);
  Backend backend(2);
  const auto whole = run_attention(backend, backend.kv(2, 32, s.n_head_kv, s.head_dim, kv_type), s, 0, 8, q, k, v);
  strata_kv_cache* cache = backend.kv(2, 32, s.n_head_kv, s.head_dim, kv_type);
  std::vector<float> stepped = run_attention(backend, cache, s, 0, 5, q, k, v);
  for (int32_t position = 5; position < 8; ++position) {
    const auto step = run_attention(backend, cache, s, position, 1, q, k, v);
    stepped.insert(stepped.end(), step.begin(), step.end());
  }
  EXPECT_EQ(stepped, whole);
}

TEST_P(BackendCpuAttention, DoesNotDependOnTheThreadCount) {
  const AttentionShape s{8, 2, 128};
  const auto q = random_floats(6 * s.n_head * s.head_dim, 7), k = random_floats(6 * s.n_head_kv * s.head_dim, 8),
             v = random_floats(6 * s.n_head_kv * s.head_dim, 9);
  Backend one(1), four(4);
  EXPECT_EQ(run_attention(one, one.kv(2, 8, 2, 128, GetParam()), s, 0, 6, q, k, v),
            run_attention(four, four.kv(2, 8, 2, 128, GetParam()), s, 0, 6, q, k, v));
}

TEST_P(BackendCpuAttention, ScalarInstructionSetAgreesWithAuto) {
  const AttentionShape s{4, 2, 128};
  const auto q = random_floats(5 * s.n_head * s.head_dim, 10), k = random_floats(5 * s.n_head_kv * s.head_dim, 11),
             v = random_floats(5 * s.n_head_kv * s.head_dim, 12);
  Backend scalar(2, R"({"isa": "scalar"})"), best(2);
  expect_near_all(run_attention(best, best.kv(2, 8, 2, 128, GetParam()), s, 0, 5, q, k, v),
                  run_attention(scalar, scalar.kv(2, 8, 2, 128, GetParam()), s, 0, 5, q, k, v), 1e-5,
                  "attention, scalar vs auto");
}

INSTANTIATE_TEST_SUITE_P(KvTypes, BackendCpuAttention, testing::Values(STRATA_KV_F16, STRATA_KV_INT8),
                         [](const testing::TestParamInfo<int32_t>& info) {
                           return info.param == STRATA_KV_F16 ? std::string("F16") : std::string("Int8");
                         });

TEST(BackendCpu, AttentionPastTheContextIsAnError) {
  Backend backend(1);
  strata_kv_cache* cache = backend.kv(1, 4096, 1, 8, STRATA_KV_F16);
  const int32_t position = 4096;
  const strata_attention_params params{sizeof(strata_attention_params), 0, 1, 1, 1, 8, 1.0f, &position};
  strata_buffer* qkv = backend.alloc_floats(8);
  EXPECT_EQ(table().attention(backend.get(), cache, &params, qkv, qkv, qkv, backend.alloc_floats(8), backend.error()),
            STRATA_E_INVALID_ARGUMENT);
  EXPECT_EQ(backend.message(), "position 4096 is past the context of 4096");
}

// Router and experts.
TEST(BackendCpu, RouteTakesTheTopKOfTheSoftmax) {
  const int32_t n_tokens = 5, n_experts = 16, n_used = 4;
  std::vector<float> logits = random_floats(n_tokens * n_experts, 14, 2.0f);
  std::fill(logits.begin() + 4 * n_experts, logits.end(), 0.5f);  // the last token: all tied
  for (int32_t routing : {STRATA_ROUTING_SOFTMAX_TOPK, STRATA_ROUTING_SOFTMAX_TOPK_NORM}) {
    Backend backend(2);
    strata_buffer* ids = backend.alloc(n_tokens * n_used * sizeof(int32_t));
    strata_buffer* weights = backend.alloc_floats(n_tokens * n_used);
    ASSERT_EQ(table().route(backend.get(), backend.upload(logits), n_tokens, n_experts, n_used, routing, ids, weights,
                            backend.error()),
              STRATA_OK)
        << backend.message();
    const auto actual_ids = backend.read<int32_t>(ids, n_tokens * n_used);
    const auto actual_weights = backend.read(weights, n_tokens * n_used);
    for (int32_t t = 0; t < n_tokens; ++t) {
      std::vector<double> p(n_experts);
      double sum = 0.0;
      for (int32_t e = 0; e < n_experts; ++e) sum += p[e] = std::exp(double{logits[t * n_experts + e]});
      std::vector<int32_t> order(n_experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
      double chosen = 0.0;
      for (int32_t j = 0; j < n_used; ++j) chosen += p[order[j]] / sum;
      for (int32_t j = 0; j < n_used; ++j) {
        EXPECT_EQ(actual_ids[t * n_used + j], order[j]) << "token " << t << " choice " << j;
        const double expected = p[order[j]] / sum / (routing == STRATA_ROUTING_SOFTMAX_TOPK_NORM ? chosen : 1.0);
        EXPECT_NEAR(actual_weights[t * n_used + j], expected, 1e-6);
      }
    }
  }
}

// route_experts (ABI 1.3) is the router's matmul then route, to the bit (the core's fallback), and refuses a
// router whose rows are not the experts.
TEST(BackendCpu, RouteExpertsIsTheRoutersMatmulThenRoute) {
  const int32_t n_tokens = 3, n_experts = 12, n_used = 4;
  const HostWeight router = make_weight(kF32, 64, n_experts, 1, 15);
  Backend backend(2);
  strata_weight* weight = backend.load(router);
  strata_buffer* x = backend.upload(random_floats(n_tokens * 64, 16));
  struct Outputs {
    strata_buffer *logits, *ids, *weights;
  };
  const auto outputs = [&] {
    return Outputs{backend.alloc_floats(n_tokens * n_experts), backend.alloc(n_tokens * n_used * sizeof(int32_t)),
                   backend.alloc_floats(n_tokens * n_used)};
  };
  for (const int32_t routing : {STRATA_ROUTING_SOFTMAX_TOPK, STRATA_ROUTING_SOFTMAX_TOPK_NORM}) {
    const Outputs fused = outputs(), separate = outputs();
    ASSERT_EQ(table().route_experts(backend.get(), x, weight, n_tokens, n_experts, n_used, routing, fused.logits,
                                    fused.ids, fused.weights, backend.error()),
              STRATA_OK)
        << backend.message();
    ASSERT_EQ(table().matmul(backend.get(), weight, 0, x, n_tokens, nullptr, separate.logits, backend.error()),
              STRATA_OK);
    ASSERT_EQ(table().route(backend.get(), separate.logits, n_tokens, n_experts, n_used, routing, separate.ids,
                            separate.weights, backend.error()),
              STRATA_OK);
    const int32_t n_chosen = n_tokens * n_used;
    EXPECT_EQ(backend.read(fused.logits, n_tokens * n_experts), backend.read(separate.logits, n_tokens * n_experts));
    EXPECT_EQ(backend.read<int32_t>(fused.ids, n_chosen), backend.read<int32_t>(separate.ids, n_chosen));
    EXPECT_EQ(backend.read(fused.weights, n_chosen), backend.read(separate.weights, n_chosen));
  }
  const Outputs refused = outputs();
  EXPECT_EQ(
      table().route_experts(backend.get(), x, weight, n_tokens, n_experts - 1, n_used, STRATA_ROUTING_SOFTMAX_TOPK,
                            refused.logits, refused.ids, refused.weights, backend.error()),
      STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(backend.message().find("is not one matrix of 11 expert rows"), std::string::npos) << backend.message();
}

struct MoeRun {
  std::vector<float> out;
  std::vector<double> expected;
};

// n_tokens tokens each routed to 3 of 6 experts (shared between tokens); down is Q8_0 under Q4_K experts.
MoeRun run_moe(uint32_t type, int n_threads, int32_t n_tokens,
               Backend::Kernels kernels = Backend::without_dot_kernels) {
  const int64_t width = 256, ffn = 96, n_experts = 6;
  const int32_t n_used = 3;
  const HostWeight gate = make_weight(type, width, ffn, n_experts, 20),
                   up = make_weight(type, width, ffn, n_experts, 21),
                   down = make_weight(type == kQ4_K ? kQ8_0 : type, ffn, width, n_experts, 22);
  const auto x = random_floats(n_tokens * width, 23);
  const auto weights = random_floats(n_tokens * n_used, 24);
  std::vector<int32_t> ids(n_tokens * n_used);
  for (int32_t t = 0; t < n_tokens; ++t) {
    for (int32_t j = 0; j < n_used; ++j) ids[t * n_used + j] = (t * 5 + j * 2) % n_experts;
  }
  Backend backend(n_threads, "{}", kernels);
  strata_buffer* out = backend.alloc_floats(n_tokens * width);
  EXPECT_EQ(
      table().moe_ffn(backend.get(), backend.upload(x), n_tokens, n_used, backend.upload(ids), backend.upload(weights),
                      backend.load(gate), backend.load(up), backend.load(down), out, backend.error()),
      STRATA_OK)
      << backend.message();
  MoeRun run{backend.read(out, n_tokens * width), std::vector<double>(n_tokens * width, 0.0)};
  for (int32_t t = 0; t < n_tokens; ++t) {
    const std::vector<float> xt(x.begin() + t * width, x.begin() + (t + 1) * width);
    for (int32_t j = 0; j < n_used; ++j) {
      const int32_t e = ids[t * n_used + j];
      const auto g = reference_matmul(gate, e, xt, 1), u = reference_matmul(up, e, xt, 1);
      std::vector<float> h(ffn);
      for (int64_t i = 0; i < ffn; ++i) h[i] = static_cast<float>(g[i] / (1.0 + std::exp(-g[i])) * u[i]);
      const auto d = reference_matmul(down, e, h, 1);
      for (int64_t i = 0; i < width; ++i) run.expected[t * width + i] += weights[t * n_used + j] * d[i];
    }
  }
  return run;
}

TEST(BackendCpu, MoeFfnMatchesTheReference) {
  for (uint32_t type : {kF16, kQ4_K, kQ8_0}) {
    const MoeRun dequantized = run_moe(type, 2, 7);
    // Outputs are sums of terms near 100 that cancel: float rounding shows at 1e-4 of the small ones.
    expect_near_all(dequantized.out, dequantized.expected, 1e-3, types().type(type).name);
    EXPECT_LT(relative_rms_error(dequantized.out, dequantized.expected), 1e-5) << types().type(type).name;
    // With the dot kernels, gate/up/down see activations rounded to Q8_0 / Q8_K (not F16's, which are floats).
    const MoeRun with_dot = run_moe(type, 2, 7, Backend::with_dot_kernels);
    EXPECT_LT(relative_rms_error(with_dot.out, with_dot.expected), type == kF16 ? 1e-5 : 0.03)
        << types().type(type).name;
  }
}

TEST(BackendCpu, MoeFfnDoesNotDependOnTheThreadCount) { EXPECT_EQ(run_moe(kQ8_0, 1, 9).out, run_moe(kQ8_0, 4, 9).out); }

// Embedding lookup, row and elementwise ops.
TEST(BackendCpu, GetRowsDequantizesTheChosenRows) {
  const HostWeight embeddings = make_weight(kQ8_0, 64, 10, 1, 30);
  const std::vector<int32_t> ids = {3, 0, 9, 3};
  Backend backend(2);
  strata_weight* table_weight = backend.load(embeddings);
  strata_buffer* out = backend.alloc_floats(ids.size() * 64);
  ASSERT_EQ(table().get_rows(backend.get(), table_weight, ids.data(), 4, out, backend.error()), STRATA_OK);
  std::vector<float> expected;
  for (int32_t id : ids) expected.insert(expected.end(), embeddings.row(0, id), embeddings.row(0, id) + 64);
  EXPECT_EQ(backend.read(out, expected.size()), expected);
  const int32_t outside = 10;
  EXPECT_EQ(table().get_rows(backend.get(), table_weight, &outside, 1, out, backend.error()),
            STRATA_E_INVALID_ARGUMENT);
}

TEST(BackendCpu, RmsNormMatchesTheReferenceInPlace) {
  const int32_t rows = 5, width = 200;
  const auto x = random_floats(rows * width, 31, 3.0f), gain = random_floats(width, 32);
  Backend backend(2);
  strata_buffer* buffer = backend.upload(x);
  ASSERT_EQ(
      table().rms_norm(backend.get(), buffer, backend.load_f32(gain), rows, width, 1e-6f, buffer, backend.error()),
      STRATA_OK);
  std::vector<double> expected(x.size());
  for (int32_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int32_t i = 0; i < width; ++i) sum += double{x[r * width + i]} * x[r * width + i];
    const double scale = 1.0 / std::sqrt(sum / width + 1e-6);
    for (int32_t i = 0; i < width; ++i) expected[r * width + i] = x[r * width + i] * scale * gain[i];
  }
  expect_near_all(backend.read(buffer, x.size()), expected, 1e-5, "rms_norm");
}

// The residual step (ABI 1.2): x += y, then the norm of the new x, and an output aliasing an input refused.
TEST(BackendCpu, AddRmsNormAddsThenNormalizes) {
  const int32_t rows = 3, width = 200;
  const auto x = random_floats(rows * width, 33, 3.0f), y = random_floats(rows * width, 34),
             gain = random_floats(width, 35);
  Backend backend(2);
  strata_buffer* x_buffer = backend.upload(x);
  strata_buffer* y_buffer = backend.upload(y);
  strata_buffer* out = backend.upload(std::vector<float>(x.size()));
  strata_weight* gain_weight = backend.load_f32(gain);
  ASSERT_EQ(
      table().add_rms_norm(backend.get(), x_buffer, y_buffer, gain_weight, rows, width, 1e-6f, out, backend.error()),
      STRATA_OK)
      << backend.message();
  std::vector<double> sums(x.size()), expected(x.size());
  for (int32_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int32_t i = 0; i < width; ++i) {
      sums[r * width + i] = double{x[r * width + i] + y[r * width + i]};
      sum += sums[r * width + i] * sums[r * width + i];
    }
    const double scale = 1.0 / std::sqrt(sum / width + 1e-6);
    for (int32_t i = 0; i < width; ++i) expected[r * width + i] = sums[r * width + i] * scale * gain[i];
  }
  expect_near_all(backend.read(x_buffer, x.size()), sums, 1e-6, "x + y");
  expect_near_all(backend.read(out, x.size()), expected, 1e-5, "norm");
  EXPECT_EQ(table().add_rms_norm(backend.get(), x_buffer, y_buffer, gain_weight, rows, width, 1e-6f, x_buffer,
                                 backend.error()),
            STRATA_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(backend.message()).find("out must be neither x nor y"), std::string::npos) << backend.message();
}

// A normed input (ABI 1.5): the matmul of the norm of x + y, the sum written where asked, and inputs whose
// buffers collide, or that are short or lack a weight, refused with a message naming them.
TEST(BackendCpu, MatmulNormedMultipliesTheNormOfTheSum) {
  const int32_t rows = 3, width = 64;
  const auto x = random_floats(rows * width, 36, 3.0f), y = random_floats(rows * width, 37),
             gain = random_floats(width, 38);
  const HostWeight w = make_weight(kF32, width, 24, 1, 39);
  Backend backend(2);
  strata_buffer* x_buffer = backend.upload(x);
  strata_buffer* y_buffer = backend.upload(y);
  strata_buffer* sum = backend.alloc_floats(x.size());
  strata_buffer* normed = backend.alloc_floats(x.size());
  strata_buffer* out = backend.alloc_floats(static_cast<size_t>(rows * w.ne1));
  strata_weight* gain_weight = backend.load_f32(gain);
  strata_weight* weight = backend.load(w);
  const strata_normed_input in{sizeof(strata_normed_input), x_buffer, y_buffer, gain_weight, 1e-6f, sum, nullptr};
  ASSERT_EQ(table().matmul_normed(backend.get(), weight, &in, rows, nullptr, out, backend.error()), STRATA_OK)
      << backend.message();
  std::vector<float> sums(x.size());
  for (size_t i = 0; i < x.size(); ++i) sums[i] = x[i] + y[i];
  EXPECT_EQ(backend.read<float>(sum, x.size()), sums);
  EXPECT_EQ(backend.read<float>(x_buffer, x.size()), x);  // the stream itself stays as it was
  ASSERT_EQ(table().rms_norm(backend.get(), sum, gain_weight, rows, width, 1e-6f, normed, backend.error()), STRATA_OK);
  const auto norm = backend.read<float>(normed, x.size());
  std::vector<double> expected(static_cast<size_t>(rows * w.ne1));
  for (int32_t t = 0; t < rows; ++t) {
    for (int64_t o = 0; o < w.ne1; ++o) {
      double dot = 0.0;
      for (int32_t i = 0; i < width; ++i) dot += double{w.decoded[o * width + i]} * norm[t * width + i];
      expected[t * w.ne1 + o] = dot;
    }
  }
  expect_near_all(backend.read<float>(out, expected.size()), expected, 1e-5, "matmul_normed");

  struct Refused {
    strata_normed_input in;
    strata_buffer* out;
    const char* message;
  };
  const Refused refused[] = {
      {{sizeof(strata_normed_input), x_buffer, y_buffer, gain_weight, 1e-6f, x_buffer, nullptr},
       out,
       "neither x nor y"},
      {{sizeof(strata_normed_input), x_buffer, y_buffer, gain_weight, 1e-6f, sum, sum}, out, "are one buffer"},
      {{sizeof(strata_normed_input), x_buffer, y_buffer, nullptr, 1e-6f, nullptr, nullptr}, out, "no norm weight"},
      {{STRATA_FIELD_END(strata_normed_input, sum), x_buffer, y_buffer, gain_weight, 1e-6f, nullptr, nullptr},
       out,
       "missing or short"},
      {{sizeof(strata_normed_input), x_buffer, y_buffer, gain_weight, 1e-6f, sum, nullptr},
       sum,
       "one of its normed input"},
  };
  for (const Refused& r : refused) {
    EXPECT_EQ(table().matmul_normed(backend.get(), weight, &r.in, rows, nullptr, r.out, backend.error()),
              STRATA_E_INVALID_ARGUMENT)
        << r.message;
    EXPECT_NE(std::string(backend.message()).find(r.message), std::string::npos) << backend.message();
  }
}

TEST(BackendCpu, RopeNeoxRotatesPairsHalfTheRotatedDimsApart) {
  const int32_t n_tokens = 3, n_heads = 2, head_dim = 16, n_rot = 12;
  const float base = 10000.0f;
  const std::vector<int32_t> positions = {0, 7, 300};
  const auto x = random_floats(n_tokens * n_heads * head_dim, 33);
  Backend backend(2);
  strata_buffer* buffer = backend.upload(x);
  ASSERT_EQ(table().rope_neox(backend.get(), buffer, positions.data(), n_tokens, n_heads, head_dim, n_rot, base,
                              backend.error()),
            STRATA_OK);
  std::vector<double> expected(x.begin(), x.end());  // dims from n_rot on stay as they are
  for (int32_t t = 0; t < n_tokens; ++t) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int64_t at = (t * n_heads + h) * head_dim;
      for (int32_t i = 0; i < n_rot / 2; ++i) {
        const double theta = positions[t] * std::pow(double{base}, -2.0 * i / n_rot);
        const double x0 = x[at + i], x1 = x[at + i + n_rot / 2];
        expected[at + i] = x0 * std::cos(theta) - x1 * std::sin(theta);
        expected[at + i + n_rot / 2] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
  }
  // Angles are computed in float, as ggml does: at position 300 they are off by a few ulps of 300.
  expect_near_all(backend.read(buffer, x.size()), expected, 1e-4, "rope_neox");
}

TEST(BackendCpu, ElementwiseOpsMatchTheReference) {
  const int64_t n = 40000;  // several chunks
  const auto a = random_floats(n, 34, 4.0f), b = random_floats(n, 35);
  Backend backend(3);
  strata_buffer* a_buffer = backend.upload(a);
  strata_buffer* b_buffer = backend.upload(b);
  strata_buffer* out = backend.alloc_floats(n);
  std::vector<double> expected(n);
  const auto check = [&](strata_status status, auto reference, const char* what) {
    ASSERT_EQ(status, STRATA_OK) << what << ": " << backend.message();
    for (int64_t i = 0; i < n; ++i) expected[i] = reference(double{a[i]}, double{b[i]});
    expect_near_all(backend.read(out, n), expected, 1e-6, what);
  };
  check(
      table().add(backend.get(), a_buffer, b_buffer, n, out, backend.error()), [](double p, double q) { return p + q; },
      "add");
  check(
      table().mul(backend.get(), a_buffer, b_buffer, n, out, backend.error()), [](double p, double q) { return p * q; },
      "mul");
  check(
      table().unary(backend.get(), STRATA_UNARY_SILU, a_buffer, n, out, backend.error()),
      [](double p, double) { return p / (1.0 + std::exp(-p)); }, "silu");
  check(
      table().unary(backend.get(), STRATA_UNARY_SIGMOID, a_buffer, n, out, backend.error()),
      [](double p, double) { return 1.0 / (1.0 + std::exp(-p)); }, "sigmoid");
  EXPECT_EQ(table().unary(backend.get(), 99, a_buffer, n, out, backend.error()), STRATA_E_INVALID_ARGUMENT);
}

TEST(BackendCpu, ScaleRowsMultipliesEachRowByItsScale) {
  const int32_t rows = 4, width = 5000;
  const auto x = random_floats(rows * width, 36), scale = random_floats(rows, 37);
  Backend backend(2);
  strata_buffer* buffer = backend.upload(x);
  ASSERT_EQ(table().scale_rows(backend.get(), buffer, backend.upload(scale), rows, width, backend.error()), STRATA_OK);
  std::vector<double> expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = double{x[i]} * scale[i / width];
  expect_near_all(backend.read(buffer, x.size()), expected, 1e-7, "scale_rows");
}

// Rough speed of a 2048 x 2048 matmul on both paths, printed for the record (not asserted: machines differ).
TEST(BackendCpuSpeed, Matmul2048) {
  for (uint32_t type : {kF16, kQ8_0}) {
    const HostWeight w = make_weight(type, 2048, 2048, 1, 40);
    for (auto kernels : {Backend::with_dot_kernels, Backend::without_dot_kernels}) {
      for (int threads : {1, 2}) {
        Backend backend(threads, "{}", kernels);
        strata_weight* weight = backend.load(w);
        for (int32_t n_tokens : {1, 64}) {
          strata_buffer* x = backend.upload(random_floats(n_tokens * 2048, 41));
          strata_buffer* out = backend.alloc_floats(n_tokens * 2048);
          const int repeats = n_tokens == 1 ? 20 : 3;
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < repeats; ++i) {
            ASSERT_EQ(table().matmul(backend.get(), weight, 0, x, n_tokens, nullptr, out, backend.error()), STRATA_OK);
          }
          const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
          std::printf("matmul 2048x2048 %s %s, %2d tokens, %s: %.2f ms\n", types().type(type).name,
                      kernels == Backend::with_dot_kernels ? "dot kernel" : "dequantized", n_tokens,
                      table().describe(backend.get()), elapsed.count() / repeats);
        }
      }
    }
  }
}

}  // namespace
