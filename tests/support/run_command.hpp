// Runs a command through /bin/sh for CLI tests and captures what it printed and how it ended.
#pragma once

#include <string>

namespace strata::test {

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, if any
  std::string out;     // stdout
  std::string err;     // stderr
  double seconds = 0.0;
};

CommandResult run_command(const std::string& command);

// Quotes a path or argument for the shell.
std::string shell_quote(const std::string& text);

}  // namespace strata::test
