#include "host/commands/input_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/util/error.hpp"

namespace strata::host {

std::string read_input_file(const std::string& path) {
  // A directory opens as a stream on Linux and reads as empty: say what it is instead.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) throw Error(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw Error(path + ": cannot read");
  return text;
}

}  // namespace strata::host
