// Reader for a directory of per-tensor files: "<name>.bin" (raw little-endian float32, as
// numpy's tofile writes) or "<name>.txt" (one value per line, as numpy.savetxt writes). The files
// carry no shape, so each is sized against the shape the spec expects.
#pragma once

#include <string>
#include <vector>

#include "graph/weight_store.hpp"

namespace fusednn {

// Reads every ".bin" / ".txt" file in directory. A file whose name the store does not declare is
// returned too (the store then reports it as extra). Throws FDNN_STATUS_IO_ERROR or
// FDNN_STATUS_PARSE_ERROR (wrong byte count, unparsable number) naming the file.
std::vector<NamedTensor> read_weight_directory(const std::string& directory,
                                               const WeightStore& expected);

}  // namespace fusednn
