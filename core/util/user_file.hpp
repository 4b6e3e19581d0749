// Files a user names (on the command line or in a manifest). Only regular files are read: opening a FIFO
// blocks until a writer comes, and a device such as /dev/zero never ends. Every failure is a strata::Error
// "<path>: cannot read <what>: <reason>", the reason being the system's text or what the path is instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace strata {

// Text a command reads whole (a prompt, a text to tokenize, a token list) holds at most this many bytes.
inline constexpr uint64_t kMaxUserTextBytes = uint64_t{256} << 20;

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct RegularFile {
  FileDescriptor fd;
  uint64_t size;
};

// Opens path for reading without blocking (a FIFO opens at once) and refuses anything but a regular file,
// naming what it is ("a folder", "a FIFO (named pipe)", "a character device", ...).
RegularFile open_regular_file(const std::filesystem::path& path, std::string_view what);

// The whole content of a regular file of at most max_bytes (a larger one is refused with both sizes).
std::string read_user_file(const std::filesystem::path& path, std::string_view what,
                           uint64_t max_bytes = kMaxUserTextBytes);

// "256 MiB", "1 MiB", "512 KiB" or "100 bytes": a limit as the messages and the help text name it.
std::string byte_size_text(uint64_t bytes);

}  // namespace strata
