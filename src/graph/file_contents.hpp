// SPDX-License-Identifier: Apache-2.0
// Whole-file reads shared by the model, safetensors and weight-directory readers.
#pragma once

#include <cstdint>
#include <string>

namespace fusednn {

// The file's bytes, read with one call. Throws FDNN_STATUS_IO_ERROR naming the path when it is
// missing, unreadable, or not a regular file (a directory, a FIFO, a device: never blocks on one).
// A file larger than max_bytes (when not 0) is refused before it is read, with
// FDNN_STATUS_OUT_OF_MEMORY and a message that ends with `limit` (what sets max_bytes).
std::string read_file_contents(const std::string& path, uint64_t max_bytes = 0,
                               const std::string& limit = "");

}  // namespace fusednn
