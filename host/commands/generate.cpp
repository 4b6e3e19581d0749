// strata generate --model M (--tokens 1,2,3 | -p TEXT [--chat]) [-n N] [sampling flags] [--stop S]
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/engine/chat_format.hpp"
#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/generation.hpp"
#include "core/tokenizer/streaming_detokenizer.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

struct GenerateCommandOptions {
  EngineOptions engine;
  std::string tokens;
  std::string prompt;
  std::string prompt_file;
  bool chat = false;
  bool stats = false;
  std::vector<std::string> stop;
  int32_t max_tokens = 128;
  std::optional<int32_t> ctx;
  std::string kv = "f16";
  SamplingParams sampling;
};

}  // namespace

void register_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateCommandOptions>();
  auto* command = app.add_subcommand("generate", "Generate from token ids (prints ids) or from text (streams text)");
  add_engine_options(command, options->engine);
  auto* tokens = command->add_option(
      "--tokens", options->tokens,
      "Prompt as token ids: 1,2,3 or a file holding such a list (at most " + byte_size_text(kMaxUserTextBytes) + ")");
  auto* prompt = command->add_option("-p,--prompt", options->prompt, "Prompt text");
  auto* prompt_file = command->add_option(
      "-f,--prompt-file", options->prompt_file,
      "Prompt text from a file (a regular file of at most " + byte_size_text(kMaxUserTextBytes) + ")");
  tokens->excludes(prompt)->excludes(prompt_file);
  prompt->excludes(prompt_file);
  command->add_flag("--chat", options->chat,
                    "Wrap the prompt as one user message in the model's chat template (rendered within the limits "
                    "`strata template --help` lists)");
  command->add_flag("--stats", options->stats,
                    "With a hybrid expert placement, print its stats to stderr at the end (hit rate, pairs per tier, "
                    "pool and waiting ms per step, PCIe bytes, adaptive rounds)");
  command->add_option("--stop", options->stop, "Stop when this text appears (repeatable); it is not printed");
  command
      ->add_option("-n,--max-tokens", options->max_tokens,
                   "Tokens to generate at most, >= 0 (without --ctx, the prompt and these must fit the model's "
                   "context_length)")
      ->capture_default_str();
  command->add_option("--ctx", options->ctx,
                      "Context size, at least 1 (default: prompt + max tokens; above the model's context length: "
                      "lowered to it, with a warning)");
  command->add_option("--kv", options->kv, "KV cache type: f16 or int8")->capture_default_str();
  add_sampling_options(command, options->sampling);

  command->callback([options] {
    if (options->tokens.empty() && options->prompt.empty() && options->prompt_file.empty()) {
      throw Error("generate needs --tokens, --prompt or --prompt-file");
    }
    GenerationOptions generation;
    generation.max_tokens = options->max_tokens;
    generation.sampling = options->sampling;
    check_generation_options(generation);
    const Engine engine(options->engine);
    const bool text_mode = options->tokens.empty();
    std::unique_ptr<tokenizer::Tokenizer> tokenizer;
    std::vector<int32_t> prompt_tokens;
    if (text_mode) {
      tokenizer = std::make_unique<tokenizer::Tokenizer>(engine.file());
      std::string text = options->prompt_file.empty()
                             ? options->prompt
                             : read_user_file(options->prompt_file, "the prompt (--prompt-file)");
      if (options->chat) {
        text = format_chat(engine.file(), *tokenizer, {{{"role", "user"}, {"content", text}}}, true);
      }
      // A chat prompt carries its special tokens as text; a plain prompt gets BOS as the model asks.
      prompt_tokens = tokenizer->encode(text, {.add_special = !options->chat, .parse_special = options->chat});
      generation.end_tokens = end_of_generation_tokens(tokenizer->vocabulary());
    } else {
      prompt_tokens = parse_token_list(options->tokens);
    }
    SessionOptions session_options;
    session_options.kv_type = parse_kv_type(options->kv);
    session_options.execution = options->engine.execution;
    const ModelConfig& config = engine.model().config();
    session_options.n_ctx = options->ctx
                                ? checked_context_size(config, *options->ctx)
                                : generation_context(prompt_tokens.size(), options->max_tokens, config.n_ctx_train);
    Session session(engine.model(), session_options);
    const auto report_experts = [&] {
      if (options->stats && engine.model().experts() != nullptr) {
        std::fprintf(stderr, "%s\n", engine.model().experts()->stats().text().c_str());
      }
      engine.finish_expert_trace();
    };

    if (!text_mode) {
      const auto generated = generate(session, prompt_tokens, generation, [](int32_t) { return true; });
      for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? " " : "", generated[i]);
      std::printf("\n");
      report_experts();
      return;
    }
    tokenizer::StreamingDetokenizer detokenizer(*tokenizer, /*render_special=*/false);
    StopStrings stops(options->stop);
    generate(session, prompt_tokens, generation, [&](int32_t token) {
      std::fputs(stops.push(detokenizer.push(token)).c_str(), stdout);
      std::fflush(stdout);
      return !stops.stopped();
    });
    if (!stops.stopped()) std::fputs(stops.push(detokenizer.finish()).c_str(), stdout);
    std::fputs((stops.finish() + "\n").c_str(), stdout);
    report_experts();
  });
}

}  // namespace strata::host
