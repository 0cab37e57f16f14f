// SPDX-License-Identifier: Apache-2.0
// What the runtime asks of a backend: hold a plan's weights where it runs, and hand out
// execution contexts that own all scratch memory one run in flight needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/kernel_choice.hpp"
#include "common/precision.hpp"
#include "fusednn/fusednn.h"

namespace fusednn {

class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;
  // Arguments are checked by the runtime: 1 <= batch <= max_batch, buffers large enough.
  // One call at a time per context.
  virtual void run_host(int64_t batch, const float* input, float* output) = 0;
  // Device buffers on the caller's stream (a cudaStream_t; null means the context's own stream,
  // waited for). Backends whose memory is the host's throw FDNN_STATUS_UNSUPPORTED.
  virtual void run_device(int64_t batch, const float* input, float* output, void* stream);

  // Host buffers in the caller's dtypes (checked fdnn_dtype values, not both FLOAT32), converted
  // by the backend as it stages them. Returns false when the backend has no staging to convert
  // into: the runtime then converts around run_host in buffers of its own.
  virtual bool run_host_typed(int64_t batch, const void* input, fdnn_dtype input_dtype,
                              void* output, fdnn_dtype output_dtype);
  // Device buffers in the caller's dtypes (not both FLOAT32; that is run_device), converted on
  // the device on the caller's stream. Backends whose memory is the host's throw
  // FDNN_STATUS_UNSUPPORTED as run_device does.
  virtual void run_device_typed(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                void* output, fdnn_dtype output_dtype, void* stream);
  // How run_host moves the input and output (FDNN_HOST_IO_STAGED or FDNN_HOST_IO_MAPPED).
  // Backends whose memory is the host's throw FDNN_STATUS_UNSUPPORTED as run_device does.
  virtual fdnn_host_io host_io() const;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual fdnn_device device() const = 0;
  // The precision the matrix work actually runs in: never lower than asked for, and FP32 for
  // backends that compute everything in fp32 (which meets every precision's error bound).
  virtual Precision effective_precision() const { return Precision::FP32; }
  virtual size_t weight_bytes() const = 0;
  // Bytes each context allocates, known before any context exists.
  virtual size_t context_bytes() const = 0;
  virtual std::unique_ptr<ExecutionContext> create_context() const = 0;
  // How a run of `batch` samples (1 to max_batch) would run: the kernel form of every lowered
  // step and why, in plan order, covering every step once. Launches nothing.
  virtual BackendExplanation explain(int64_t batch) const = 0;
};

}  // namespace fusednn
