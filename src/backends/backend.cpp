#include "backends/backend.hpp"

#include "common/error.hpp"

namespace fusednn {

void ExecutionContext::run_device(int64_t, const float*, float*, void*) {
  fail(FDNN_STATUS_UNSUPPORTED, "device pointers need a model created with FDNN_DEVICE_CUDA; "
       "this model runs on the CPU: use fdnn_context_run with host buffers");
}

}  // namespace fusednn
