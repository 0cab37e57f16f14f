// SPDX-License-Identifier: Apache-2.0
// Opens whatever a user hands fdnn_model_create_from_file: a JSON spec, or a bundle (a
// safetensors file whose metadata key "fusednn.spec" holds the spec, so one file is a model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/weight_store.hpp"

namespace fusednn {

// The metadata key under which a bundle stores its spec.
constexpr const char* kBundleSpecKey = "fusednn.spec";

struct ModelFile {
  Graph graph;
  std::optional<std::vector<NamedTensor>> bundled_weights;  // set for a bundle
};

// A model file's bytes, however they arrived: sniffs the content (JSON starts with '{';
// safetensors with an 8-byte header length) and parses it. source names the bytes in messages
// (a path, or "<memory>"). Throws FDNN_STATUS_PARSE_ERROR (empty, neither format, malformed),
// FDNN_STATUS_INVALID_MODEL (a safetensors file without a spec, a bad spec).
ModelFile parse_model_file(const std::string& bytes, const std::string& source);

// Reads the file at path (FDNN_STATUS_IO_ERROR when it cannot) and parses it as above.
// max_bytes and limit: as for read_file_contents().
ModelFile open_model_file(const std::string& path, uint64_t max_bytes = 0,
                          const std::string& limit = "");

}  // namespace fusednn
