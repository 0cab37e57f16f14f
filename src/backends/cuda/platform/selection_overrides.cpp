// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/platform/selection_overrides.hpp"

#include <cstring>
#include <string>

#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

constexpr const char* kVariable = kSelectionOverridesVariable;
// Longer than any list of every key; a bound on what is read from the environment.
constexpr size_t kMaxLength = 4096;

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

[[noreturn]] void refuse(const std::string& pair, const char* expected) {
  fail(FDNN_STATUS_INVALID_ARGUMENT, kVariable, ": cannot take '", pair, "': ", expected,
       " (docs/cuda-kernels.md lists the overrides)");
}

bool parse_bool(const std::string& pair, const std::string& value) {
  if (value == "0") return false;
  if (value == "1") return true;
  refuse(pair, "the value is 0 or 1");
}

Forced parse_forced(const std::string& pair, const std::string& value) {
  if (value == "0") return Forced::Off;
  if (value == "1") return Forced::On;
  if (value == "auto") return Forced::Auto;
  refuse(pair, "the value is 0, 1 or auto");
}

// "CxRxC": three positive counts of at most two digits each.
bool is_tile(const std::string& value) {
  int counts = 0;
  size_t digits = 0;
  for (const char c : value) {
    if (c >= '0' && c <= '9') {
      if (++digits > 2) return false;
    } else if (c == 'x' && digits > 0) {
      ++counts;
      digits = 0;
    } else {
      return false;
    }
  }
  return counts == 2 && digits > 0;
}

void apply(const std::string& pair, SelectionOverrides* o) {
  const size_t equals = pair.find('=');
  if (equals == std::string::npos) refuse(pair, "a pair is key=value");
  const std::string key = trimmed(pair.substr(0, equals));
  const std::string value = trimmed(pair.substr(equals + 1));
  if (key == "fp32_tensor_cores") {
    o->fp32_tensor_cores = parse_forced(pair, value);
  } else if (key == "tensor_cores") {
    o->reduced_tensor_cores = parse_bool(pair, value);
  } else if (key == "small_batch_tensor_cores") {
    if (value == "1") {
      o->reduced_tensor_cores_every_batch = true;
    } else if (value == "auto") {
      o->reduced_tensor_cores_every_batch = false;
    } else {
      refuse(pair, "the value is 1 or auto");
    }
  } else if (key == "implicit_gemm") {
    o->implicit_gemm = parse_forced(pair, value);
  } else if (key == "cublaslt") {
    o->cublaslt = parse_bool(pair, value);
  } else if (key == "cublaslt_half_operands") {
    o->cublaslt_half_operands = parse_bool(pair, value);
  } else if (key == "fused_conv") {
    o->fused_conv = parse_bool(pair, value);
  } else if (key == "split_mlp") {
    o->split_mlp = parse_forced(pair, value);
  } else if (key == "fold_row_ops") {
    o->fold_row_ops = parse_bool(pair, value);
  } else if (key == "small_batch_linear") {
    if (value == "0") {
      o->small_batch_linear = SmallBatchLinearMode::Off;
    } else if (value == "1") {
      o->small_batch_linear = SmallBatchLinearMode::Always;
    } else if (value == "unicast") {
      o->small_batch_linear = SmallBatchLinearMode::Unicast;
    } else if (value == "auto") {
      o->small_batch_linear = SmallBatchLinearMode::Auto;
    } else {
      refuse(pair, "the value is 0, 1, unicast or auto");
    }
  } else if (key == "small_batch_mlp") {
    if (value == "block") {
      o->small_batch_mlp = SmallBatchMlpForms::BlockOnly;
    } else if (value == "cluster") {
      o->small_batch_mlp = SmallBatchMlpForms::ClusterOnly;
    } else if (value == "auto") {
      o->small_batch_mlp = SmallBatchMlpForms::Both;
    } else {
      refuse(pair, "the value is block, cluster or auto");
    }
  } else if (key == "host_zero_copy") {
    o->host_zero_copy = parse_forced(pair, value);
  } else if (key == "tensor_core_form") {
    if (value == "shared") {
      o->shared_tile_tensor_cores_only = true;
    } else if (value == "auto") {
      o->shared_tile_tensor_cores_only = false;
    } else {
      refuse(pair, "the value is shared or auto");
    }
  } else if (key == "wgmma") {
    o->warpgroup = parse_forced(pair, value);
  } else if (key == "single_launch") {
    o->conv_net_single_launch = parse_forced(pair, value);
  } else if (key == "conv_net_whole_tail") {
    o->conv_net_whole_tail = parse_bool(pair, value);
  } else if (key == "conv_tile") {
    if (value == "auto") {
      o->conv_tile.clear();
    } else if (is_tile(value)) {
      o->conv_tile = value;
    } else {
      refuse(pair, "the value is a tile such as 8x2x2 (channels x rows x columns) or auto");
    }
  } else {
    refuse(pair, "no such key");
  }
}

}  // namespace

SelectionOverrides parse_selection_overrides(const char* text) {
  SelectionOverrides overrides;
  if (text == nullptr) return overrides;
  const size_t length = strnlen(text, kMaxLength + 1);
  if (length > kMaxLength) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, kVariable, " is longer than ", kMaxLength, " characters");
  }
  const std::string all(text, length);
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    const std::string pair = trimmed(all.substr(start, end - start));
    if (!pair.empty()) apply(pair, &overrides);
    start = end + 1;
  }
  return overrides;
}

}  // namespace fusednn::cuda
