// SPDX-License-Identifier: Apache-2.0

#include "runtime/resolved_options.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>

#include "backends/cuda/cuda_backend.hpp"
#include "common/error.hpp"
#include "common/raw_enum.hpp"

namespace fusednn {

static_assert(static_cast<int32_t>(Precision::FP32) == FDNN_PRECISION_FP32 &&
                  static_cast<int32_t>(Precision::TF32) == FDNN_PRECISION_TF32 &&
                  static_cast<int32_t>(Precision::FP16) == FDNN_PRECISION_FP16 &&
                  static_cast<int32_t>(Precision::BF16) == FDNN_PRECISION_BF16,
              "fusednn::Precision mirrors fdnn_precision value for value");

fdnn_model_options default_model_options() {
  fdnn_model_options defaults{};
  defaults.struct_size = sizeof defaults;
  defaults.max_batch = 1024;
  defaults.device = FDNN_DEVICE_CPU;
  defaults.device_id = 0;
  defaults.cpu_threads = 0;
  defaults.cuda_graphs = 1;
  defaults.precision = FDNN_PRECISION_FP32;
  defaults.max_workspace_bytes = FDNN_DEFAULT_MAX_WORKSPACE_BYTES;
  defaults.max_weight_bytes = FDNN_DEFAULT_MAX_WEIGHT_BYTES;
  defaults.host_io = FDNN_HOST_IO_AUTO;
  return defaults;
}

ResolvedOptions resolve_options(const fdnn_model_options* options) {
  ResolvedOptions resolved;
  if (options == nullptr) return resolved;
  // A caller built against an older header passes a shorter struct: read only what it has.
  fdnn_model_options given = default_model_options();
  if (options->struct_size < offsetof(fdnn_model_options, max_batch)) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.struct_size is ", options->struct_size,
         "; call fdnn_model_options_init(&options, sizeof options) before setting fields");
  }
  std::memcpy(&given, options, std::min(options->struct_size, sizeof given));
  // A size that ends inside a field added later holds none of it: that field keeps its default.
  const fdnn_model_options defaults = default_model_options();
  const auto holds = [&](size_t offset, size_t size) {
    return options->struct_size >= offset + size;
  };
  if (!holds(offsetof(fdnn_model_options, precision), sizeof given.precision)) {
    given.precision = defaults.precision;
  }
  if (!holds(offsetof(fdnn_model_options, max_workspace_bytes), sizeof given.max_workspace_bytes)) {
    given.max_workspace_bytes = defaults.max_workspace_bytes;
  }
  if (!holds(offsetof(fdnn_model_options, max_weight_bytes), sizeof given.max_weight_bytes)) {
    given.max_weight_bytes = defaults.max_weight_bytes;
  }
  if (!holds(offsetof(fdnn_model_options, host_io), sizeof given.host_io)) {
    given.host_io = defaults.host_io;
  }
  if (given.max_batch < 1 || given.max_batch > FDNN_MAX_BATCH_LIMIT) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.max_batch is ", given.max_batch,
         "; it must be 1 to FDNN_MAX_BATCH_LIMIT (", FDNN_MAX_BATCH_LIMIT, ")");
  }
  if (given.cpu_threads < 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.cpu_threads is ", given.cpu_threads,
         "; use 0 for one per hardware thread or a positive count");
  }
  if (given.device_id < 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.device_id is ", given.device_id);
  }
  switch (raw_enum_value(given.device)) {
    case FDNN_DEVICE_CPU: resolved.device = FDNN_DEVICE_CPU; break;
    case FDNN_DEVICE_AUTO:  // the GPU when this build has the CUDA backend and it sees one
      resolved.device =
          cuda_unavailable_reason(given.device_id).empty() ? FDNN_DEVICE_CUDA : FDNN_DEVICE_CPU;
      break;
    case FDNN_DEVICE_CUDA: {
      const std::string reason = cuda_unavailable_reason(given.device_id);
      if (!reason.empty()) {
        fail(FDNN_STATUS_UNSUPPORTED, "options.device is FDNN_DEVICE_CUDA but ", reason,
             "; use FDNN_DEVICE_CPU or FDNN_DEVICE_AUTO");
      }
      resolved.device = FDNN_DEVICE_CUDA;
      break;
    }
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, "options.device has unknown value ",
           raw_enum_value(given.device));
  }
  if (resolved.device == FDNN_DEVICE_CUDA) {
    resolved.cuda_selection_overrides = read_cuda_selection_overrides();
  }
  resolved.max_batch = given.max_batch;
  resolved.max_workspace_bytes = given.max_workspace_bytes;
  resolved.max_weight_bytes = given.max_weight_bytes;
  resolved.device_id = given.device_id;
  resolved.cpu_threads = given.cpu_threads;
  if (given.cuda_graphs != 0 && given.cuda_graphs != 1) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.cuda_graphs is ", given.cuda_graphs,
         "; use 1 (capture CUDA graphs) or 0 (launch directly)");
  }
  resolved.cuda_graphs = given.cuda_graphs == 1;
  const int32_t precision = raw_enum_value(given.precision);
  switch (precision) {
    case FDNN_PRECISION_FP32:
    case FDNN_PRECISION_TF32:
    case FDNN_PRECISION_FP16:
    case FDNN_PRECISION_BF16: resolved.precision = static_cast<Precision>(precision); break;
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, "options.precision has unknown value ", precision,
           "; use FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16 or "
           "FDNN_PRECISION_BF16");
  }
  // Checked on every device, so that a program tested on the CPU does not fail on a GPU.
  const int32_t host_io = raw_enum_value(given.host_io);
  switch (host_io) {
    case FDNN_HOST_IO_AUTO:
    case FDNN_HOST_IO_STAGED:
    case FDNN_HOST_IO_MAPPED: resolved.host_io = static_cast<fdnn_host_io>(host_io); break;
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, "options.host_io has unknown value ", host_io,
           "; use FDNN_HOST_IO_AUTO, FDNN_HOST_IO_STAGED or FDNN_HOST_IO_MAPPED");
  }
  return resolved;
}

int32_t usable_cuda_device_count() { return static_cast<int32_t>(cuda_device_count()); }

WeightFileLimit weight_file_limit(const ResolvedOptions& options) {
  constexpr uint64_t kHeaderBytes = uint64_t{100} << 20;
  WeightFileLimit limit;
  if (options.max_weight_bytes == 0) return limit;
  const uint64_t most = std::numeric_limits<uint64_t>::max();
  limit.bytes = options.max_weight_bytes > most - kHeaderBytes
                    ? most
                    : options.max_weight_bytes + kHeaderBytes;
  limit.text = "options.max_weight_bytes (" + std::to_string(options.max_weight_bytes) +
               ") and 100 MiB of header; raise the limit to load it";
  return limit;
}

}  // namespace fusednn
