// SPDX-License-Identifier: Apache-2.0

#include "runtime/run_context.hpp"

#include <cstdint>

#include "common/caller_dtype.hpp"
#include "common/checked_math.hpp"
#include "common/error.hpp"

namespace fusednn {

namespace {

// The GPU reads a device buffer in whole elements: one not aligned to its element's size would
// fault inside a kernel (and leave the CUDA context unusable), so it is refused here.
void check_device_alignment(const void* buffer, fdnn_dtype dtype, const char* name) {
  const size_t bytes = dtype_bytes(dtype);
  const auto address = reinterpret_cast<uintptr_t>(buffer);
  if (address % bytes != 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, name, " (", buffer, ") is not aligned to the ", bytes,
         " bytes of its ", dtype_name(dtype), " elements");
  }
}

// The device path's kernels read rows of the input while other blocks already write rows of the
// output (and a 16-bit run reads and writes the caller's buffers in place of the context's), so
// buffers that share a byte would race: they are refused, naming both. The extents are those
// the run reads and writes: input_count and batch x output elements, of their dtypes.
void check_device_buffers_apart(const void* input, size_t input_count, fdnn_dtype input_dtype,
                                const void* output, size_t output_count, fdnn_dtype output_dtype) {
  const size_t input_bytes = checked_multiply(input_count, dtype_bytes(input_dtype),
                                              FDNN_STATUS_INVALID_ARGUMENT, "device_input's bytes");
  const size_t output_bytes =
      checked_multiply(output_count, dtype_bytes(output_dtype), FDNN_STATUS_INVALID_ARGUMENT,
                       "device_output's bytes");
  const auto in = reinterpret_cast<uintptr_t>(input);
  const auto out = reinterpret_cast<uintptr_t>(output);
  // Differences, not ends: an address near the top cannot wrap.
  const bool overlap = in <= out ? out - in < input_bytes : in - out < output_bytes;
  if (overlap) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "device_input (", input, ", ", input_bytes,
         " bytes) and device_output (", output, ", ", output_bytes,
         " bytes) overlap; a device run needs separate buffers");
  }
}

}  // namespace

RunContext::RunContext(std::shared_ptr<const PreparedModel> prepared)
    : prepared_(std::move(prepared)), execution_(prepared_->backend->create_context()) {}

void RunContext::run(int64_t batch, const float* input, size_t input_count, float* output,
                     size_t output_capacity) {
  check_run_arguments(*prepared_, batch, input, input_count, output, output_capacity);
  execution_->run_host(batch, input, output);
}

void RunContext::run_device(int64_t batch, const float* input, size_t input_count, float* output,
                            size_t output_capacity, void* stream) {
  check_run_arguments(*prepared_, batch, input, input_count, output, output_capacity);
  check_device_alignment(input, FDNN_DTYPE_FLOAT32, "device_input");
  check_device_alignment(output, FDNN_DTYPE_FLOAT32, "device_output");
  check_device_buffers_apart(input, input_count, FDNN_DTYPE_FLOAT32, output, output_elements(batch),
                             FDNN_DTYPE_FLOAT32);
  execution_->run_device(batch, input, output, stream);
}

size_t RunContext::output_elements(int64_t batch) const {
  // check_run_arguments has checked that this product fits.
  return static_cast<size_t>(batch * element_count(prepared_->plan->output_shape));
}

void RunContext::check_typed(const TypedRun& run) const {
  if (run.input == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "input is NULL");
  if (run.output == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "output is NULL");
  check_run_arguments(*prepared_, run.batch, run.input, run.input_count, run.output,
                      run.output_capacity, "elements");
}

void RunContext::run_typed(const TypedRun& run) {
  check_typed(run);
  if (run.input_dtype == FDNN_DTYPE_FLOAT32 && run.output_dtype == FDNN_DTYPE_FLOAT32) {
    execution_->run_host(run.batch, static_cast<const float*>(run.input),
                         static_cast<float*>(run.output));
    return;
  }
  if (execution_->run_host_typed(run.batch, run.input, run.input_dtype, run.output,
                                 run.output_dtype)) {
    return;
  }
  // The backend runs on the caller's memory (the CPU): convert around its float32 run, in
  // buffers sized for max_batch once, so that later runs allocate nothing.
  const Plan& plan = *prepared_->plan;
  // check_typed has checked that these products fit.
  const auto input_count = static_cast<size_t>(run.batch * element_count(plan.input_shape));
  const auto output_count = static_cast<size_t>(run.batch * element_count(plan.output_shape));
  const auto for_max_batch = [&](const Shape& shape) {
    return static_cast<size_t>(checked_multiply(prepared_->max_batch, element_count(shape),
                                                FDNN_STATUS_OUT_OF_MEMORY,
                                                "the conversion buffer for options.max_batch"));
  };
  const float* input = static_cast<const float*>(run.input);
  if (run.input_dtype != FDNN_DTYPE_FLOAT32) {
    if (typed_input_.empty()) {
      typed_input_.resize(for_max_batch(plan.input_shape));
    }
    widen_to_float(run.input, run.input_dtype, typed_input_.data(), input_count);
    input = typed_input_.data();
  }
  float* output = static_cast<float*>(run.output);
  if (run.output_dtype != FDNN_DTYPE_FLOAT32) {
    if (typed_output_.empty()) {
      typed_output_.resize(for_max_batch(plan.output_shape));
    }
    output = typed_output_.data();
  }
  execution_->run_host(run.batch, input, output);
  if (run.output_dtype != FDNN_DTYPE_FLOAT32) {
    narrow_from_float(output, run.output, run.output_dtype, output_count);
  }
}

void RunContext::run_device_typed(const TypedRun& run, void* stream) {
  check_typed(run);
  check_device_alignment(run.input, run.input_dtype, "device_input");
  check_device_alignment(run.output, run.output_dtype, "device_output");
  check_device_buffers_apart(run.input, run.input_count, run.input_dtype, run.output,
                             output_elements(run.batch), run.output_dtype);
  if (run.input_dtype == FDNN_DTYPE_FLOAT32 && run.output_dtype == FDNN_DTYPE_FLOAT32) {
    execution_->run_device(run.batch, static_cast<const float*>(run.input),
                           static_cast<float*>(run.output), stream);
    return;
  }
  execution_->run_device_typed(run.batch, run.input, run.input_dtype, run.output, run.output_dtype,
                               stream);
}

}  // namespace fusednn
