// SPDX-License-Identifier: Apache-2.0
// Reader for the safetensors format (as safetensors.torch.save_file writes it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/weight_store.hpp"

namespace fusednn {

struct SafetensorsContent {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// F32, F16 and BF16 tensors are converted to float32; any other dtype keeps its name and gets no
// values (the weight store then refuses it by name). Throws FDNN_STATUS_IO_ERROR (missing or
// unreadable file) or FDNN_STATUS_PARSE_ERROR (empty or truncated file, header length past the
// end, bad header JSON, unknown dtype, offsets out of range, overlapping or not matching the
// dtype and shape), each naming the path and what is wrong.
// max_bytes and limit: as for read_file_contents().
SafetensorsContent read_safetensors(const std::string& path, uint64_t max_bytes = 0,
                                    const std::string& limit = "");

// The same for a file already in memory; source names it in messages.
SafetensorsContent parse_safetensors(const std::string& bytes, const std::string& source);

}  // namespace fusednn
