// A file a command writes its result to. It is opened before the work starts, so that a path that cannot
// be written (a missing folder, no permission) fails at once with the system's reason instead of after the
// computing; a regular file left unfinished by an error is removed rather than left looking like a result.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace strata {

class OutputFile {
 public:
  // Creates or truncates path; throws strata::Error "<path>: cannot write <what>: <reason>".
  OutputFile(std::filesystem::path path, std::string what);
  // Removes the file unless finish() succeeded (a device or FIFO is only closed).
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t bytes);
  // Closes the file; throws when the last bytes could not be stored.
  void finish();

 private:
  [[noreturn]] void fail(const std::string& reason) const;

  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
  bool regular_ = false;
  bool finished_ = false;
};

}  // namespace strata
