// SPDX-License-Identifier: Apache-2.0
// What planning and launchers need to know about the GPU, and the debugging overrides of kernel
// selection (selection_overrides.hpp), read once when the backend is created.
#pragma once

#include <cstddef>

#include "backends/cuda/platform/selection_overrides.hpp"

namespace fusednn::cuda {

struct DeviceInfo {
  int ordinal = 0;
  int major = 0;  // compute capability
  int minor = 0;
  int sm_count = 1;
  size_t shared_per_block_optin = 48 * 1024;  // the most one block may ask for
  size_t shared_per_sm = 48 * 1024;
  bool integrated = false;               // shares the host's DRAM (Jetson)
  bool host_register = false;            // cudaHostRegister is supported
  bool host_register_read_only = false;  // ... with cudaHostRegisterReadOnly
  SelectionOverrides overrides;
};

}  // namespace fusednn::cuda
