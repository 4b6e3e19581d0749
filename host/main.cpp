#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/plugin/plugin_host.hpp"
#include "core/server/serve_config.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "host/commands/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"strata: mixture-of-experts inference engine", "strata"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags such as --log-level may follow the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warn, error or off")->capture_default_str();
  std::string cpu_isa;
  app.add_option("--cpu-isa", cpu_isa,
                 "CPU instruction set of every CPU kernel: auto, avx512, avx2 or scalar (a level this CPU lacks falls "
                 "back to its best); wins over STRATA_CPU_ISA, which wins over the backend-cpu manifest option \"isa\" "
                 "(default: the best level this CPU runs)");
  app.parse_complete_callback([&] {
    strata::set_log_level(log_level);
    // Before any plugin loads or kernel runs: plugins get it through their host services.
    strata::request_cpu_isa(cpu_isa);
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
  strata::host::register_profile_command(app);
  strata::host::register_plan_command(app);
  strata::host::register_serve_command(app);

  try {
    // serve --config FILE becomes the flags FILE stands for; CLI11 takes the arguments last first.
    std::vector<std::string> args = strata::server::expand_serve_config({argv + 1, argv + argc});
    std::reverse(args.begin(), args.end());
    app.parse(args);
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
