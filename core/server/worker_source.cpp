#include "core/server/worker_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/server/worker_protocol.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata::server {
namespace {

using Json = nlohmann::json;

constexpr int kWorkerFd = 3;  // the channel's number in the worker (--worker-fd)
constexpr std::chrono::seconds kExitGrace{10};

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
  return "ended";
}

// Waits for the child up to grace, then kills it; returns how it ended.
std::string reap(pid_t pid, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return exit_text(status);
    if (done < 0) return "is gone";
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return "did not exit and was killed";
}

// Each of the worker's threads prints its stack to the log (its SIGUSR2 handler), for a stall report, before it is
// killed; half a second for them to do so.
void request_stacks(pid_t pid) {
  std::vector<pid_t> threads;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    threads.push_back(static_cast<pid_t>(std::stol(task.path().filename().string())));
  }
  for (const pid_t thread : threads) ::syscall(SYS_tgkill, pid, thread, SIGUSR2);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
}

// Whether fd has something to read before timeout (0: no limit) has passed since start.
bool readable_within(int fd, std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point start) {
  for (;;) {
    int wait_ms = -1;
    if (timeout.count() > 0) {
      const auto left =
          timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      if (left.count() <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1000));
    }
    pollfd one{fd, POLLIN, 0};
    const int ready = ::poll(&one, 1, wait_ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the read that follows reports it
  }
}

}  // namespace

WorkerSource::WorkerSource(WorkerOptions options) : options_(std::move(options)) {
  std::string why;
  if (!start_worker(/*first=*/true, why)) throw Error("the engine worker did not get ready: it " + why);
  state_ = "ready";
  last_frame_ = std::chrono::steady_clock::now();
  reader_ = std::thread([this] { reader_loop(); });
  if (options_.watchdog.count() > 0) watchdog_ = std::thread([this] { watchdog_loop(); });
}

WorkerSource::~WorkerSource() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  stop_worker();
  reader_.join();
  for (auto& [id, request] : in_flight_) {
    CompletionOutcome outcome;
    outcome.status = 503;
    outcome.error = "the server is stopping";
    request.stream->finish(outcome);
  }
}

void WorkerSource::stop_worker() noexcept {
  int fd = -1;
  pid_t pid = -1;
  {
    std::lock_guard lock(mutex_);
    std::swap(fd, fd_);
    std::swap(pid, pid_);
  }
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);  // the worker reads the end of its channel and exits; the reader wakes
  if (pid > 0) log().info("engine worker {}", reap(pid, kExitGrace));
  if (fd >= 0) ::close(fd);
}

bool WorkerSource::start_worker(bool first, std::string& why) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    why = std::string("could not get a channel (") + std::strerror(errno) + ")";
    return false;
  }
  if (pair[1] == kWorkerFd) {  // dup2 onto itself would keep close-on-exec
    const int moved = ::fcntl(pair[1], F_DUPFD_CLOEXEC, kWorkerFd + 1);
    ::close(pair[1]);
    pair[1] = moved;
  }
  std::vector<std::string> arguments = options_.command;
  if (first) arguments.insert(arguments.end(), options_.first_extra.begin(), options_.first_extra.end());
  arguments.insert(arguments.end(), {"--worker-fd", std::to_string(kWorkerFd)});
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pair[1], kWorkerFd);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Signals as a fresh process has them (the supervisor blocks SIGINT and SIGTERM to wait for them), in a process
  // group of its own: a Ctrl-C at the terminal stops the supervisor, which then stops the worker.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(pair[1]);
  if (spawned != 0) {
    ::close(pair[0]);
    why = std::string("could not start (") + std::strerror(spawned) + ")";
    return false;
  }
  log().info("engine worker {} started{}", pid, first ? "" : " again");
  // Its first frames: the ready one, perhaps after gauges. The load may take minutes, at most load_timeout; a
  // worker that dies ends the read.
  const auto started = std::chrono::steady_clock::now();
  for (;;) {
    if (!readable_within(pair[0], options_.load_timeout, started)) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      log().error(
          "stall report: the engine worker {} was still loading after {:.1f} s (--load-timeout-s); its "
          "threads' stacks follow",
          pid, seconds);
      request_stacks(pid);
      ::close(pair[0]);
      ::kill(pid, SIGKILL);
      reap(pid, kExitGrace);
      why = fmt::format(
          "was still loading after {:.1f} s (--load-timeout-s) and was killed (its threads' stacks are "
          "in the log)",
          seconds);
      return false;
    }
    std::optional<Json> message;
    try {
      message = read_frame(pair[0]);
    } catch (const Error&) {
    }
    if (!message) {
      ::close(pair[0]);
      why = reap(pid, kExitGrace);
      return false;
    }
    if (message->contains("ready")) break;
  }
  std::lock_guard lock(mutex_);
  fd_ = pair[0];
  pid_ = pid;
  return true;
}

void WorkerSource::send(const Json& message) {
  try {
    write_frame(fd_, message);
  } catch (const Error&) {
    // The worker is gone: the reader sees its channel end and runs this request again on the next one.
  }
}

std::shared_ptr<CompletionStream> WorkerSource::submit(CompletionRequest request) {
  draw_seed(request);  // here, so that a replay on another worker draws the same tokens
  auto stream = std::make_shared<CompletionStream>();
  std::lock_guard lock(mutex_);
  if (stopping_ || in_flight_.size() >= options_.capacity) return nullptr;
  const uint64_t id = next_id_++;
  InFlight& entry = in_flight_[id];
  entry.request = std::move(request);
  entry.stream = stream;
  if (state_ == "ready") send(Json{{"submit", {{"id", id}, {"request", request_to_json(entry.request)}}}});
  return stream;
}

MetricsGauges WorkerSource::gauges() const {
  std::lock_guard lock(mutex_);
  MetricsGauges gauges = last_gauges_;
  gauges.worker_state = state_;
  gauges.worker_restarts = restarts_;
  gauges.waiting = static_cast<int64_t>(in_flight_.size()) - (in_flight_.empty() ? 0 : 1);
  gauges.running = in_flight_.empty() ? 0 : 1;
  return gauges;
}

pid_t WorkerSource::worker_pid() const {
  std::lock_guard lock(mutex_);
  return pid_;
}

int64_t WorkerSource::restarts() const {
  std::lock_guard lock(mutex_);
  return restarts_;
}

void WorkerSource::reader_loop() {
  for (;;) {
    int fd = -1;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      fd = fd_;
    }
    std::optional<Json> message;
    try {
      message = read_frame(fd);
    } catch (const Error& error) {
      log().error("engine worker: {}", error.what());
    }
    if (message) {
      on_message(*message);
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    recover();
  }
}

void WorkerSource::on_message(const Json& message) {
  std::lock_guard lock(mutex_);
  last_frame_ = std::chrono::steady_clock::now();
  if (const auto gauges = message.find("gauges"); gauges != message.end()) {
    last_gauges_ = gauges->get<MetricsGauges>();
    return;
  }
  const bool is_text = message.contains("text");
  const Json& body = is_text ? message["text"] : message.contains("end") ? message["end"] : Json();
  if (!body.is_object()) return;
  const auto it = in_flight_.find(body.at("id").get<uint64_t>());
  if (it == in_flight_.end()) return;
  InFlight& entry = it->second;
  if (!is_text) {
    entry.stream->finish(body.at("outcome").get<CompletionOutcome>());
    in_flight_.erase(it);
    return;
  }
  // A replay's text up to what the client has is skipped: the same seed made the same tokens.
  const std::string& text = body.at("text").get_ref<const std::string&>();
  entry.seen += text.size();
  if (entry.seen > entry.delivered) {
    entry.stream->push_text(text.substr(text.size() - (entry.seen - entry.delivered)));
    entry.delivered = entry.seen;
  }
  if (entry.stream->cancelled() && !entry.cancel_sent) {
    entry.cancel_sent = true;
    send(Json{{"cancel", it->first}});
  }
}

void WorkerSource::recover() {
  pid_t pid = -1;
  {
    std::lock_guard lock(mutex_);
    state_ = "restarting";
    std::swap(pid, pid_);
    ::close(fd_);
    fd_ = -1;
  }
  const std::string how = pid > 0 ? reap(pid, std::chrono::seconds(2)) : "is gone";
  {
    std::lock_guard lock(mutex_);
    log().error("engine worker {} {}; restarting it, {} requests in flight", pid, how, in_flight_.size());
    // The worker runs its requests in order: the oldest was running. Twice is its fault, not the worker's.
    if (!in_flight_.empty()) {
      const auto running = in_flight_.begin();
      if (++running->second.deaths >= 2) {
        CompletionOutcome outcome;
        outcome.status = 500;
        outcome.error = "the engine worker died twice while running this request (" + how + ")";
        running->second.stream->finish(outcome);
        in_flight_.erase(running);
      }
    }
  }
  auto backoff = options_.first_backoff;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    std::string why;
    if (start_worker(/*first=*/false, why)) break;
    log().error("engine worker {} while loading; trying again in {} ms", why, backoff.count());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  std::lock_guard lock(mutex_);
  state_ = "ready";
  ++restarts_;
  last_frame_ = std::chrono::steady_clock::now();
  last_gauges_ = {};
  for (auto& [id, entry] : in_flight_) {
    entry.seen = 0;
    entry.cancel_sent = false;
    send(Json{{"submit", {{"id", id}, {"request", request_to_json(entry.request)}}}});
  }
  log().info("engine worker ready again; {} requests sent to it again", in_flight_.size());
}

void WorkerSource::watchdog_loop() {
  std::unique_lock lock(mutex_);
  while (!stop_changed_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
    if (state_ != "ready" || in_flight_.empty() || pid_ <= 0) continue;
    // The worker's gauges come from a thread of their own, so a hung engine still reports how long it has been
    // stuck; a worker that says nothing at all is stuck for as long as it has been silent.
    const double silent = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_frame_).count();
    const double stuck = std::max(silent, last_gauges_.running > 0 ? last_gauges_.step_age_seconds : 0.0);
    if (stuck * 1000.0 < static_cast<double>(options_.watchdog.count())) continue;
    report_stall(stuck);
    // The reader sees the channel end and restarts the worker; the stuck request counts this as a death.
    ::kill(pid_, SIGKILL);
    last_frame_ = std::chrono::steady_clock::now();
  }
}

void WorkerSource::report_stall(double seconds) {
  log().error("stall report: the engine worker {} made no progress for {:.1f} s (watchdog {} ms)", pid_, seconds,
              options_.watchdog.count());
  log().error("stall report: stage: {}; slots: 1 (of which running: {}), queue: {}; kv cache {:.0f}% in use", state_,
              last_gauges_.running, last_gauges_.waiting, 100.0 * last_gauges_.kv_cache_usage);
  for (const auto& [id, entry] : in_flight_) {
    log().error("stall report: request {}: {}, {} bytes of text sent, {} workers died running it", id,
                id == in_flight_.begin()->first ? "running" : "waiting", entry.delivered, entry.deaths);
  }
  log().error("stall report: the worker's threads' stacks follow");
  request_stacks(pid_);
}

}  // namespace strata::server
