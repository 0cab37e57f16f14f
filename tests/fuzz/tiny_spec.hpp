// SPDX-License-Identifier: Apache-2.0
// The small spec the weight harnesses load into: every weight kind of tests/fixtures/formats
// tiny_mlp.json (a Linear with bias, a BatchNorm1d's four tensors, a Linear without bias).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fusednn_fuzz {

inline constexpr const char* kTinySpec = R"({"fusednn": 1, "name": "tiny_mlp",
  "input": {"shape": [4], "dtype": "float32"},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 4, "out_features": 3},
    {"type": "BatchNorm1d", "name": "bn", "num_features": 3},
    {"type": "ReLU"},
    {"type": "Linear", "name": "fc2", "in_features": 3, "out_features": 2, "bias": false}]})";

// Its tensors with their shapes, then names it does not declare: rank -1 for those it refuses,
// -2 for one PyTorch stores and the weight store skips without complaint.
struct TinyTensor {
  const char* name;
  int32_t rank;
  int64_t dims[2];
};
inline constexpr TinyTensor kTinyTensors[] = {{"fc1.weight", 2, {3, 4}},
                                              {"fc1.bias", 1, {3}},
                                              {"bn.weight", 1, {3}},
                                              {"bn.bias", 1, {3}},
                                              {"bn.running_mean", 1, {3}},
                                              {"bn.running_var", 1, {3}},
                                              {"fc2.weight", 2, {2, 3}},
                                              {"fc2.bias", -1, {}},
                                              {"bn.num_batches_tracked", -2, {}},
                                              {"", -1, {}}};
inline constexpr size_t kTinyTensorCount = sizeof kTinyTensors / sizeof kTinyTensors[0];

inline int64_t element_count(const TinyTensor& tensor) {
  int64_t count = 1;
  for (int32_t i = 0; i < tensor.rank; ++i) count *= tensor.dims[i];
  return tensor.rank < 0 ? 0 : count;
}

}  // namespace fusednn_fuzz
