// What a model is made from, however the caller hands it over: a file, a file's bytes or a
// spec's text, each parsed into a graph and, for a bundle, its weights. The C API names the
// source; this layer reads and parses it.
#pragma once

#include <string>

#include "graph/model_file.hpp"
#include "runtime/model.hpp"

namespace fusednn {

// The file at path (a spec or a bundle); options.max_weight_bytes bounds the read.
ModelFile model_source_from_file(const std::string& path, const ResolvedOptions& options);

// A model file's bytes held by the caller, named "<memory>" in messages.
ModelFile model_source_from_bytes(const std::string& bytes);

// A spec's JSON text; its weights come later.
ModelFile model_source_from_spec(const std::string& spec_json);

}  // namespace fusednn
