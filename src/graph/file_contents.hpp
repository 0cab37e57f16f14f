// Whole-file reads shared by the model, safetensors and weight-directory readers.
#pragma once

#include <string>

namespace fusednn {

// The file's bytes, read with one call. Throws FDNN_STATUS_IO_ERROR naming the path when it is
// missing, unreadable, or not a regular file (a directory, a FIFO, a device: never blocks on one).
std::string read_file_contents(const std::string& path);

}  // namespace fusednn
