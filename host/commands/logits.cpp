// strata logits --model M --tokens 1,2,3 --output F: float32 logits [n_tokens][n_vocab] of one sequence.
#include <optional>

#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/util/output_file.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

struct LogitsOptions {
  EngineOptions engine;
  std::string tokens;
  std::string output;
  std::string kv = "f16";
  std::optional<int32_t> ctx;
  int32_t batch = 256;
};

}  // namespace

void register_logits_command(CLI::App& app) {
  auto options = std::make_shared<LogitsOptions>();
  auto* command = app.add_subcommand(
      "logits", "Write the logits of every position of a token sequence (positions from 0, no BOS added)");
  add_engine_options(command, options->engine);
  command
      ->add_option("--tokens", options->tokens,
                   "Token ids: 1,2,3 or a file holding such a list (at most " + byte_size_text(kMaxUserTextBytes) + ")")
      ->required();
  command->add_option("-o,--output", options->output, "Output: float32 little-endian [n_tokens][n_vocab]")->required();
  command->add_option("--kv", options->kv, "KV cache type: f16 or int8")->capture_default_str();
  command->add_option("--ctx", options->ctx,
                      "Context size, at least 1 (default: the number of tokens; above the model's context length: "
                      "lowered to it, with a warning)");
  command->add_option("--batch", options->batch, "Tokens per forward step")->capture_default_str();

  command->callback([options] {
    const auto tokens = parse_token_list(options->tokens);
    OutputFile out(options->output, "the logits");
    const Engine engine(options->engine);
    SessionOptions session_options;
    session_options.kv_type = parse_kv_type(options->kv);
    session_options.execution = options->engine.execution;
    session_options.n_ctx = options->ctx ? checked_context_size(engine.model().config(), *options->ctx)
                                         : static_cast<int32_t>(tokens.size());
    session_options.max_batch = options->batch;
    Session session(engine.model(), session_options);
    const auto logits = session.forward(tokens, /*all_logits=*/true);
    out.write(logits.data(), logits.size() * sizeof(float));
    out.finish();
  });
}

}  // namespace strata::host
