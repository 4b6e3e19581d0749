#include "core/util/user_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/util/error.hpp"

namespace strata {
namespace {

// Why a path that is not a regular file cannot be read.
std::string not_regular_reason(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a folder";
  const char* kind = S_ISFIFO(mode)   ? "a FIFO (named pipe)"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : nullptr;
  return kind ? std::string("it is ") + kind + ", not a regular file" : "it is not a regular file";
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RegularFile open_regular_file(const std::filesystem::path& path, std::string_view what) {
  const auto fail = [&](const std::string& reason) {
    return Error(path.string() + ": cannot read " + std::string(what) + ": " + reason);
  };
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; for a regular file it changes nothing.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw fail(std::strerror(errno));
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) throw fail(std::strerror(errno));
  if (!S_ISREG(status.st_mode)) throw fail(not_regular_reason(status.st_mode));
  return {std::move(fd), static_cast<uint64_t>(status.st_size)};
}

std::string read_user_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes) {
  const RegularFile file = open_regular_file(path, what);
  const auto fail = [&](const std::string& reason) {
    return Error(path.string() + ": cannot read " + std::string(what) + ": " + reason);
  };
  if (file.size > max_bytes) {
    throw fail("it holds " + std::to_string(file.size) + " bytes, more than the " + byte_size_text(max_bytes) +
               " allowed");
  }
  std::string text(file.size, '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t count = ::read(file.fd.get(), text.data() + done, text.size() - done);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) throw fail(std::strerror(errno));
    if (count == 0) break;  // the file shrank since fstat
    done += static_cast<size_t>(count);
  }
  text.resize(done);
  return text;
}

std::string byte_size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace strata
