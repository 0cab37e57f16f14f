// SPDX-License-Identifier: Apache-2.0

#include "graph/weight_store.hpp"

#include <cmath>
#include <set>
#include <utility>

#include "common/error.hpp"

namespace fusednn {
namespace {

// How many declared names an "unexpected tensor" message lists before it says "... (N more)".
constexpr size_t kListedNames = 12;

bool is_accepted_dtype(const std::string& dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

// Tensors PyTorch keeps in a state_dict that inference has no use for: BatchNorm's
// "<name>.num_batches_tracked" counter.
bool is_ignored_name(const std::string& name) {
  static const std::string kCounter = "num_batches_tracked";
  if (name.size() < kCounter.size()) return false;
  const size_t start = name.size() - kCounter.size();
  return name.compare(start, kCounter.size(), kCounter) == 0 &&
         (start == 0 || name[start - 1] == '.');
}

std::string source_of(const NamedTensor& tensor) {
  return tensor.source.empty() ? std::string("the tensors given") : tensor.source;
}

// The C-order multi-index of a flat index: "[0, 17]".
std::string multi_index(const Shape& shape, size_t flat) {
  Shape index(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    const auto extent = static_cast<size_t>(shape[i]);
    index[i] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  return to_string(index);
}

}  // namespace

WeightStore::WeightStore(const Graph& graph) {
  for (const Layer& layer : graph.layers) {
    const std::string owner =
        "layer '" + layer.name + "' (" +
        (layer.type_name.empty() ? layer_kind_name(layer.kind) : layer.type_name) + ")";
    for (const WeightSlot& slot : layer.weights) {
      if (!expected_.emplace(slot.tensor_name, slot.shape).second) {
        fail(FDNN_STATUS_INVALID_MODEL, "tensor '", slot.tensor_name, "' of ", owner,
             " is also declared by ", owner_layer_.at(slot.tensor_name));
      }
      owner_layer_.emplace(slot.tensor_name, owner);
      declared_order_.push_back(slot.tensor_name);
    }
  }
}

void WeightStore::accept(std::vector<NamedTensor> tensors) {
  // Check the whole batch first, so that a bad tensor leaves the store as it was.
  std::vector<NamedTensor*> kept;
  std::set<std::string> seen;
  for (NamedTensor& tensor : tensors) {
    const auto expected = expected_.find(tensor.name);
    if (expected == expected_.end()) {
      if (is_ignored_name(tensor.name)) continue;
      fail_undeclared(tensor.name, source_of(tensor));
    }
    const std::string& owner = owner_layer_.at(tensor.name);
    if (!seen.insert(tensor.name).second) {
      fail(FDNN_STATUS_WEIGHT_MISMATCH, "tensor '", tensor.name, "' appears twice in ",
           source_of(tensor));
    }
    if (!is_accepted_dtype(tensor.dtype)) {
      fail(FDNN_STATUS_WEIGHT_MISMATCH, "tensor '", tensor.name, "' in ", source_of(tensor),
           " has dtype ", tensor.dtype.empty() ? "(none)" : tensor.dtype,
           ", which fusednn does not accept; ", owner,
           " needs floating point: F32, F16 or BF16 (convert it before saving)");
    }
    if (tensor.shape != expected->second) {
      fail_shape(tensor.name, source_of(tensor), tensor.shape);
    }
    if (static_cast<int64_t>(tensor.values.size()) != element_count(tensor.shape)) {
      fail(FDNN_STATUS_WEIGHT_MISMATCH, "tensor '", tensor.name, "' in ", source_of(tensor),
           " holds ", tensor.values.size(), " values, but its shape ", to_string(tensor.shape),
           " needs ", element_count(tensor.shape));
    }
    kept.push_back(&tensor);
  }
  for (NamedTensor* tensor : kept) values_[tensor->name] = std::move(tensor->values);
}

void WeightStore::fail_undeclared(const std::string& name, const std::string& source) const {
  std::string declared;
  for (size_t i = 0; i < declared_order_.size() && i < kListedNames; ++i) {
    declared += (i ? ", " : "") + declared_order_[i];
  }
  if (declared_order_.size() > kListedNames) {
    declared += ", ... (" + std::to_string(declared_order_.size() - kListedNames) + " more)";
  }
  if (declared_order_.empty()) declared = "no tensors";
  fail(FDNN_STATUS_WEIGHT_MISMATCH, "unexpected tensor '", name, "' in ", source,
       "; the spec declares: ", declared);
}

void WeightStore::fail_shape(const std::string& name, const std::string& source,
                             const Shape& shape) const {
  const Shape& want = expected_.at(name);
  const bool transposed =
      want.size() == 2 && shape.size() == 2 && shape[0] == want[1] && shape[1] == want[0];
  fail(FDNN_STATUS_WEIGHT_MISMATCH, "tensor '", name, "' in ", source, " has shape ",
       to_string(shape), " but ", owner_layer_.at(name), " expects ", to_string(want),
       transposed ? " (it looks transposed: fusednn expects PyTorch's layout)" : "");
}

bool WeightStore::check_name_and_shape(const std::string& name, const Shape& shape,
                                       const std::string& source) const {
  const auto expected = expected_.find(name);
  if (expected == expected_.end()) {
    if (is_ignored_name(name)) return false;
    fail_undeclared(name, source);
  }
  if (shape != expected->second) fail_shape(name, source, shape);
  return true;
}

const std::vector<float>& WeightStore::values(const std::string& name) const {
  const auto found = values_.find(name);
  if (found == values_.end()) {
    fail(expected_.count(name) ? FDNN_STATUS_INVALID_STATE : FDNN_STATUS_INVALID_ARGUMENT,
         "weight '", name, "' ", expected_.count(name) ? "is not loaded" : "is not declared");
  }
  return found->second;
}

const Shape& WeightStore::expected_shape(const std::string& name) const {
  const auto found = expected_.find(name);
  if (found == expected_.end()) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "the spec declares no tensor named '", name, "'");
  }
  return found->second;
}

std::vector<std::string> WeightStore::missing() const {
  std::vector<std::string> names;
  for (const std::string& name : declared_order_) {
    if (!has(name)) names.push_back(name);
  }
  return names;
}

void WeightStore::require_complete() const {
  const std::vector<std::string> absent = missing();
  if (absent.empty()) return;
  std::string list;
  for (const std::string& name : absent) {
    if (!list.empty()) list += "; ";
    list += "'" + name + "' " + to_string(expected_.at(name)) + " for " + owner_layer_.at(name);
  }
  fail(FDNN_STATUS_WEIGHT_MISMATCH, absent.size(), " of ", declared_order_.size(),
       " weight tensors are missing: ", list);
}

void WeightStore::require_finite() const {
  std::string report;
  for (const std::string& name : declared_order_) {
    const auto found = values_.find(name);
    if (found == values_.end()) continue;
    const std::vector<float>& values = found->second;
    size_t bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i])) {
        if (bad++ == 0) first = i;
      }
    }
    if (bad == 0) continue;
    const float value = values[first];
    if (!report.empty()) report += "; ";
    report += "'" + name + "' has " + std::to_string(bad) + " non-finite value" +
              (bad == 1 ? "" : "s") + ", the first (" +
              (std::isnan(value) ? "NaN"
               : value > 0       ? "+Inf"
                                 : "-Inf") +
              ") at index " + multi_index(expected_.at(name), first);
  }
  if (!report.empty()) fail(FDNN_STATUS_NON_FINITE_WEIGHT, "non-finite weights: ", report);
}

}  // namespace fusednn
