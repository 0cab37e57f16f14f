// SPDX-License-Identifier: Apache-2.0
// Helpers of the tests that look inside the CUDA backend (linked against the library's objects,
// not libfusednn.so): the backend a model prepared.
#pragma once

#include <memory>

#include "api/handles.hpp"
#include "backends/cuda/exec/cuda_executor.hpp"

namespace fusednn_cuda_test {

// The model's CUDA backend (preparing the model if it is not yet); null for a CPU model.
inline fusednn::cuda::CudaBackend* backend_of(fdnn_model* model) {
  const std::shared_ptr<const fusednn::PreparedModel> prepared = model->model.prepare();
  return dynamic_cast<fusednn::cuda::CudaBackend*>(prepared->backend.get());
}

}  // namespace fusednn_cuda_test
