#include "graph/file_contents.hpp"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>

#include "common/error.hpp"

namespace fusednn {

std::string read_file_contents(const std::string& path) {
  std::error_code status_error;
  const std::filesystem::file_status status = std::filesystem::status(path, status_error);
  if (std::filesystem::is_directory(status)) {
    fail(FDNN_STATUS_IO_ERROR, "'", path, "' is a directory, not a file");
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    const std::string reason = std::generic_category().message(errno);
    fail(FDNN_STATUS_IO_ERROR, "cannot open '", path, "': ", reason);
  }
  std::error_code size_error;
  const std::uintmax_t size = std::filesystem::file_size(path, size_error);
  if (size_error) {
    fail(FDNN_STATUS_IO_ERROR, "cannot read the size of '", path, "': ", size_error.message());
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size != 0 && std::fread(bytes.data(), 1, bytes.size(), file.get()) != bytes.size()) {
    fail(FDNN_STATUS_IO_ERROR, "cannot read all ", size, " bytes of '", path, "'");
  }
  return bytes;
}

}  // namespace fusednn
