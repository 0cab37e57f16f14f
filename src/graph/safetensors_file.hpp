// Reader for the safetensors format (as safetensors.torch.save_file writes it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/weight_store.hpp"

namespace fusednn {

struct SafetensorsContent {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// Throws FDNN_STATUS_IO_ERROR (missing or unreadable file) or FDNN_STATUS_PARSE_ERROR (empty or
// truncated file, header length past the end, bad header JSON, offsets out of range), each
// naming the path and what is wrong.
SafetensorsContent read_safetensors(const std::string& path);

}  // namespace fusednn
