#include "host/commands/engine_options.hpp"

#include <charconv>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/plugin/manifest.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"
#include "strata/backend.h"

namespace strata::host {

namespace {

// A seed is a decimal integer from 0 to 2^64-1: the conversion alone would wrap -1 and clamp 2^64 silently.
CLI::Validator seed_check() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        const bool whole = !text.empty() && error == std::errc() && stop == end;
        return whole ? "" : "'" + text + "' is not an integer from 0 to 2^64-1";
      },
      "0..2^64-1");
}

// --pcie-frac: auto (none: measured at placement) or a share from 0 to 1.
std::optional<double> pcie_fraction(const std::string& text) {
  if (text == "auto") return std::nullopt;
  double value = 0.0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !(value >= 0.0 && value <= 1.0)) {
    throw CLI::ValidationError("--pcie-frac", "'" + text + "' is neither auto nor a number from 0 to 1");
  }
  return value;
}

}  // namespace

CLI::Validator thread_count_check() { return CLI::Range(0, STRATA_MAX_THREADS); }

std::string thread_count_help(const std::string& what, const std::string& zero_means) {
  return what + ", at most " + std::to_string(STRATA_MAX_THREADS) + " (" + zero_means +
         "; a fixed limit, above any machine's hardware threads)";
}

void add_engine_options(CLI::App* command, EngineOptions& options) {
  command->add_option("-m,--model", options.model, "GGUF model (any part of a split model)")->required();
  command->add_option("--manifest", options.manifest,
                      "Plugin manifest, a JSON file of at most " + byte_size_text(kMaxManifestBytes) +
                          " (default: strata-manifest.json beside the binary)");
  command->add_option(
      "--backend", options.backend,
      "cpu, cuda or a backend plugin's name (default: the manifest's preference, else the best available)");
  command->add_option("-t,--threads", options.threads, thread_count_help("CPU threads", "0: the physical cores"))
      ->check(thread_count_check());
  command
      ->add_option("--pool-workers", options.pool_workers,
                   thread_count_help("Threads of a hybrid placement's CPU expert pool (default: --threads)",
                                     "0: the physical cores"))
      ->check(thread_count_check());
  command
      ->add_option("--cpu-poll-us", options.cpu_poll_us,
                   "How long idle CPU threads poll for their next piece of work before they sleep, in microseconds "
                   "(default 500; 0: they sleep at once, for a machine shared with other work; never polls where "
                   "the threads outnumber the cores)")
      ->check(CLI::Range(0, 1000000));
  command
      ->add_option("--cpu-pin", options.cpu_pin,
                   "1: the CPU backend's (and a hybrid placement's expert pool's) worker threads are pinned, one per "
                   "physical core, the calling thread left free; not where the threads outnumber the cores "
                   "(default 0: the system places them)")
      ->check(CLI::Range(0, 1));
  command
      ->add_option("--gpu", options.gpu,
                   "The GPU a GPU backend runs on, by index as the driver numbers them (its option device; default "
                   "0). The CPU backend ignores it")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--vram-reserve-mib", options.vram_reserve_mib,
                   "VRAM the GPU backend leaves free, in MiB (default: the manifest's vram_reserve_mib, else 512); "
                   "a model that does not fit then fails at load naming the tensor")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option(
          "--repacked-weights", options.repacked_weights,
          "1: the backends keep weights whose quant plugin offers a faster layout in it (IQ3_S as 4-bit "
          "levels: 23.6% more memory for those tensors; on the GPU 8% faster decode; on the CPU, at the avx2 and "
          "avx512 levels, ~1.7x faster decode, in memory of its own instead of the mapped file, where the host has it "
          "and 1 GiB more); 0: as in the file (default: the manifest's repacked_weights, else 1; 0 saves the VRAM "
          "for a longer context or more experts, and the CPU's memory)")
      ->check(CLI::Range(0, 1));
  command->add_option(
      "--expert-cache", options.expert_cache,
      "Hybrid expert placement (docs/experts.md): auto (the GPU's memory left after the other weights, "
      "the KV cache and --vram-reserve-mib holds the hottest experts; the rest run on the CPU expert "
      "pool), N (that many expert slots in all; 0: every expert on the pool) or off (every expert on "
      "the backend, as without placement). Default: auto on a GPU backend where the model does not fit with "
      "room to spare (else loaded whole, as without placement), off on the CPU backend unless "
      "--vram-budget-gib makes it stand in for a GPU");
  command
      ->add_option(
          "--vram-budget-gib", options.vram_budget_gib,
          "Memory the backend may use in all, in GiB: a smaller GPU than the one at hand (the CPU backend then "
          "stands in for a GPU of that size, to try placements without one)")
      ->check(CLI::PositiveNumber);
  command->add_option_function<std::string>(
      "--pcie-frac",
      [&options](const std::string& text) { options.expert_options.pcie_fraction = pcie_fraction(text); },
      "Share of a step's missed experts copied over PCIe into staging slots and run on the GPU instead of on the CPU "
      "pool, those with the most tokens first, side by side with the pool's: 0 to 1, or auto (the share that keeps "
      "both equally busy, from one token's experts timed on each when the cache is placed; one log line). Default "
      "0: the pool only (docs/experts.md)");
  command
      ->add_option("--pcie-min-tokens", options.expert_options.pcie_min_tokens,
                   "Copy every missed expert with at least this many tokens in a step (a prompt's) over PCIe and run "
                   "it on the GPU instead of on the CPU pool (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option(
          "--pcie-slots", options.expert_options.pcie_slots,
          "Staging slots on the GPU for experts copied over PCIe, per combination of the experts' tensor "
          "types, in two halves: more experts go through them a half at a time, the next half's copies beside the "
          "last half's experts (default 0: 4 x the experts a token uses)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--expert-prefetch", options.expert_options.prefetch,
                   "Per split layer of a decode step, run the next layer's router on this layer's input and copy up "
                   "to N of the experts it predicts that the next layer misses over PCIe ahead of its routing, beside "
                   "this layer's work; the next layer runs those it does choose on the GPU (default 0: off; steps of "
                   "--pcie-min-tokens tokens or more never prefetch)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--pool-thread", options.expert_options.pool_thread,
                   "1: a hybrid placement's expert pool computes a split layer's missed experts on a thread of its "
                   "own while the calling thread queues the GPU's part of the layer; 0: the calling thread queues "
                   "the GPU's part, then runs the pool (default: 1 on a GPU, 0 on the CPU standing in for one, whose "
                   "ops would take the pool's cores)")
      ->check(CLI::Range(0, 1));
  command
      ->add_option("--pool-wait-on-device", options.expert_options.device_waits_for_pool,
                   "1: with --pool-thread 1 on a GPU, the GPU waits for the pool's result itself (its copy queued "
                   "behind a device-side wait for the pool's signal, at most 60 s) while the calling thread queues "
                   "the next layer; 0: the calling thread waits for the pool, then copies its result (default 1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  command
      ->add_option("--host-experts", options.host_experts,
                   "Where a hybrid placement keeps the experts in host memory: pinned (a page-locked copy, which "
                   "the GPU's copies read directly; needs the experts' size free in host memory, with 2 GiB to "
                   "spare), mapped (the model file's mapping: no copy, but copies to the GPU go through a staging "
                   "copy) or auto (pinned where the backend and the free memory allow, else mapped)")
      ->capture_default_str();
  command->add_option("--trace-experts", options.expert_trace,
                      "Write a timeline of the hybrid placement's split layers to FILE (JSON for ui.perfetto.dev or "
                      "chrome://tracing): on the calling thread each layer's routing read, split, queueing of the "
                      "GPU's part and waits, and the pool's runs on its own lane (host-side only; docs/experts.md)");
  command->add_option("--expert-profile", options.expert_profile,
                      "A `strata profile` file: the expert cache starts with the experts it counts most often");
  command
      ->add_option("--adapt-every", options.expert_options.adapt.every,
                   "Adaptive expert cache: re-plan every N steps from decayed routing counts, copying hot experts in "
                   "beside the steps (default 0: off)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--adapt-decay", options.expert_options.adapt.decay,
                   "Adaptive expert cache: the factor each step applies to the routing counts seen so far (0 to 1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--adapt-swaps", options.expert_options.adapt.swaps,
                   "Adaptive expert cache: experts copied in at most per round")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--no-graphs{false}", options.execution.step_graphs,
                    "Run every decode step op by op instead of replaying it as a recorded graph (CUDA graphs)");
  command->add_flag("--no-fused-ops{false}", options.execution.fused_ops,
                    "Call the separate ops where the backend offers fused ones (q/k norms and rope inside attention, "
                    "the residual add with the next norm, the router's product with the routing)");
  command->add_flag("--no-normed-inputs{false}", options.execution.normed_inputs,
                    "Normalize the residual stream with an op of its own (add_rms_norm) before the projections and the "
                    "router read it, where the backend could compute the norm inside them (matmul_normed, "
                    "route_experts_normed)");
  command->add_flag("--no-concurrent-ops{false}", options.execution.concurrent_ops,
                    "Run every op after the previous one where the backend could run independent ones at once (the "
                    "q, k and v projections on several CUDA streams)");
}

void add_sampling_options(CLI::App* command, SamplingParams& sampling) {
  // Ranges are checked by check_sampling_params, which names the flag.
  command->add_option("--temp", sampling.temperature, "Temperature, >= 0 (0: greedy)")->capture_default_str();
  command->add_option("--top-k", sampling.top_k, "Keep the k most likely tokens, >= 0 (0: off)")->capture_default_str();
  command->add_option("--top-p", sampling.top_p, "Nucleus sampling mass, in (0, 1] (1: off)")->capture_default_str();
  command->add_option("--min-p", sampling.min_p, "Drop tokens below min-p x p(best), in [0, 1] (0: off)")
      ->capture_default_str();
  command->add_option("--repeat-penalty", sampling.repetition_penalty, "Repetition penalty, > 0 (1: off)")
      ->capture_default_str();
  command->add_option("--presence-penalty", sampling.presence_penalty, "Presence penalty (0: off)")
      ->capture_default_str();
  command->add_option("--frequency-penalty", sampling.frequency_penalty, "Frequency penalty (0: off)")
      ->capture_default_str();
  command
      ->add_option("--repeat-last-n", sampling.repeat_last_n,
                   "Tokens the penalties look back at, >= -1 (-1: all, 0: none)")
      ->capture_default_str();
  command->add_option("-s,--seed", sampling.seed, "Random seed, 0 to 2^64-1: the same seed gives the same output")
      ->capture_default_str()
      ->check(seed_check());
}

std::vector<int32_t> parse_token_list(const std::string& text, const std::string& flag) {
  std::string list = text;
  std::error_code error;
  if (list.find_first_not_of("0123456789, \t\n") != std::string::npos && std::filesystem::exists(text, error)) {
    list = read_user_file(text, "the token list (" + flag + ")");
  }
  for (char& c : list) {
    if (c == ',') c = ' ';
  }
  std::istringstream stream(list);
  std::vector<int32_t> tokens;
  std::string word;
  while (stream >> word) {
    size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || value < 0 || value > INT32_MAX) {
      throw Error(flag + ": '" + word + "' is not a token id (expected e.g. 1,2,3 or a file holding such a list)");
    }
    tokens.push_back(static_cast<int32_t>(value));
  }
  if (tokens.empty()) throw Error(flag + ": no token ids given");
  return tokens;
}

}  // namespace strata::host
