#include "runtime/model_source.hpp"

#include "graph/spec_parser.hpp"

namespace fusednn {

ModelFile model_source_from_file(const std::string& path, const ResolvedOptions& options) {
  const WeightFileLimit limit = weight_file_limit(options);
  return open_model_file(path, limit.bytes, limit.text);
}

ModelFile model_source_from_bytes(const std::string& bytes) {
  return parse_model_file(bytes, "<memory>");
}

ModelFile model_source_from_spec(const std::string& spec_json) {
  ModelFile file;
  file.graph = parse_model_spec(spec_json, "<memory>");
  return file;
}

}  // namespace fusednn
