#include "support/run_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::test {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

CommandResult run_command(const std::string& command) {
  const auto folder = std::filesystem::temp_directory_path() / ("strata-cmd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const auto out_path = folder / "out";
  const auto err_path = folder / "err";
  const std::string full = command + " >" + shell_quote(out_path.string()) + " 2>" + shell_quote(err_path.string());

  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(full.c_str());
  CommandResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // sh reports a child killed by signal N as exit status 128+N.
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code > 128) {
      result.signal = result.exit_code - 128;
      result.exit_code = -1;
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  result.out = read_file(out_path);
  result.err = read_file(err_path);
  std::filesystem::remove_all(folder);
  return result;
}

}  // namespace strata::test
