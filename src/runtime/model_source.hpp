// SPDX-License-Identifier: Apache-2.0
// A model from whatever the caller hands over: a file, a file's bytes or a spec's text, each
// parsed into a graph and, for a bundle, its weights. The C API names the source; this layer
// reads and parses it.
#pragma once

#include <string>

#include "runtime/loaded_model.hpp"
#include "runtime/resolved_options.hpp"

namespace fusednn {

// The file at path (a spec or a bundle); options.max_weight_bytes bounds the read.
LoadedModel load_model_from_file(const std::string& path, const ResolvedOptions& options);

// A model file's bytes held by the caller, named "<memory>" in messages.
LoadedModel load_model_from_bytes(const std::string& bytes, const ResolvedOptions& options);

// A spec's JSON text; its weights come later.
LoadedModel load_model_from_spec(const std::string& spec_json, const ResolvedOptions& options);

}  // namespace fusednn
