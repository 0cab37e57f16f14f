// SPDX-License-Identifier: Apache-2.0
// The weights a graph declares and the values loaded for them. Every tensor is checked against
// the spec before it is accepted; a batch of tensors from one file is accepted whole or not at all.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/shape.hpp"
#include "graph/graph.hpp"

namespace fusednn {

// A tensor as read from a file or handed over by a caller, already converted to float32 when its
// dtype is one fusednn accepts ("F32", "F16", "BF16"); values is empty for any other dtype.
struct NamedTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "F16", "BF16", "I64", ...
  Shape shape;
  std::vector<float> values;
  std::string source;  // file the tensor came from, for messages ("model.safetensors")
};

class WeightStore {
 public:
  explicit WeightStore(const Graph& graph);

  // Checks every tensor (declared name, shape, accepted dtype; names PyTorch stores but inference
  // ignores, such as "bn.num_batches_tracked", are skipped) and then stores them all. Throws
  // FDNN_STATUS_WEIGHT_MISMATCH naming the first bad tensor, its shape and the expected one.
  void accept(std::vector<NamedTensor> tensors);

  // The checks accept() makes of a name and a shape, for a caller about to read values by that
  // shape: false for a name inference ignores (nothing to read); throws WEIGHT_MISMATCH for a
  // name the spec does not declare or a shape other than the declared one.
  bool check_name_and_shape(const std::string& name, const Shape& shape,
                            const std::string& source) const;

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  const std::vector<float>& values(const std::string& name) const;
  const Shape& expected_shape(const std::string& name) const;

  // Declared tensors not yet loaded, in declaration order.
  std::vector<std::string> missing() const;
  // Throws FDNN_STATUS_WEIGHT_MISMATCH naming every missing tensor (with its expected shape).
  void require_complete() const;
  // Throws FDNN_STATUS_NON_FINITE_WEIGHT naming each tensor holding NaN/Inf and its first index.
  void require_finite() const;

  const std::vector<std::string>& declared_names() const { return declared_order_; }

 private:
  [[noreturn]] void fail_undeclared(const std::string& name, const std::string& source) const;
  [[noreturn]] void fail_shape(const std::string& name, const std::string& source,
                               const Shape& shape) const;

  std::map<std::string, Shape> expected_;
  std::map<std::string, std::string> owner_layer_;  // tensor name -> "layer 'fc1' (Linear)"
  std::vector<std::string> declared_order_;
  std::map<std::string, std::vector<float>> values_;
};

}  // namespace fusednn
