// `strata serve`'s parts end to end over real sockets: the OpenAI-compatible endpoints on a tiny reference model,
// answers checked against generate() on the same prompt, the errors' shape and status, and the HTTP limits.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/engine/chat_format.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/generation.hpp"
#include "core/server/completion_runner.hpp"
#include "core/server/http_server.hpp"
#include "core/server/openai_request.hpp"
#include "core/server/openai_routes.hpp"
#include "core/server/tool_calls.hpp"
#include "core/tokenizer/streaming_detokenizer.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace strata {
namespace {

namespace http = boost::beast::http;
using Json = nlohmann::json;
using tcp = boost::asio::ip::tcp;

std::filesystem::path tiny_model() { return test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf"; }

constexpr int32_t kContext = 256;

struct Answer {
  int status = 0;
  std::string body;
  std::string retry_after;
  Json json() const { return Json::parse(body); }
};

Answer request(uint16_t port, http::verb verb, const std::string& target, const std::string& body = "",
               const std::string& authorization = "") {
  boost::asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> message{verb, target, 11};
  message.set(http::field::host, "127.0.0.1");
  message.set(http::field::content_type, "application/json");
  if (!authorization.empty()) message.set(http::field::authorization, authorization);
  message.body() = body;
  message.prepare_payload();
  http::write(socket, message);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(socket, buffer, response);
  Answer answer{static_cast<int>(response.result_int()), response.body(), ""};
  if (const auto it = response.find(http::field::retry_after); it != response.end()) {
    answer.retry_after = std::string(it->value());
  }
  return answer;
}

Answer post(uint16_t port, const std::string& target, const std::string& body) {
  return request(port, http::verb::post, target, body);
}

// The data of each server-sent event of a streamed answer.
std::vector<std::string> events(const Answer& answer) {
  std::vector<std::string> data;
  size_t at = 0;
  while ((at = answer.body.find("data: ", at)) != std::string::npos) {
    const size_t end = answer.body.find("\n\n", at);
    data.push_back(answer.body.substr(at + 6, end - at - 6));
    at = end;
  }
  return data;
}

EngineOptions engine_options() {
  EngineOptions options;
  options.model = tiny_model();
  options.manifest = test::default_manifest_path();
  options.backend = "cpu";
  options.threads = 2;
  return options;
}

// A server on a port the system picks, over a runner of one slot.
struct Server {
  explicit Server(size_t queue = 8, std::string api_key = "", server::HttpLimits limits = {})
      : engine(engine_options()),
        runner(engine,
               {.n_ctx = kContext, .kv_type = STRATA_KV_F16, .execution = {}, .queue_capacity = queue, .fault = {}}),
        routes(runner, {.model_id = "tiny", .api_key = std::move(api_key)}),
        http(
            "127.0.0.1", 0, [this](const server::HttpRequest& r, server::HttpReply& reply) { routes.handle(r, reply); },
            limits) {}
  Engine engine;
  server::CompletionRunner runner;
  server::OpenAiRoutes routes;
  server::HttpServer http;
};

// What generate() makes of the prompt the chat template renders for messages, greedily, as text.
std::string generated_text(const Engine& engine, const Json& messages, int32_t max_tokens) {
  const tokenizer::Tokenizer tokenizer(engine.file());
  const auto prompt =
      tokenizer.encode(format_chat(engine.file(), tokenizer, nlohmann::ordered_json::parse(messages.dump()), true),
                       {.parse_special = true});
  Session session(engine.model(), {.n_ctx = kContext, .execution = {}});
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  tokenizer::StreamingDetokenizer detokenizer(tokenizer, false);
  std::string text;
  generate(session, prompt, {max_tokens, greedy, end_of_generation_tokens(tokenizer.vocabulary())}, [&](int32_t token) {
    text += detokenizer.push(token);
    return true;
  });
  return text + detokenizer.finish();
}

const Json kHello = Json::array({{{"role", "user"}, {"content", "Hello there"}}});

TEST(Server, HealthAndModels) {
  ASSERT_REFERENCE(tiny_model());
  Server server;
  const Answer health = request(server.http.port(), http::verb::get, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.json()["status"], "ok");
  const Answer models = request(server.http.port(), http::verb::get, "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json()["data"][0]["id"], "tiny");
  EXPECT_EQ(request(server.http.port(), http::verb::get, "/v1/nothing").status, 404);
  EXPECT_EQ(request(server.http.port(), http::verb::get, "/v1/chat/completions").status, 405);
  EXPECT_EQ(post(server.http.port(), "/v1/models", "{}").status, 405);
}

// A greedy chat answer is the text generate() makes of the templated conversation; streamed, its pieces join to
// the same text, the first chunk names the role, the last before [DONE] carries the usage asked for.
TEST(Server, ChatAnswersAreWhatGenerateMakesStreamedOrNot) {
  ASSERT_REFERENCE(tiny_model());
  Server server;
  const std::string expected = generated_text(server.engine, kHello, 12);
  const Json body{{"messages", kHello}, {"max_tokens", 12}, {"temperature", 0}};
  const Answer whole = post(server.http.port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json answer = whole.json();
  EXPECT_EQ(answer["object"], "chat.completion");
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(answer["choices"][0]["message"]["content"], expected);
  EXPECT_EQ(answer["usage"]["completion_tokens"], 12);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");

  Json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  const Answer streamed = post(server.http.port(), "/v1/chat/completions", streamed_body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> data = events(streamed);
  ASSERT_GE(data.size(), 4u) << streamed.body;
  EXPECT_EQ(data.back(), "[DONE]");
  EXPECT_EQ(Json::parse(data.front())["choices"][0]["delta"]["role"], "assistant");
  std::string joined;
  for (size_t i = 0; i + 3 < data.size(); ++i) {
    const Json chunk = Json::parse(data[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    joined += chunk["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(joined, expected);
  EXPECT_EQ(Json::parse(data[data.size() - 3])["choices"][0]["finish_reason"], "length");
  const Json usage = Json::parse(data[data.size() - 2])["usage"];
  EXPECT_EQ(usage["completion_tokens"], 12);
  // The same conversation again: its prompt is in the cache but for the last token, and the answer is the same.
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"].get<int>() - 1);
}

// A second turn reads only what the first did not: its prompt's cached part is counted, and its answer is the
// one a fresh session gives.
TEST(Server, ANextTurnReusesTheCachedConversation) {
  ASSERT_REFERENCE(tiny_model());
  Server server;
  const Json first{{"messages", kHello}, {"max_tokens", 6}, {"temperature", 0}};
  const Answer one = post(server.http.port(), "/v1/chat/completions", first.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  Json conversation = kHello;
  conversation.push_back({{"role", "assistant"}, {"content", one.json()["choices"][0]["message"]["content"]}});
  conversation.push_back({{"role", "user"}, {"content", "And then?"}});
  const Answer two = post(server.http.port(), "/v1/chat/completions",
                          Json{{"messages", conversation}, {"max_tokens", 6}, {"temperature", 0}}.dump());
  ASSERT_EQ(two.status, 200) << two.body;
  EXPECT_GT(two.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 10) << two.body;
  EXPECT_EQ(two.json()["choices"][0]["message"]["content"], generated_text(server.engine, conversation, 6));
}

// A prompt longer than the runner's pieces (4 steps of 256 tokens) is read a piece at a time before generation:
// the answer is what generate() makes of the whole prompt at once (the same steps), and the usage counts it all.
TEST(Server, ALongPromptReadInPiecesAnswersAsAtOnce) {
  ASSERT_REFERENCE(tiny_model());
  const Engine engine(engine_options());
  constexpr int32_t kLongContext = 2048;
  server::CompletionRunner runner(
      engine, {.n_ctx = kLongContext, .kv_type = STRATA_KV_F16, .execution = {}, .queue_capacity = 2, .fault = {}});
  server::CompletionRequest request;
  for (int i = 0; i < 110; ++i) request.prompt += "the quick brown fox " + std::to_string(i) + " ";
  request.max_tokens = 8;
  request.sampling.temperature = 0.0f;
  const auto stream = runner.submit(request);
  std::string text;
  std::optional<server::CompletionOutcome> outcome;
  while (!outcome) {
    auto news = stream->wait(std::chrono::milliseconds(1000));
    text += news.text;
    outcome = news.end;
  }
  ASSERT_TRUE(outcome->error.empty()) << outcome->error;
  const tokenizer::Tokenizer tokenizer(engine.file());
  const auto prompt = tokenizer.encode(request.prompt, {.add_special = true, .parse_special = true});
  ASSERT_GT(prompt.size(), 1200u) << "the prompt must outlast several pieces";
  EXPECT_EQ(outcome->prompt_tokens, static_cast<int32_t>(prompt.size()));
  Session session(engine.model(), {.n_ctx = kLongContext, .execution = {}});
  tokenizer::StreamingDetokenizer detokenizer(tokenizer, false);
  std::string expected;
  generate(session, prompt, {8, request.sampling, end_of_generation_tokens(tokenizer.vocabulary())},
           [&](int32_t token) {
             expected += detokenizer.push(token);
             return true;
           });
  EXPECT_EQ(text, expected + detokenizer.finish());
}

// /v1/completions continues raw text; a stop string ends the text before it, with finish_reason "stop".
TEST(Server, CompletionsStopBeforeAStopString) {
  ASSERT_REFERENCE(tiny_model());
  Server server;
  const Json body{{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}};
  const Answer free_run = post(server.http.port(), "/v1/completions", body.dump());
  ASSERT_EQ(free_run.status, 200) << free_run.body;
  const std::string text = free_run.json()["choices"][0]["text"];
  ASSERT_GE(text.size(), 4u) << text;
  // The stop string: the character in the middle of the free run's text (UTF-8: from a lead byte to the next).
  const auto continuation = [&](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  size_t cut = text.size() / 2, end = cut + 1;
  while (cut > 0 && continuation(cut)) --cut;
  while (end < text.size() && continuation(end)) ++end;
  Json stopped_body = body;
  stopped_body["stop"] = Json::array({text.substr(cut, end - cut)});
  const Answer stopped = post(server.http.port(), "/v1/completions", stopped_body.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  const std::string before = stopped.json()["choices"][0]["text"];
  EXPECT_EQ(stopped.json()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(before, text.substr(0, text.find(stopped_body["stop"][0].get<std::string>())));
}

// A bad body gets 400 with OpenAI's error shape, its param naming the field at fault.
TEST(Server, BadRequestsAreRefusedNamingTheField) {
  ASSERT_REFERENCE(tiny_model());
  Server server;
  const std::string hello = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> chat_cases = {
      {"{not json", ""},
      {"[1, 2]", ""},
      {"{}", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {"{" + hello + R"(, "temperature": -1})", "temperature"},
      {"{" + hello + R"(, "top_p": 0})", "top_p"},
      {"{" + hello + R"(, "max_tokens": "ten"})", "max_tokens"},
      {"{" + hello + R"(, "max_tokens": -1})", "max_tokens"},
      {"{" + hello + R"(, "n": 2})", "n"},
      {"{" + hello + R"(, "stop": [1]})", "stop"},
      {"{" + hello + R"(, "seed": "x"})", "seed"},
      {"{" + hello + R"(, "stream": "yes"})", "stream"},
      {"{" + hello + R"(, "logprobs": true})", "logprobs"},
      {"{" + hello + R"(, "tools": {"type": "function"}})", "tools"},
      {"{" + hello + R"(, "tools": [{"type": "function"}]})", "tools[0]"},
      {"{" + hello + R"(, "tools": [], "tool_choice": "required"})", "tool_choice"},
  };
  for (const auto& [body, param] : chat_cases) {
    const Answer answer = post(server.http.port(), "/v1/chat/completions", body);
    ASSERT_EQ(answer.status, 400) << body << ": " << answer.body;
    const Json error = answer.json()["error"];
    EXPECT_EQ(error["type"], "invalid_request_error") << body;
    EXPECT_EQ(error["param"], param.empty() ? Json(nullptr) : Json(param)) << body;
    EXPECT_FALSE(error["message"].get<std::string>().empty()) << body;
  }
  for (const std::string body : {R"({})", R"({"prompt": ""})", R"({"prompt": 7})"}) {
    const Answer answer = post(server.http.port(), "/v1/completions", body);
    ASSERT_EQ(answer.status, 400) << body << ": " << answer.body;
    EXPECT_EQ(answer.json()["error"]["param"], "prompt") << body;
  }
  // A prompt the context cannot hold with room for a reply: 400, not a failure of the engine.
  const std::string long_prompt(kContext * 8, 'a');
  const Answer too_long = post(server.http.port(), "/v1/completions", Json{{"prompt", long_prompt}}.dump());
  EXPECT_EQ(too_long.status, 400) << too_long.body;
  // The server still answers after all that.
  EXPECT_EQ(request(server.http.port(), http::verb::get, "/health").status, 200);
}

// /metrics after two answers and a refused body: Prometheus' text that promtool accepts, the token counters and
// the finish reasons counted, the latency histograms observed; /ready and /health answer too.
TEST(Server, MetricsCountTheRequestsAndPassPromtool) {
  ASSERT_REFERENCE(tiny_model());
  Server server(8, "secret");
  const std::string key = "Bearer secret";
  const std::string body = Json{{"messages", kHello}, {"max_tokens", 5}, {"temperature", 0}}.dump();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(request(server.http.port(), http::verb::post, "/v1/chat/completions", body, key).status, 200);
  }
  EXPECT_EQ(request(server.http.port(), http::verb::post, "/v1/chat/completions", "{}", key).status, 400);
  EXPECT_EQ(request(server.http.port(), http::verb::get, "/ready").status, 200);
  const Answer health = request(server.http.port(), http::verb::get, "/health");
  EXPECT_EQ(health.json()["running"], 0);
  EXPECT_EQ(health.json()["step_age_seconds"], 0.0);
  // Probes and the scraper need no key.
  const Answer metrics = request(server.http.port(), http::verb::get, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string& text = metrics.body;
  EXPECT_NE(text.find("strata_generation_tokens_total 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_request_success_total{finished_reason=\"length\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_time_to_first_token_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_time_per_output_token_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_worker_state{state=\"ready\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_batch_slots 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("strata_build_info{version=\""), std::string::npos) << text;
  if (test::run_command("command -v promtool").exit_code != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian's prometheus package; scripts/install-deps.sh installs it)";
  }
  const std::string file =
      (std::filesystem::temp_directory_path() / ("strata-metrics-" + std::to_string(::getpid()) + ".txt")).string();
  { std::ofstream(file) << text; }
  const auto check = test::run_command("promtool check metrics < " + test::shell_quote(file));
  std::filesystem::remove(file);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

// Over a hybrid expert placement (the CPU standing in for a GPU), the gauges name its slots and its pool's threads,
// and the hit rate moves once a request ran.
TEST(Server, MetricsShowTheExpertPlacement) {
  const auto model = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(model);
  EngineOptions options = engine_options();
  options.model = model;
  options.expert_cache = "4";
  options.vram_budget_gib = 0.25;
  const Engine engine(options);
  server::CompletionRunner runner(
      engine, {.n_ctx = kContext, .kv_type = STRATA_KV_F16, .execution = {}, .queue_capacity = 8, .fault = {}});
  const auto stream = runner.submit(server::parse_chat_request(Json{{"messages", kHello}, {"max_tokens", 4}}.dump()));
  ASSERT_NE(stream, nullptr);
  while (!stream->wait(std::chrono::milliseconds(100)).end) {
  }
  const server::MetricsGauges gauges = runner.gauges();
  EXPECT_EQ(gauges.expert_slots, 4);
  EXPECT_EQ(gauges.pool_workers, 2);
  EXPECT_GT(gauges.expert_hit_rate, 0.0);
  EXPECT_LT(gauges.expert_hit_rate, 1.0);
  EXPECT_GT(gauges.kv_cache_usage, 0.0);
}

// With an API key, every endpoint but /health wants it; a full queue answers 429 with Retry-After; a body over the
// limit 413.
TEST(Server, KeysQueueAndBodyLimits) {
  ASSERT_REFERENCE(tiny_model());
  Server keyed(8, "secret");
  const std::string body = Json{{"messages", kHello}, {"max_tokens", 1}}.dump();
  EXPECT_EQ(request(keyed.http.port(), http::verb::post, "/v1/chat/completions", body).status, 401);
  EXPECT_EQ(request(keyed.http.port(), http::verb::post, "/v1/chat/completions", body, "Bearer wrong").status, 401);
  EXPECT_EQ(request(keyed.http.port(), http::verb::post, "/v1/chat/completions", body, "Bearer secret").status, 200);
  EXPECT_EQ(request(keyed.http.port(), http::verb::get, "/health").status, 200);

  Server no_room(0, "", {.max_body_bytes = 1024});
  const Answer full = post(no_room.http.port(), "/v1/chat/completions", body);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(full.retry_after, "1");
  EXPECT_EQ(full.json()["error"]["type"], "rate_limit_error");
  const Answer large = post(no_room.http.port(), "/v1/completions", Json{{"prompt", std::string(4096, 'x')}}.dump());
  EXPECT_EQ(large.status, 413) << large.body;
}

// The official `openai` npm package, unchanged (tests/clients, installed by scripts/install-clients.sh), against
// the server: a greedy chat whole and streamed gives generate()'s text, the stream's usage and finish reason come
// through, the model list, and a bad temperature reaches it as a 400 naming the field.
TEST(Server, TheOfficialOpenAiClientChatsStreamsAndListsModels) {
  ASSERT_REFERENCE(tiny_model());
  const std::filesystem::path clients = std::filesystem::path(STRATA_SOURCE_DIR) / "tests" / "clients";
  if (test::run_command("command -v node").exit_code != 0) GTEST_SKIP() << "node is not installed";
  ASSERT_TRUE(std::filesystem::exists(clients / "node_modules" / "openai"))
      << "the openai npm package is missing: scripts/install-clients.sh installs it";
  Server server;
  const auto run = test::run_command("node " + test::shell_quote((clients / "openai_chat.cjs").string()) +
                                     " http://127.0.0.1:" + std::to_string(server.http.port()) + "/v1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json seen = Json::parse(run.out);
  const std::string expected = generated_text(server.engine, kHello, 8);
  EXPECT_EQ(seen["whole"], expected);
  EXPECT_EQ(seen["whole_finish"], "length");
  EXPECT_EQ(seen["streamed"], expected);
  EXPECT_EQ(seen["finish"], "length");
  EXPECT_EQ(seen["usage"]["completion_tokens"], 8);
  EXPECT_EQ(seen["models"], Json::array({"tiny"}));
  EXPECT_EQ(seen["refused"]["status"], 400);
  EXPECT_EQ(seen["refused"]["param"], "temperature");
}

// Qwen's <tool_call> blocks become calls, the rest content; what is not a call stays text.
TEST(ToolCalls, QwenBlocksBecomeCallsAndTheRestStaysText) {
  using server::parse_tool_calls;
  EXPECT_TRUE(parse_tool_calls("Just text.").calls.empty());
  EXPECT_EQ(parse_tool_calls("Just text.").content, "Just text.");

  const auto two = parse_tool_calls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\"}\n</tool_call>");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.content, "Let me look.");
  EXPECT_EQ(two.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(two.calls[0].arguments), Json({{"city", "Paris"}}));
  EXPECT_EQ(two.calls[1].name, "now");
  EXPECT_EQ(two.calls[1].arguments, "{}");

  const auto as_text = parse_tool_calls(R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)");
  ASSERT_EQ(as_text.calls.size(), 1u);
  EXPECT_EQ(as_text.calls[0].arguments, R"({"a": 1})");

  for (const std::string not_a_call :
       {"<tool_call>{not json}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>[1, 2]</tool_call>", "<tool_call>{\"name\": \"f\"} never closed"}) {
    const auto parsed = parse_tool_calls(not_a_call);
    EXPECT_TRUE(parsed.calls.empty()) << not_a_call;
    EXPECT_EQ(parsed.content, not_a_call);
  }
}

// A source that answers every request with the same text, as a model that calls a tool would.
class ScriptedSource : public server::CompletionSource {
 public:
  explicit ScriptedSource(std::string reply) : reply_(std::move(reply)) {}
  std::shared_ptr<server::CompletionStream> submit(server::CompletionRequest request) override {
    last_tools = request.tools;
    auto stream = std::make_shared<server::CompletionStream>();
    // In pieces that cut the tags, as tokens would.
    for (size_t at = 0; at < reply_.size(); at += 5) stream->push_text(reply_.substr(at, 5));
    server::CompletionOutcome outcome;
    outcome.finish_reason = "stop";
    outcome.prompt_tokens = 10;
    outcome.completion_tokens = 20;
    stream->finish(outcome);
    return stream;
  }
  server::MetricsGauges gauges() const override { return {}; }
  nlohmann::ordered_json last_tools;

 private:
  std::string reply_;
};

// The official client reads a model's tool call as OpenAI's tool_calls, from a whole answer and from a stream,
// with finish_reason "tool_calls"; the request's tools reached the source.
TEST(Server, TheOfficialOpenAiClientReadsToolCalls) {
  const std::filesystem::path clients = std::filesystem::path(STRATA_SOURCE_DIR) / "tests" / "clients";
  if (test::run_command("command -v node").exit_code != 0) GTEST_SKIP() << "node is not installed";
  ASSERT_TRUE(std::filesystem::exists(clients / "node_modules" / "openai"))
      << "the openai npm package is missing: scripts/install-clients.sh installs it";
  ScriptedSource source(
      "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  server::OpenAiRoutes routes(source, {.model_id = "tiny", .api_key = ""});
  server::HttpServer http(
      "127.0.0.1", 0, [&routes](const server::HttpRequest& r, server::HttpReply& reply) { routes.handle(r, reply); });
  const auto run = test::run_command("node " + test::shell_quote((clients / "openai_tools.cjs").string()) +
                                     " http://127.0.0.1:" + std::to_string(http.port()) + "/v1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json seen = Json::parse(run.out);
  const Json call = {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}};
  EXPECT_EQ(seen["whole"]["calls"], Json::array({call})) << run.out;
  EXPECT_EQ(seen["whole"]["content"], "I will check.");
  EXPECT_EQ(seen["whole"]["finish"], "tool_calls");
  EXPECT_EQ(seen["streamed"]["calls"], Json::array({call})) << run.out;
  EXPECT_EQ(seen["streamed"]["content"], "I will check.\n");
  EXPECT_EQ(seen["streamed"]["finish"], "tool_calls");
  ASSERT_TRUE(source.last_tools.is_array());
  EXPECT_EQ(source.last_tools[0]["function"]["name"], "get_weather");
}

// A source whose answers never end by themselves: a piece of text every 10 ms until the request is cancelled.
class EndlessSource : public server::CompletionSource {
 public:
  ~EndlessSource() override {
    for (std::thread& writer : writers_) writer.join();
  }
  std::shared_ptr<server::CompletionStream> submit(server::CompletionRequest) override {
    auto stream = std::make_shared<server::CompletionStream>();
    writers_.emplace_back([this, stream] {
      const auto start = std::chrono::steady_clock::now();
      while (!stream->cancelled() && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
        stream->push_text("x");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      cancelled_after_ms =
          stream->cancelled()
              ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
              : -1.0;
      server::CompletionOutcome outcome;
      outcome.finish_reason = "length";
      stream->finish(outcome);
    });
    return stream;
  }
  server::MetricsGauges gauges() const override { return {}; }
  std::atomic<double> cancelled_after_ms{0.0};  // from the request's start to its cancelling; -1: never cancelled

 private:
  std::vector<std::thread> writers_;
};

// A client that hangs up before a whole (not streamed) answer is ready cancels its request within a token or so, as
// a streaming client's does: its slot is not held to the end of max_tokens.
TEST(Server, AClientThatHangsUpCancelsAWholeAnswer) {
  EndlessSource source;
  server::OpenAiRoutes routes(source, {.model_id = "tiny", .api_key = ""});
  server::HttpServer http(
      "127.0.0.1", 0, [&routes](const server::HttpRequest& r, server::HttpReply& reply) { routes.handle(r, reply); });
  {
    boost::asio::io_context io;
    tcp::socket socket(io);
    socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), http.port()));
    http::request<http::string_body> message{http::verb::post, "/v1/chat/completions", 11};
    message.set(http::field::host, "127.0.0.1");
    message.body() = Json{{"messages", kHello}, {"max_tokens", 100000}}.dump();
    message.prepare_payload();
    http::write(socket, message);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }  // the socket closes: the client is gone
  for (int i = 0; i < 300 && source.cancelled_after_ms.load() == 0.0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double cancelled_after_ms = source.cancelled_after_ms.load();
  ASSERT_NE(cancelled_after_ms, 0.0) << "not cancelled within 3 s of the client leaving";
  EXPECT_GT(cancelled_after_ms, 150.0) << "cancelled before the client left";
  EXPECT_LT(cancelled_after_ms, 1500.0) << "not cancelled soon after the client left";
}

// `strata serve` ARGUMENTS as users run it, its log in a file of its own: the port it said it listens on, then
// SIGTERM, its exit status and its log.
class SpawnedServer {
 public:
  explicit SpawnedServer(const std::string& arguments)
      : log_((std::filesystem::temp_directory_path() /
              ("strata-serve-" + std::to_string(::getpid()) + "-" + std::to_string(next_id_++) + ".log"))
                 .string()) {
    std::filesystem::remove(log_);
    const std::string command =
        "exec " + test::shell_quote(test::strata_executable().string()) + " serve " + arguments + " 2>" + log_;
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) pid_ = -1;
    const std::string marker = "on http://127.0.0.1:";
    for (int i = 0; i < 300 && port_ == 0 && pid_ > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string text = log();
      if (const size_t at = text.find(marker); at != std::string::npos) {
        port_ = static_cast<uint16_t>(std::stoi(text.substr(at + marker.size())));
      }
    }
  }
  ~SpawnedServer() {
    stop();
    std::filesystem::remove(log_);
  }
  SpawnedServer(const SpawnedServer&) = delete;
  SpawnedServer& operator=(const SpawnedServer&) = delete;

  uint16_t port() const { return port_; }  // 0: it never said
  std::string log() const { return test::read_file(log_); }
  // SIGTERM, then the exit status (-1 where it did not exit on its own).
  int stop() {
    if (pid_ <= 0) return status_;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return status_;
  }

 private:
  static inline int next_id_ = 0;
  std::string log_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int status_ = -1;
};

// The command: it refuses to listen beyond loopback without an API key, logs where it listens, and SIGTERM stops
// it cleanly (exit 0).
TEST(ServeCli, ListensLogsAndStopsOnSigterm) {
  ASSERT_REFERENCE(tiny_model());
  const std::string strata = test::shell_quote(test::strata_executable().string());
  const std::string model = "--model " + test::shell_quote(tiny_model().string()) + " --backend cpu -t 2 ";
  const auto open = test::run_command(strata + " serve " + model + "--host 0.0.0.0");
  EXPECT_NE(open.exit_code, 0);
  EXPECT_NE(open.err.find("--host 0.0.0.0 listens beyond this machine: give an --api-key"), std::string::npos)
      << open.err;
  SpawnedServer server(model + "--port 0");
  EXPECT_EQ(server.stop(), 0) << server.log();
  EXPECT_NE(server.log().find("serving qwen3moe-tiny-q8_0.gguf on http://127.0.0.1:"), std::string::npos)
      << server.log();
  EXPECT_NE(server.log().find("SIGTERM: stopping"), std::string::npos) << server.log();
}

// The whole server as users run it, its engine in a worker process whose first incarnation crashes mid-answer
// (--test-fault): the client gets the whole answer, the same as an undisturbed server's, and /metrics counts the
// restart.
TEST(ServeCli, AWorkerCrashIsInvisibleToTheClient) {
  ASSERT_REFERENCE(tiny_model());
  SpawnedServer server("--model " + test::shell_quote(tiny_model().string()) +
                       " --backend cpu -t 2 --ctx 256 --port 0 --test-fault crash@5");
  const uint16_t port = server.port();
  ASSERT_NE(port, 0) << "the server did not say where it listens: " << server.log();
  const Answer answer =
      post(port, "/v1/chat/completions", Json{{"messages", kHello}, {"max_tokens", 12}, {"temperature", 0}}.dump());
  EXPECT_EQ(answer.status, 200) << answer.body;
  Server undisturbed;
  EXPECT_EQ(answer.json()["choices"][0]["message"]["content"], generated_text(undisturbed.engine, kHello, 12));
  const Answer metrics = request(port, http::verb::get, "/metrics");
  EXPECT_NE(metrics.body.find("strata_worker_restarts_total 1\n"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("strata_worker_state{state=\"ready\"} 1\n"), std::string::npos) << metrics.body;
  EXPECT_EQ(server.stop(), 0);
  EXPECT_NE(server.log().find("was killed by signal"), std::string::npos) << server.log();
}

// A worker that hangs while it loads the model (--test-fault hang@load) is not waited for forever: after
// --load-timeout-s a stall report with its thread stacks, then the start fails with a clear error.
TEST(ServeCli, AWorkerThatHangsWhileLoadingFailsTheStartInTime) {
  ASSERT_REFERENCE(tiny_model());
  const auto result = test::run_command(test::shell_quote(test::strata_executable().string()) + " serve --model " +
                                        test::shell_quote(tiny_model().string()) +
                                        " --backend cpu -t 2 --port 0 --test-fault hang@load --load-timeout-s 1");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("stall report: the engine worker"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("stall report: thread "), std::string::npos) << "no stacks: " << result.err;
  EXPECT_NE(result.err.find("the engine worker did not get ready: it was still loading after 1."), std::string::npos)
      << result.err;
  EXPECT_LT(result.seconds, 15.0);
}

// --config serve.json stands for the flags its keys name: the model, the args, and env in the worker's environment
// (here a STRATA_CPU_ISA that the worker's CPU backend reports); a flag may add to it. A bad file, an unknown key,
// a key also given as a flag, or a setting not built yet is a one-line error naming the file and the key.
TEST(ServeCli, AConfigFileStandsForItsFlags) {
  ASSERT_REFERENCE(tiny_model());
  const auto folder = std::filesystem::temp_directory_path();
  const auto config = folder / ("strata-serve-config-" + std::to_string(::getpid()) + ".json");
  const auto write = [&config](const Json& settings) { std::ofstream(config) << settings.dump(); };
  write({{"model", tiny_model().string()},
         {"args", {"--backend", "cpu", "-t", "2", "--ctx", "256", "--model-id", "from-config"}},
         {"parallel", 1},
         {"layer_split", nullptr},
         {"env", {{"STRATA_CPU_ISA", "avx2"}}}});
  {
    SpawnedServer server("--config " + test::shell_quote(config.string()) + " --port 0");
    ASSERT_NE(server.port(), 0) << server.log();
    const Answer models = request(server.port(), http::verb::get, "/v1/models");
    EXPECT_EQ(models.json()["data"][0]["id"], "from-config") << models.body;
    EXPECT_EQ(server.stop(), 0);
    EXPECT_NE(server.log().find("backend: cpu: 2 threads, avx2"), std::string::npos) << server.log();
  }
  const std::string strata = test::shell_quote(test::strata_executable().string()) + " serve --config " +
                             test::shell_quote(config.string()) + " ";
  const auto refused = [&](const Json& settings, const std::string& flags, const std::string& message) {
    write(settings);
    const auto result = test::run_command(strata + flags);
    EXPECT_NE(result.exit_code, 0) << settings.dump();
    EXPECT_NE(result.err.find(message), std::string::npos) << result.err;
  };
  const Json model = {{"model", tiny_model().string()}};
  refused({{"modle", "m.gguf"}}, "", config.string() + ": modle: unknown key (known: model, args, parallel, gpu");
  refused(model, "--model other.gguf", config.string() + ": model: also given as --model on the command line");
  refused({{"model", tiny_model().string()}, {"args", {"--port", 0}}}, "", ": args[1]: expected a string");
  refused({{"model", tiny_model().string()}, {"parallel", 0}}, "", ": parallel: expected an integer of at least 1");
  refused({{"model", tiny_model().string()}, {"parallel", 4}}, "",
          "--parallel: 4 slots: continuous batching over several slots is not built yet");
  refused({{"model", tiny_model().string()}, {"layer_split", {1, 1}}}, "",
          ": layer_split: splitting layers over several GPUs is not built yet");
  refused({{"model", tiny_model().string()}, {"env", {{"A", 1}}}}, "", ": env.A: expected a string");
  refused(Json::array({1}), "", ": expected a JSON object of settings");
  for (const std::string text : {"{\"model\": ", "{\"gpu\": 1e999}"}) {  // cut short; a number past a double's range
    std::ofstream(config) << text;
    const auto result = test::run_command(strata);
    EXPECT_NE(result.err.find(config.string() + ": not JSON ("), std::string::npos) << text << ": " << result.err;
  }
  std::filesystem::remove(config);
  const auto missing = test::run_command(strata);
  EXPECT_NE(missing.err.find(config.string() + ": cannot read the server config (--config)"), std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace strata
