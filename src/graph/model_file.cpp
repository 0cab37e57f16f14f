// SPDX-License-Identifier: Apache-2.0

#include "graph/model_file.hpp"

#include <cstdint>

#include "common/error.hpp"
#include "graph/file_contents.hpp"
#include "graph/little_endian.hpp"
#include "graph/safetensors_file.hpp"
#include "graph/spec_parser.hpp"

namespace fusednn {
namespace {

// A safetensors file starts with a little-endian header length that fits in the file, followed by
// the header's '{'. JSON text never matches: its bytes 1 to 7 are printable, so read as a length
// they exceed any real file size.
bool looks_like_safetensors(const std::string& bytes) {
  if (bytes.size() < 9) return false;
  const uint64_t header_length = load_le_u64(reinterpret_cast<const unsigned char*>(bytes.data()));
  return header_length <= bytes.size() - 8 && bytes[8] == '{';
}

// Whether the first character after an optional UTF-8 byte order mark and whitespace is '{'.
bool looks_like_json(const std::string& bytes) {
  size_t i = bytes.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (i < bytes.size() &&
         (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\r' || bytes[i] == '\n')) {
    ++i;
  }
  return i < bytes.size() && bytes[i] == '{';
}

ModelFile open_bundle(const std::string& bytes, const std::string& source) {
  SafetensorsContent content = parse_safetensors(bytes, source);
  const auto spec = content.metadata.find(kBundleSpecKey);
  if (spec == content.metadata.end()) {
    fail(FDNN_STATUS_INVALID_MODEL, "'", source,
         "' is a safetensors file with no model spec: its metadata has no \"", kBundleSpecKey,
         "\" key. Open the JSON spec instead and load this file as its weights, or make a bundle "
         "by saving the spec's text under that key, e.g. safetensors.torch.save_file(state_dict, "
         "path, metadata={\"",
         kBundleSpecKey, "\": open(\"model.json\").read()})");
  }
  ModelFile model;
  model.graph = parse_model_spec(spec->second, source + " (metadata \"" + kBundleSpecKey + "\")");
  model.bundled_weights = std::move(content.tensors);
  return model;
}

}  // namespace

ModelFile parse_model_file(const std::string& bytes, const std::string& source) {
  if (bytes.empty()) {
    fail(FDNN_STATUS_PARSE_ERROR, "'", source,
         "' is empty; expected a JSON model spec or a safetensors bundle");
  }
  if (looks_like_safetensors(bytes)) return open_bundle(bytes, source);
  if (looks_like_json(bytes)) {
    ModelFile model;
    model.graph = parse_model_spec(bytes, source);
    return model;
  }
  // Neither: let the safetensors reader say what is wrong (truncated, bad length, ...).
  try {
    return open_bundle(bytes, source);
  } catch (const StatusError& e) {
    if (e.status() != FDNN_STATUS_PARSE_ERROR) throw;
    fail(FDNN_STATUS_PARSE_ERROR, "'", source,
         "' is neither a JSON model spec (it does not start with '{') nor a safetensors bundle: ",
         e.what());
  }
}

ModelFile open_model_file(const std::string& path, uint64_t max_bytes, const std::string& limit) {
  return parse_model_file(read_file_contents(path, max_bytes, limit), path);
}

}  // namespace fusednn
