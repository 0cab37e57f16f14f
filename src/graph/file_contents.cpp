// SPDX-License-Identifier: Apache-2.0
// Opened without blocking and checked on the open descriptor: a FIFO, a device or a socket at the
// path would otherwise block the open or the read forever (or never end), and checking the path
// before opening it leaves a window in which it can be replaced.
#include "graph/file_contents.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include "common/error.hpp"

namespace fusednn {
namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_file_contents(const std::string& path, uint64_t max_bytes,
                               const std::string& limit) {
  const Descriptor file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) {
    const int error = errno;
    if (error == EISDIR) fail(FDNN_STATUS_IO_ERROR, "'", path, "' is a directory, not a file");
    fail(FDNN_STATUS_IO_ERROR, "cannot open '", path, "': ", errno_text(error));
  }
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) {
    const int error = errno;
    fail(FDNN_STATUS_IO_ERROR, "cannot read the size of '", path, "': ", errno_text(error));
  }
  if (!S_ISREG(info.st_mode)) {
    fail(FDNN_STATUS_IO_ERROR, "'", path, "' is ", file_type_name(info.st_mode),
         ", not a regular file; fusednn reads models and weights from regular files only");
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (max_bytes != 0 && size > max_bytes) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "'", path, "' holds ", size, " bytes, more than ", max_bytes,
         limit.empty() ? std::string() : ": " + limit);
  }
  if (size > static_cast<uint64_t>(std::string().max_size())) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "'", path, "' holds ", size, " bytes, more than fit in memory");
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(file.get(), bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      fail(FDNN_STATUS_IO_ERROR, "cannot read all ", size, " bytes of '", path,
           "': ", errno_text(error));
    }
    if (got == 0) {
      fail(FDNN_STATUS_IO_ERROR, "cannot read all ", size, " bytes of '", path,
           "': it ended after ", done, " (it changed while being read)");
    }
    done += static_cast<size_t>(got);
  }
  return bytes;
}

}  // namespace fusednn
