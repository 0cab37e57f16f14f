// SPDX-License-Identifier: Apache-2.0
// The CUDA backend as the runtime sees it: how many GPUs there are, why one cannot be used, and
// the factory. Plain C++ (no CUDA header), so the runtime compiles the same with CUDA on or off;
// a build without CUDA links cuda_unavailable.cpp instead, which reports no device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/backend.hpp"
#include "common/precision.hpp"
#include "planner/plan.hpp"

namespace fusednn {

// Usable CUDA devices; 0 when the library was built without CUDA, when no driver is installed
// or when no GPU is visible. Never throws.
int cuda_device_count() noexcept;

// Why device `device_id` cannot run models ("this libfusednn was built without the CUDA
// backend", "no CUDA device is visible: ..."), or "" when it can. Never throws.
std::string cuda_unavailable_reason(int device_id) noexcept;

// Uploads the plan's weights to GPU `device_id` once and returns the backend; each context it
// creates owns a stream, a workspace for max_batch, pinned staging and its captured graphs.
// cuda_graphs: capture each run into a CUDA graph per context, path and batch size.
// precision: the precision the caller allows (the backend's effective_precision() says what runs).
// selection_overrides: the debugging overrides of kernel selection as
// read_cuda_selection_overrides() returned them when the model was created.
// host_io: how host-buffer runs move the input and output (fdnn_model_options::host_io).
// Throws FDNN_STATUS_UNSUPPORTED without a usable device, FDNN_STATUS_OUT_OF_MEMORY /
// FDNN_STATUS_DEVICE_ERROR on CUDA failures (nothing is leaked).
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Plan> plan, int64_t max_batch,
                                           int device_id, bool cuda_graphs, Precision precision,
                                           fdnn_host_io host_io,
                                           const std::string& selection_overrides);

// FUSEDNN_CUDA_OVERRIDES's value ("" when unset), read when a model for the GPU is created and
// checked then (cuda/selection_overrides.hpp; docs/cuda-kernels.md). Throws
// FDNN_STATUS_INVALID_ARGUMENT naming a pair the backend cannot take.
std::string read_cuda_selection_overrides();

}  // namespace fusednn
