// SPDX-License-Identifier: Apache-2.0

#include "backends/backend.hpp"

#include "common/error.hpp"

namespace fusednn {

void ExecutionContext::run_device(int64_t, const float*, float*, void*) {
  fail(FDNN_STATUS_UNSUPPORTED,
       "device pointers need a model created with FDNN_DEVICE_CUDA; "
       "this model runs on the CPU: use fdnn_context_run with host buffers");
}

bool ExecutionContext::run_host_typed(int64_t, const void*, fdnn_dtype, void*, fdnn_dtype) {
  return false;
}

void ExecutionContext::run_device_typed(int64_t, const void*, fdnn_dtype, void*, fdnn_dtype,
                                        void*) {
  fail(FDNN_STATUS_UNSUPPORTED,
       "device pointers need a model created with FDNN_DEVICE_CUDA; "
       "this model runs on the CPU: use fdnn_context_run_typed with host buffers");
}

fdnn_host_io ExecutionContext::host_io() const {
  fail(FDNN_STATUS_UNSUPPORTED,
       "this model runs on the CPU, whose kernels read and write the caller's host buffers "
       "directly: it has no host I/O path to report (fdnn_model_options::host_io is for GPU "
       "models)");
}

}  // namespace fusednn
