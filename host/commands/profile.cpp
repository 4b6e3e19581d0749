// strata profile --model M --prompts FILE --output P.json [--jsonl] [--chat] [--decode N] [--ctx N]: counts how
// often the router chooses each (layer, expert) over a calibration run and writes an expert profile
// (docs/experts.md).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/engine/chat_format.hpp"
#include "core/engine/context_size.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/expert_profiling.hpp"
#include "core/experts/expert_profile.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/util/error.hpp"
#include "core/util/output_file.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

struct ProfileCommandOptions {
  EngineOptions engine;
  std::string prompts;
  bool jsonl = false;
  bool chat = false;
  std::string output;
  int32_t decode = 32;
  std::optional<int32_t> ctx;
  std::string kv = "f16";
  int32_t batch = 256;
};

void run_profile(const ProfileCommandOptions& o) {
  const std::filesystem::path prompts_path = o.prompts;
  const auto prompts = parse_prompts(read_user_file(prompts_path, "the prompts (--prompts)"), prompts_path, o.jsonl);
  OutputFile out(o.output, "the expert profile");
  const Engine engine(o.engine);
  const ModelConfig& config = engine.model().config();
  const tokenizer::Tokenizer tokenizer(engine.file());

  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> names;
  size_t longest = 0;
  for (const Prompt& prompt : prompts) {
    names.push_back(prompts_path.string() + ":" + std::to_string(prompt.line));
    std::string text = prompt.text;
    if (o.chat) text = format_chat(engine.file(), tokenizer, {{{"role", "user"}, {"content", text}}}, true);
    // As generate: a chat prompt carries its special tokens as text; a plain prompt gets BOS as the model asks.
    tokens.push_back(tokenizer.encode(text, {.add_special = !o.chat, .parse_special = o.chat}));
    longest = std::max(longest, tokens.back().size());
  }
  // Without --ctx: the longest prompt and its decode, within the model's context (a prompt past it fails naming
  // its line; a decode stops where the context is full).
  int32_t n_ctx = 0;
  if (o.ctx) {
    n_ctx = checked_context_size(config, *o.ctx);
  } else {
    const uint64_t needed = std::max<uint64_t>(longest + static_cast<uint64_t>(o.decode), 1);
    const uint64_t limit = config.n_ctx_train > 0 ? static_cast<uint64_t>(config.n_ctx_train) : uint64_t{INT32_MAX};
    n_ctx = static_cast<int32_t>(std::min(needed, limit));
  }

  SessionOptions session;
  session.n_ctx = n_ctx;
  session.kv_type = parse_kv_type(o.kv);
  session.max_batch = o.batch;
  session.execution = o.engine.execution;
  const auto end_tokens = end_of_generation_tokens(tokenizer.vocabulary());
  const ProfilingResult result = profile_routing(engine.model(), tokens, names, o.decode, end_tokens, session);

  ExpertProfileInfo info;
  info.model_file = engine.file().first().path().filename().string();
  info.architecture = std::string(config.architecture->name);
  info.n_layer = config.n_layer;
  info.n_expert = config.n_expert;
  info.n_expert_used = config.n_expert_used;
  info.prompts = result.prompts;
  info.tokens = result.prompt_tokens + result.decoded_tokens;
  write_expert_profile(out, result.counts, info);
  std::printf(
      "profiled %lld prompts, %lld tokens (%lld read, %lld decoded), %d layers x %d experts (%d used): the top 25%% of "
      "(layer, expert) pairs took %.1f%% of the routed pairs (25%% if uniform); wrote %s\n",
      static_cast<long long>(result.prompts), static_cast<long long>(info.tokens),
      static_cast<long long>(result.prompt_tokens), static_cast<long long>(result.decoded_tokens), config.n_layer,
      config.n_expert, config.n_expert_used, 100.0 * top_pairs_share(result.counts, 0.25), o.output.c_str());
}

}  // namespace

void register_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileCommandOptions>();
  auto* command = app.add_subcommand(
      "profile", "Count how often the router chooses each (layer, expert) over prompts, into an expert profile");
  command->footer(
      "For each prompt: a fresh sequence, the prompt read, then --decode tokens decoded greedily (each read back in),\n"
      "so that the counts hold prompt-time and decode-time routing. Every layer's chosen experts are read back\n"
      "each step, so step graphs are off and this runs slower than generate. The profile (JSON, docs/experts.md)\n"
      "is what `strata plan --profile` and the expert cache start from; calibrate on text like what will be served.");
  add_engine_options(command, o->engine);
  command
      ->add_option("--prompts", o->prompts,
                   "Prompts file: one prompt a line, empty lines skipped (a regular file of at most " +
                       byte_size_text(kMaxUserTextBytes) + ")")
      ->required();
  command->add_flag("--jsonl", o->jsonl,
                    "Each non-empty line of the prompts file is one prompt as a JSON string (\"a\\nb\": prompts "
                    "holding line breaks)");
  command->add_flag("--chat", o->chat, "Wrap each prompt as one user message in the model's chat template");
  command->add_option("-o,--output", o->output, "Expert profile to write (JSON)")->required();
  command->add_option("--decode", o->decode, "Tokens to decode greedily after each prompt, >= 0")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--ctx", o->ctx,
                      "Context size, at least 1 (default: the longest prompt + --decode, within the model's context "
                      "length; above it: lowered to it, with a warning)");
  command->add_option("--kv", o->kv, "KV cache type: f16 or int8")->capture_default_str();
  command->add_option("--batch", o->batch, "Tokens per forward step for prompts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->callback([o] { run_profile(*o); });
}

}  // namespace strata::host
