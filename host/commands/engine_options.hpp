// Flags shared by the commands that run a model (logits, generate, chat, bench), and token-list parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "core/sampling/sampler.hpp"

namespace strata::host {

// The check of every thread-count flag: 0 (the default) to STRATA_MAX_THREADS (1024, fixed so that a command
// valid on one machine is valid on every other: no machine has that many hardware threads, while starting ten
// thousand of them takes seconds).
CLI::Validator thread_count_check();
// "<what>, at most 1024 (<zero_means>; ...why)": the help of a thread-count flag.
std::string thread_count_help(const std::string& what, const std::string& zero_means);

// --model (required), --manifest, --backend, --threads, --vram-reserve-mib, --no-graphs, --no-fused-ops,
// --no-concurrent-ops.
void add_engine_options(CLI::App* command, EngineOptions& options);

// --temp, --top-k, --top-p, --min-p, the penalties and --seed.
void add_sampling_options(CLI::App* command, SamplingParams& sampling);

// "1,2,3" (commas or spaces), or the name of a file holding such a list; flag names the option in errors.
std::vector<int32_t> parse_token_list(const std::string& text, const std::string& flag = "--tokens");

}  // namespace strata::host
