// SPDX-License-Identifier: Apache-2.0
// The safetensors reader: any bytes give tensors and metadata or a PARSE_ERROR with a message;
// tensors it accepts then go through the weight store's checks against a small spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "fuzz_checks.hpp"
#include "graph/safetensors_file.hpp"
#include "graph/spec_parser.hpp"
#include "graph/weight_store.hpp"
#include "tiny_spec.hpp"

namespace {

void expect_status(const fusednn::StatusError& error, fdnn_status allowed, const char* call) {
  if (error.status() != allowed) fusednn_fuzz::broken_promise(call, error.what());
  if (std::string(error.what()).empty()) fusednn_fuzz::broken_promise(call, "no message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fusednn::Graph graph =
      fusednn::parse_model_spec(fusednn_fuzz::kTinySpec, "tiny_spec.hpp");
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fusednn::SafetensorsContent content;
  try {
    content = fusednn::parse_safetensors(bytes, "<fuzz>");
  } catch (const fusednn::StatusError& error) {
    expect_status(error, FDNN_STATUS_PARSE_ERROR, "parse_safetensors");
    return 0;
  }
  try {
    fusednn::WeightStore store(graph);
    store.accept(std::move(content.tensors));
    if (store.missing().empty()) store.require_finite();
  } catch (const fusednn::StatusError& error) {
    if (error.status() != FDNN_STATUS_NON_FINITE_WEIGHT) {
      expect_status(error, FDNN_STATUS_WEIGHT_MISMATCH, "WeightStore::accept");
    }
  }
  return 0;
}
