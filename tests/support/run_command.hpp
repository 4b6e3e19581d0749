// Runs a command through /bin/sh for CLI tests and captures what it printed and how it ended.
#pragma once

#include <filesystem>
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

// A file's bytes ("" where it cannot be read).
std::string read_file(const std::filesystem::path& path);

// Quotes a path or argument for the shell.
std::string shell_quote(const std::string& text);

// Whether this is an AddressSanitizer build (scripts/test.sh --sanitize): it reserves terabytes of address space
// at start, so `ulimit -v` cannot bound its processes, and it holds freed memory back (quarantine), so resident
// memory does not fall when memory is freed. LeakSanitizer reports leaks at exit instead.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// "ulimit -v KIB; " to bound a command's memory, or nothing in an AddressSanitizer build.
inline std::string memory_limit_prefix(long kib) {
  return kAddressSanitizer ? "" : "ulimit -v " + std::to_string(kib) + "; ";
}

}  // namespace strata::test
