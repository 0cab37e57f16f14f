// SPDX-License-Identifier: Apache-2.0
// The JSON spec parser: any text gives a graph or a PARSE_ERROR / INVALID_MODEL with a message;
// a graph it accepts declares weights the weight store can be built from.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "fuzz_checks.hpp"
#include "graph/spec_parser.hpp"
#include "graph/weight_store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const fusednn::Graph graph = fusednn::parse_model_spec(text, "<fuzz>");
    const fusednn::WeightStore store(graph);
    (void)store.missing();
  } catch (const fusednn::StatusError& error) {
    if (error.status() != FDNN_STATUS_PARSE_ERROR && error.status() != FDNN_STATUS_INVALID_MODEL) {
      fusednn_fuzz::broken_promise("parse_model_spec: undocumented status", error.what());
    }
    if (std::string(error.what()).empty()) {
      fusednn_fuzz::broken_promise("parse_model_spec", "refused with no message");
    }
  }
  return 0;
}
