#include "core/server/completion_runner.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/engine/chat_format.hpp"
#include "core/engine/generation.hpp"
#include "core/tokenizer/streaming_detokenizer.hpp"
#include "core/util/log.hpp"

namespace strata::server {
namespace {

// A prompt longer than this many of the session's steps is read a piece of that many steps at a time.
constexpr int32_t kPromptPieceSteps = 4;

CompletionOutcome failure(int status, std::string message) {
  CompletionOutcome outcome;
  outcome.status = status;
  outcome.error = std::move(message);
  return outcome;
}

// The injected fault, once its token comes.
void inject(const FaultInjection& fault) {
  switch (fault.kind) {
    case FaultInjection::Kind::crash:
      log().error("test fault: crashing at token {}", fault.at_token);
      std::abort();
    case FaultInjection::Kind::hang:
      log().error("test fault: hanging at token {}", fault.at_token);
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    case FaultInjection::Kind::error:
      throw Error("test fault: a backend call failed at token " + std::to_string(fault.at_token));
    case FaultInjection::Kind::hang_at_load:  // the worker's start hangs instead (strata serve)
    case FaultInjection::Kind::none:
      break;
  }
}

}  // namespace

FaultInjection parse_fault(const std::string& text) {
  if (text == "hang@load") return {.kind = FaultInjection::Kind::hang_at_load, .at_token = 0};
  const size_t at = text.find('@');
  const std::string kind = text.substr(0, at);
  FaultInjection fault;
  fault.kind = kind == "crash"   ? FaultInjection::Kind::crash
               : kind == "hang"  ? FaultInjection::Kind::hang
               : kind == "error" ? FaultInjection::Kind::error
                                 : FaultInjection::Kind::none;
  try {
    if (at != std::string::npos) fault.at_token = std::stoll(text.substr(at + 1));
  } catch (const std::exception&) {
    fault.at_token = 0;
  }
  if (fault.kind == FaultInjection::Kind::none || fault.at_token < 1) {
    throw Error("--test-fault takes crash@K, hang@K or error@K with K >= 1, or hang@load, not '" + text + "'");
  }
  return fault;
}

void CompletionStream::push_text(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard lock(mutex_);
    text_ += text;
  }
  changed_.notify_all();
}

void CompletionStream::finish(CompletionOutcome outcome) {
  {
    std::lock_guard lock(mutex_);
    end_ = std::move(outcome);
  }
  changed_.notify_all();
}

CompletionStream::News CompletionStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return !text_.empty() || end_.has_value(); });
  News news{std::move(text_), std::nullopt};
  text_.clear();
  if (end_) news.end = *end_;
  return news;
}

CompletionRunner::CompletionRunner(const Engine& engine, const RunnerOptions& options)
    : engine_(engine),
      options_(options),
      tokenizer_(engine.file()),
      end_tokens_(end_of_generation_tokens(tokenizer_.vocabulary())),
      session_(engine.model(), {.n_ctx = options.n_ctx, .kv_type = options.kv_type, .execution = options.execution}),
      thread_([this] { loop(); }) {}

CompletionRunner::~CompletionRunner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  thread_.join();
  for (Job& job : queue_) job.stream->finish(failure(503, "the server is stopping"));
}

std::shared_ptr<CompletionStream> CompletionRunner::submit(CompletionRequest request) {
  draw_seed(request);
  auto stream = std::make_shared<CompletionStream>();
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= options_.queue_capacity) return nullptr;
    queue_.push_back({std::move(request), stream, std::chrono::steady_clock::now()});
  }
  queued_.notify_one();
  return stream;
}

MetricsGauges CompletionRunner::gauges() const {
  MetricsGauges gauges;
  {
    std::lock_guard lock(mutex_);
    gauges.waiting = static_cast<int64_t>(queue_.size());
  }
  gauges.running = running_.load() ? 1 : 0;
  if (gauges.running > 0) {
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    gauges.step_age_seconds = static_cast<double>(now - progress_ns_.load()) * 1e-9;
  }
  gauges.kv_cache_usage = static_cast<double>(cache_used_.load()) / options_.n_ctx;
  if (Backend* pool = engine_.expert_pool()) gauges.pool_workers = pool->thread_count().value_or(0);
  if (const HybridExperts* experts = engine_.model().experts()) {
    gauges.expert_slots = experts->plan().total_slots();
    gauges.expert_hit_rate = experts->stats().hit_rate();
  }
  return gauges;
}

void CompletionRunner::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      progress_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
      running_.store(true);
    }
    run(job);
    running_.store(false);
  }
}

std::vector<int32_t> CompletionRunner::prompt_tokens(const CompletionRequest& request) const {
  if (!request.chat) return tokenizer_.encode(request.prompt, {.add_special = true, .parse_special = true});
  const std::string text =
      format_chat(engine_.file(), tokenizer_, request.messages, /*add_generation_prompt=*/true, request.tools);
  return tokenizer_.encode(text, {.parse_special = true});
}

void CompletionRunner::run(Job& job) {
  const CompletionRequest& request = job.request;
  CompletionStream& stream = *job.stream;
  if (stream.cancelled()) return stream.finish(failure(499, "the client went away"));
  std::vector<int32_t> prompt;
  try {
    prompt = prompt_tokens(request);  // a template that refuses the conversation is the request's fault
  } catch (const Error& error) {
    return stream.finish(failure(400, error.what()));
  }
  const auto n_ctx = static_cast<size_t>(options_.n_ctx);
  if (prompt.empty() || prompt.size() >= n_ctx) {
    return stream.finish(failure(400, "the prompt is " + std::to_string(prompt.size()) + " tokens; the context holds " +
                                          std::to_string(n_ctx) + " with room for at least one more"));
  }
  const auto room = static_cast<int32_t>(n_ctx - prompt.size());
  const int32_t max_tokens = std::min(request.max_tokens.value_or(room), room);
  CompletionOutcome outcome;
  outcome.prompt_tokens = static_cast<int32_t>(prompt.size());
  outcome.queue_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job.queued).count();
  try {
    const size_t keep = reusable_prefix(cached_, prompt);
    cached_.resize(keep);
    session_.rewind(static_cast<int32_t>(keep));
    outcome.cached_tokens = static_cast<int32_t>(keep);
    tokenizer::StreamingDetokenizer detokenizer(tokenizer_, /*render_special=*/false);
    StopStrings stops(request.stop);
    const GenerationOptions generation{max_tokens, request.sampling, end_tokens_};
    // A long prompt is read in pieces of whole steps before generation reads the last: each piece is progress for
    // the watchdog, and a client that left stops the reading there.
    std::span<const int32_t> unread = std::span(prompt).subspan(keep);
    const auto piece = static_cast<size_t>(kPromptPieceSteps * session_.max_batch());
    while (unread.size() > piece) {
      if (stream.cancelled()) {
        cached_.assign(prompt.begin(), prompt.begin() + session_.position());
        return stream.finish(failure(499, "the client went away"));
      }
      session_.forward_last(unread.first(piece));
      unread = unread.subspan(piece);
      cache_used_.store(session_.position());
      progress_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    const auto generated = generate(session_, unread, generation, [&](int32_t token) {
      stream.push_text(stops.push(detokenizer.push(token)));
      cache_used_.store(session_.position());
      progress_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
      if (++tokens_made_ == options_.fault.at_token) inject(options_.fault);
      return !stops.stopped() && !stream.cancelled();
    });
    if (!stops.stopped()) stream.push_text(stops.push(detokenizer.finish()) + stops.finish());
    cached_ = prompt;
    cached_.insert(cached_.end(), generated.begin(), generated.end());
    cached_.resize(static_cast<size_t>(session_.position()));
    cache_used_.store(session_.position());
    outcome.completion_tokens = static_cast<int32_t>(generated.size());
    const bool full = outcome.completion_tokens >= max_tokens && !stops.stopped();
    outcome.finish_reason = full ? "length" : "stop";
  } catch (const std::exception& error) {
    // The cache may hold part of this request: nothing of it is reused.
    cached_.clear();
    log().error("request failed in the engine: {}", error.what());
    outcome = failure(500, std::string("the engine failed: ") + error.what());
  }
  stream.finish(std::move(outcome));
}

}  // namespace strata::server
