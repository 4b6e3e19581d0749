// The engine worker process behind `strata serve` (worker_source.hpp): the real strata executable as the worker, a
// tiny reference model, and faults injected into it (--test-fault) or dealt from outside (kill -9). Every request
// either completes with the text an undisturbed run gives, or fails alone with a clear error.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/server/openai_request.hpp"
#include "core/server/worker_source.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

using Json = nlohmann::json;
using server::CompletionOutcome;
using server::WorkerSource;

std::filesystem::path tiny_model() { return test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf"; }

// The worker's command line; faults, where given, go to every worker this starts.
std::vector<std::string> worker_command(const std::string& fault = "") {
  std::vector<std::string> command = {test::strata_executable().string(),
                                      "serve",
                                      "--model",
                                      tiny_model().string(),
                                      "--backend",
                                      "cpu",
                                      "-t",
                                      "2",
                                      "--ctx",
                                      "256",
                                      "--log-level",
                                      "warn"};
  if (!fault.empty()) command.insert(command.end(), {"--test-fault", fault});
  return command;
}

server::WorkerOptions options(std::vector<std::string> command, std::vector<std::string> first_extra = {}) {
  server::WorkerOptions options;
  options.command = std::move(command);
  options.first_extra = std::move(first_extra);
  return options;
}

struct Result {
  std::string text;
  CompletionOutcome outcome;
};

// Runs a chat request to its end (at most a minute), optionally calling during(text so far) on each piece.
Result run(WorkerSource& source, const Json& body, const std::function<void(const std::string&)>& during = {}) {
  const auto stream = source.submit(server::parse_chat_request(body.dump()));
  EXPECT_NE(stream, nullptr);
  Result result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (std::chrono::steady_clock::now() < deadline) {
    server::CompletionStream::News news = stream->wait(std::chrono::milliseconds(100));
    result.text += news.text;
    if (!news.text.empty() && during) during(result.text);
    if (news.end) {
      result.outcome = *news.end;
      return result;
    }
  }
  ADD_FAILURE() << "the request did not end within a minute";
  return result;
}

Json chat(int max_tokens, double temperature = 0.0, int seed = 0) {
  Json body{{"messages", Json::array({{{"role", "user"}, {"content", "Hello there"}}})},
            {"max_tokens", max_tokens},
            {"temperature", temperature}};
  if (seed != 0) body["seed"] = seed;
  return body;
}

// The text of a request on an undisturbed worker.
std::string undisturbed(const Json& body) {
  WorkerSource source(options(worker_command()));
  const Result result = run(source, body);
  EXPECT_EQ(result.outcome.error, "");
  return result.text;
}

TEST(ServerWorker, AnswersAsTheEngineDoesAndReportsReady) {
  ASSERT_REFERENCE(tiny_model());
  WorkerSource source(options(worker_command()));
  const Result result = run(source, chat(12));
  EXPECT_EQ(result.outcome.error, "");
  EXPECT_EQ(result.outcome.completion_tokens, 12);
  EXPECT_EQ(result.outcome.finish_reason, "length");
  EXPECT_FALSE(result.text.empty());
  const server::MetricsGauges gauges = source.gauges();
  EXPECT_EQ(gauges.worker_state, "ready");
  EXPECT_EQ(gauges.worker_restarts, 0);
}

// The first worker crashes at its 5th token: the supervisor restarts it and runs the request again; the client's
// text is the undisturbed text, nothing lost or repeated, greedy or seeded.
TEST(ServerWorker, ACrashMidRequestIsRecoveredWithTheSameText) {
  ASSERT_REFERENCE(tiny_model());
  for (const Json& body : {chat(16), chat(16, 0.9, 1234)}) {
    const std::string expected = undisturbed(body);
    WorkerSource source(options(worker_command(), {"--test-fault", "crash@5"}));
    const pid_t first = source.worker_pid();
    const auto started = std::chrono::steady_clock::now();
    const Result result = run(source, body);
    EXPECT_EQ(result.outcome.error, "") << body.dump();
    EXPECT_EQ(result.text, expected) << body.dump();
    EXPECT_EQ(result.outcome.completion_tokens, 16);
    EXPECT_EQ(source.restarts(), 1);
    EXPECT_NE(source.worker_pid(), first);
    std::printf("recovered from a crash in %.0f ms (the request included)\n",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  }
}

// kill -9 of the worker while a seeded request streams: the request completes with the undisturbed text.
TEST(ServerWorker, KillNineMidStreamLosesNothing) {
  ASSERT_REFERENCE(tiny_model());
  const Json body = chat(200, 0.8, 77);
  const std::string expected = undisturbed(body);
  WorkerSource source(options(worker_command()));
  bool killed = false;
  const Result result = run(source, body, [&](const std::string&) {
    if (!killed) killed = ::kill(source.worker_pid(), SIGKILL) == 0;
  });
  EXPECT_TRUE(killed);
  EXPECT_EQ(result.outcome.error, "");
  EXPECT_EQ(result.text, expected);
  // Had the answer been whole before the kill landed, the restart would still be under way.
  for (int i = 0; i < 600 && source.restarts() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(source.restarts(), 1);
}

// A request that kills every worker it runs on fails alone, after two, with a clear error; the server goes on
// (the next request, shorter than the fault's token, completes).
TEST(ServerWorker, ARequestThatKillsTwoWorkersFailsAlone) {
  ASSERT_REFERENCE(tiny_model());
  WorkerSource source(options(worker_command("crash@6")));
  const Result killer = run(source, chat(20));
  EXPECT_EQ(killer.outcome.status, 500);
  EXPECT_NE(killer.outcome.error.find("the engine worker died twice while running this request"), std::string::npos)
      << killer.outcome.error;
  const Result next = run(source, chat(4));
  EXPECT_EQ(next.outcome.error, "");
  EXPECT_EQ(next.outcome.completion_tokens, 4);
  EXPECT_EQ(source.restarts(), 2);
}

// The first worker hangs at its 5th token: the watchdog (1 s here) writes a stall report with the worker's thread
// stacks into the log, replaces the worker, and the request completes with the undisturbed text.
TEST(ServerWorker, AHungWorkerIsReportedAndReplaced) {
  ASSERT_REFERENCE(tiny_model());
  const Json body = chat(12);
  const std::string expected = undisturbed(body);
  server::WorkerOptions hanging = options(worker_command(), {"--test-fault", "hang@5"});
  hanging.watchdog = std::chrono::milliseconds(1000);
  testing::internal::CaptureStderr();  // the worker inherits it: its stacks land there too
  std::string log;
  {
    WorkerSource source(hanging);
    const Result result = run(source, body);
    EXPECT_EQ(result.outcome.error, "");
    EXPECT_EQ(result.text, expected);
    EXPECT_EQ(source.restarts(), 1);
  }
  log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("stall report: the engine worker"), std::string::npos) << log;
  EXPECT_NE(log.find("stall report: request 1: running"), std::string::npos) << log;
  EXPECT_NE(log.find("stall report: thread "), std::string::npos) << log;
  EXPECT_NE(log.find("strata"), std::string::npos) << log;  // a frame of the executable
}

// A failed backend call fails its request alone (500), and the worker goes on without a restart.
TEST(ServerWorker, AnEngineErrorFailsTheRequestAlone) {
  ASSERT_REFERENCE(tiny_model());
  WorkerSource source(options(worker_command(), {"--test-fault", "error@3"}));
  const Result failed = run(source, chat(10));
  EXPECT_EQ(failed.outcome.status, 500);
  EXPECT_NE(failed.outcome.error.find("test fault: a backend call failed at token 3"), std::string::npos)
      << failed.outcome.error;
  const Result next = run(source, chat(4));
  EXPECT_EQ(next.outcome.error, "");
  EXPECT_EQ(source.restarts(), 0);
}

// A worker that cannot load its model fails the start with its exit status, instead of restarting forever.
TEST(ServerWorker, AWorkerThatCannotLoadFailsTheStart) {
  std::vector<std::string> command = worker_command();
  command[3] = "/nonexistent/model.gguf";
  try {
    WorkerSource source(options(command));
    ADD_FAILURE() << "the worker started";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("the engine worker did not get ready: it exited with status 1"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace strata
