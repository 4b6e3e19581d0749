// strata chat --model M: an interactive terminal chat. Each turn renders the whole conversation with the
// model's chat template and reuses the KV cache for the part the last turn already read.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/engine/chat_format.hpp"
#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/generation.hpp"
#include "core/tokenizer/streaming_detokenizer.hpp"
#include "core/util/error.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

constexpr int32_t kDefaultChatContext = 4096;

struct ChatOptions {
  EngineOptions engine;
  std::string system;
  int32_t max_tokens = 512;
  std::optional<int32_t> ctx;
  std::string kv = "f16";
  SamplingParams sampling;
};

}  // namespace

void register_chat_command(CLI::App& app) {
  auto options = std::make_shared<ChatOptions>();
  auto* command =
      app.add_subcommand("chat", "Chat with a model in the terminal (/reset starts over, /exit or Ctrl-D quits)");
  add_engine_options(command, options->engine);
  command->add_option("--system", options->system, "A system message to start the conversation with");
  command->add_option("-n,--max-tokens", options->max_tokens, "Tokens per reply at most, >= 0")->capture_default_str();
  command->add_option("--ctx", options->ctx,
                      "Context size of the conversation, at least 1 (default: " + std::to_string(kDefaultChatContext) +
                          ", or the model's context length when shorter; above it: lowered to it, with a warning)");
  command->add_option("--kv", options->kv, "KV cache type: f16 or int8")->capture_default_str();
  add_sampling_options(command, options->sampling);

  command->callback([options] {
    check_generation_options({options->max_tokens, options->sampling, {}});
    const Engine engine(options->engine);
    const tokenizer::Tokenizer tokenizer(engine.file());
    const ModelConfig& config = engine.model().config();
    const int32_t n_ctx = options->ctx             ? checked_context_size(config, *options->ctx)
                          : config.n_ctx_train > 0 ? std::min(kDefaultChatContext, config.n_ctx_train)
                                                   : kDefaultChatContext;
    Session session(engine.model(),
                    {.n_ctx = n_ctx, .kv_type = parse_kv_type(options->kv), .execution = options->engine.execution});
    GenerationOptions generation{options->max_tokens, options->sampling,
                                 end_of_generation_tokens(tokenizer.vocabulary())};

    const nlohmann::ordered_json start =
        options->system.empty() ? nlohmann::ordered_json::array()
                                : nlohmann::ordered_json::array({{{"role", "system"}, {"content", options->system}}});
    nlohmann::ordered_json messages = start;
    std::vector<int32_t> cached;  // the tokens the session's cache holds, in order
    std::string line;
    while (true) {
      std::cout << "> " << std::flush;
      if (!std::getline(std::cin, line) || line == "/exit") break;
      if (line == "/reset") {
        messages = start;
        continue;
      }
      if (line.empty()) continue;
      messages.push_back({{"role", "user"}, {"content", line}});
      const auto prompt =
          tokenizer.encode(format_chat(engine.file(), tokenizer, messages, true), {.parse_special = true});
      if (prompt.size() + options->max_tokens > static_cast<size_t>(n_ctx)) {
        std::cout << "[the conversation no longer fits the context of " << n_ctx << " tokens; /reset]\n";
        messages.erase(messages.end() - 1);
        continue;
      }
      const size_t keep = reusable_prefix(cached, prompt);
      session.rewind(static_cast<int32_t>(keep));
      tokenizer::StreamingDetokenizer detokenizer(tokenizer, /*render_special=*/false);
      std::string reply;
      const auto generated = generate(session, std::span(prompt).subspan(keep), generation, [&](int32_t token) {
        const std::string text = detokenizer.push(token);
        reply += text;
        std::cout << text << std::flush;
        return true;
      });
      reply += detokenizer.finish();
      std::cout << "\n";
      cached.assign(prompt.begin(), prompt.end());
      cached.insert(cached.end(), generated.begin(), generated.end());
      cached.resize(static_cast<size_t>(session.position()));
      messages.push_back({{"role", "assistant"}, {"content", reply}});
    }
  });
}

}  // namespace strata::host
