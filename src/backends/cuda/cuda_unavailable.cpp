// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's entry points in a build without CUDA (FUSEDNN_WITH_CUDA=OFF): no device.
#include "backends/cuda/cuda_backend.hpp"

#include "common/error.hpp"

namespace fusednn {

namespace {
constexpr const char* kNotBuilt =
    "this libfusednn was built without the CUDA backend (configure with -DFUSEDNN_WITH_CUDA=ON "
    "where nvcc is installed)";
}  // namespace

int cuda_device_count() noexcept { return 0; }

std::string cuda_unavailable_reason(int) noexcept { return kNotBuilt; }

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Plan>, int64_t, int, bool,
                                           Precision, fdnn_host_io, const std::string&) {
  fail(FDNN_STATUS_UNSUPPORTED, kNotBuilt);
}

std::string read_cuda_selection_overrides() { return ""; }

}  // namespace fusednn
