// SPDX-License-Identifier: Apache-2.0

#include "runtime/model_source.hpp"

#include "graph/model_file.hpp"
#include "graph/spec_parser.hpp"

namespace fusednn {

LoadedModel load_model_from_file(const std::string& path, const ResolvedOptions& options) {
  const WeightFileLimit limit = weight_file_limit(options);
  return LoadedModel(open_model_file(path, limit.bytes, limit.text), options);
}

LoadedModel load_model_from_bytes(const std::string& bytes, const ResolvedOptions& options) {
  return LoadedModel(parse_model_file(bytes, "<memory>"), options);
}

LoadedModel load_model_from_spec(const std::string& spec_json, const ResolvedOptions& options) {
  return LoadedModel(parse_model_spec(spec_json, "<memory>"), options);
}

}  // namespace fusednn
