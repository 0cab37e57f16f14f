// SPDX-License-Identifier: Apache-2.0
// The caller's fdnn_model_options, checked and resolved: defaults applied to fields an older
// caller's struct lacks, AUTO turned into a device, limits turned into what loads may read.
#pragma once

#include <cstdint>
#include <string>

#include "common/precision.hpp"
#include "fusednn/fusednn.h"

namespace fusednn {

// Options with defaults applied and the device resolved.
struct ResolvedOptions {
  int64_t max_batch = 1024;
  fdnn_device device = FDNN_DEVICE_CPU;
  int32_t device_id = 0;
  int32_t cpu_threads = 0;
  bool cuda_graphs = true;
  Precision precision = Precision::FP32;  // as asked for: an upper bound on the error
  uint64_t max_workspace_bytes = FDNN_DEFAULT_MAX_WORKSPACE_BYTES;  // 0: no limit
  uint64_t max_weight_bytes = FDNN_DEFAULT_MAX_WEIGHT_BYTES;        // 0: no limit
  fdnn_host_io host_io = FDNN_HOST_IO_AUTO;  // GPU only; a checked fdnn_host_io value
  // The CUDA backend's debugging overrides, read once here (read_cuda_selection_overrides).
  std::string cuda_selection_overrides;
};

// Every field at its documented default, struct_size the full size (fdnn_model_options_init).
fdnn_model_options default_model_options();

// Reads the caller's struct up to its struct_size, checks every field, resolves AUTO.
ResolvedOptions resolve_options(const fdnn_model_options* options);

// The number of CUDA devices this build can run on (0 without the CUDA backend or a GPU).
int32_t usable_cuda_device_count();

// The largest safetensors file (a bundle or weights) a load reads under max_weight_bytes: the
// limit plus the header's 100 MiB, which the safetensors format allows at most; 0 (no limit)
// without one. WeightFileLimit::text names the option for messages.
struct WeightFileLimit {
  uint64_t bytes = 0;
  std::string text;
};
WeightFileLimit weight_file_limit(const ResolvedOptions& options);

}  // namespace fusednn
