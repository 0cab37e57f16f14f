// SPDX-License-Identifier: Apache-2.0
// Reader for a directory of per-tensor files: "<name>.bin" (raw little-endian float32, as
// numpy's tofile writes) or "<name>.txt" (one value per line, as numpy.savetxt writes). The files
// carry no shape, so each is sized against the shape the spec expects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/weight_store.hpp"

namespace fusednn {

// Reads every ".bin" / ".txt" file in directory (not its subdirectories); the tensor name is the
// file name without the extension. A declared tensor gets the shape the store expects; a file
// whose name the store does not declare is returned too, shaped [count], so that the store
// reports it as extra. Throws, naming the file: FDNN_STATUS_IO_ERROR (no such directory,
// unreadable file), FDNN_STATUS_PARSE_ERROR (a .bin size that is not a multiple of 4, a .txt
// token that is not a number), FDNN_STATUS_WEIGHT_MISMATCH (a declared tensor whose file holds
// the wrong number of values, or both a .bin and a .txt for one tensor).
// max_bytes (0: no limit) bounds the float32 bytes of all the files' values together, and each
// .txt file's text; a file over it is refused before it is read (a .txt file's values while it is
// parsed), with FDNN_STATUS_OUT_OF_MEMORY naming the file, the bytes left and `limit` (what sets
// max_bytes).
std::vector<NamedTensor> read_weight_directory(const std::string& directory,
                                               const WeightStore& expected, uint64_t max_bytes = 0,
                                               const std::string& limit = "");

}  // namespace fusednn
