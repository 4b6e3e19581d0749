#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>

#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "host/commands/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"strata: mixture-of-experts inference engine"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags such as --log-level may follow the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")->capture_default_str();
  std::string cpu_isa;
  app.add_option("--cpu-isa", cpu_isa,
                 "CPU instruction set for every CPU kernel: auto, avx512, avx2 or scalar (same as STRATA_CPU_ISA)")
      ->check(CLI::IsMember({"auto", "avx512", "avx2", "scalar"}));
  app.parse_complete_callback([&] {
    strata::set_log_level(log_level);
    // The kernels read the choice from the environment when they first run, in every plugin alike.
    if (!cpu_isa.empty()) ::setenv("STRATA_CPU_ISA", cpu_isa.c_str(), 1);
  });

  strata::host::register_plugins_command(app);
  strata::host::register_inspect_command(app);
  strata::host::register_synth_command(app);
  strata::host::register_logits_command(app);
  strata::host::register_bench_command(app);
  strata::host::register_generate_command(app);
  strata::host::register_chat_command(app);
  strata::host::register_template_command(app);
  strata::host::register_tokenize_command(app);
  strata::host::register_detokenize_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    std::cerr << "strata: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "strata: unexpected error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
