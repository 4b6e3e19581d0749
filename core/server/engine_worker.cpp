#include "core/server/engine_worker.hpp"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/server/worker_protocol.hpp"
#include "core/util/log.hpp"

namespace strata::server {
namespace {

using Json = nlohmann::json;

constexpr std::chrono::milliseconds kGaugesEvery{500};
constexpr std::chrono::milliseconds kPumpWait{100};

// SIGUSR2: the receiving thread prints its stack to stderr, the log the supervisor's lines go to (a stall report
// asks each thread in turn). backtrace_symbols_fd allocates nothing; backtrace was called once before, so that its
// first call's loading of libgcc does not happen here.
void print_stack(int) {
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  char header[64];
  const int length = std::snprintf(header, sizeof header, "stall report: thread %ld:\n", static_cast<long>(::gettid()));
  if (length > 0) ::write(STDERR_FILENO, header, static_cast<size_t>(length));
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
}

}  // namespace

void install_stack_printer() {
  void* warm_up[1];
  ::backtrace(warm_up, 1);
  struct sigaction action {};
  action.sa_handler = print_stack;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &action, nullptr);
}

void serve_supervisor(int fd, CompletionRunner& runner) {
  install_stack_printer();
  std::mutex write_mutex;
  const auto send = [&](const Json& message) {
    std::lock_guard lock(write_mutex);
    write_frame(fd, message);
  };
  // A request's pump: its stream's news, forwarded as frames. Detached; the last one out lets the function return.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, std::shared_ptr<CompletionStream>> streams;
  size_t pumps = 0;
  bool done = false;
  const auto pump = [&](uint64_t id, std::shared_ptr<CompletionStream> stream) {
    try {
      for (;;) {
        CompletionStream::News news = stream->wait(kPumpWait);
        if (!news.text.empty()) send(Json{{"text", {{"id", id}, {"text", news.text}}}});
        if (news.end) {
          send(Json{{"end", {{"id", id}, {"outcome", Json(*news.end)}}}});
          break;
        }
      }
    } catch (const Error&) {  // the supervisor is gone: the runner stops the request at its next token
      stream->cancel();
    }
    std::lock_guard lock(mutex);
    streams.erase(id);
    --pumps;
    changed.notify_all();
  };
  std::thread gauges([&] {
    std::unique_lock lock(mutex);
    while (!changed.wait_for(lock, kGaugesEvery, [&] { return done; })) {
      lock.unlock();
      try {
        send(Json{{"gauges", Json(runner.gauges())}});
      } catch (const Error&) {
      }
      lock.lock();
    }
  });

  send(Json{{"ready", Json::object()}});
  try {
    while (const std::optional<Json> message = read_frame(fd)) {
      if (const auto submit = message->find("submit"); submit != message->end()) {
        const uint64_t id = submit->at("id").get<uint64_t>();
        std::shared_ptr<CompletionStream> stream = runner.submit(request_from_json(submit->at("request")));
        if (stream == nullptr) {  // the supervisor bounds what it sends; this is its fault, said as 429
          CompletionOutcome outcome;
          outcome.status = 429;
          outcome.error = "the engine worker's queue is full";
          send(Json{{"end", {{"id", id}, {"outcome", Json(outcome)}}}});
          continue;
        }
        std::lock_guard lock(mutex);
        streams[id] = stream;
        ++pumps;
        std::thread(pump, id, std::move(stream)).detach();
      } else if (const auto cancel = message->find("cancel"); cancel != message->end()) {
        std::lock_guard lock(mutex);
        if (const auto it = streams.find(cancel->get<uint64_t>()); it != streams.end()) it->second->cancel();
      }
    }
  } catch (const Error& error) {
    log().error("engine worker: {}", error.what());
  }
  // The supervisor closed the channel: nothing more can reach it.
  std::unique_lock lock(mutex);
  for (auto& [id, stream] : streams) stream->cancel();
  done = true;
  changed.notify_all();
  changed.wait(lock, [&] { return pumps == 0; });
  lock.unlock();
  gauges.join();
}

}  // namespace strata::server
