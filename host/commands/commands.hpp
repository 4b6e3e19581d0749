// Each subcommand of the strata executable registers itself on the CLI11 app. A command parses its
// flags, calls the core, and prints; it holds no logic of its own.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::host {

void register_plugins_command(CLI::App& app);
void register_inspect_command(CLI::App& app);
void register_synth_command(CLI::App& app);
void register_logits_command(CLI::App& app);
void register_bench_command(CLI::App& app);
void register_generate_command(CLI::App& app);
void register_chat_command(CLI::App& app);
void register_template_command(CLI::App& app);
void register_tokenize_command(CLI::App& app);
void register_detokenize_command(CLI::App& app);
void register_profile_command(CLI::App& app);
void register_plan_command(CLI::App& app);
void register_serve_command(CLI::App& app);

}  // namespace strata::host
