#include "core/util/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/error.hpp"

namespace strata {

OutputFile::OutputFile(std::filesystem::path path, std::string what) : path_(std::move(path)), what_(std::move(what)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail(std::strerror(errno));
  struct stat status {};
  regular_ = ::fstat(fd_, &status) == 0 && S_ISREG(status.st_mode);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && regular_) ::unlink(path_.c_str());
}

void OutputFile::write(const void* data, size_t bytes) {
  const auto* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t count = ::write(fd_, next, bytes);
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) fail(std::strerror(errno));
    next += count;
    bytes -= static_cast<size_t>(count);
  }
}

void OutputFile::finish() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(std::strerror(errno));
  finished_ = true;
}

void OutputFile::fail(const std::string& reason) const {
  throw Error(path_.string() + ": cannot write " + what_ + ": " + reason);
}

}  // namespace strata
