// SPDX-License-Identifier: Apache-2.0
// Cold start by phase, for finding what a first model in a process waits on: create from file
// (parse + read the weights), context create (the backend is built: plan, weight upload, kernel
// attributes, buffers), the first run at batch 1 on the host path, and a second run. The CUDA
// context is made before timing, as the cold-start figure assumes. Run it once per
// process per model; compare CUDA_MODULE_LOADING=LAZY (the default) with EAGER, which loads every
// kernel with the context, to see what module loading costs.
//
//   cold_start MODEL.safetensors [REPEATS=5] [MAX_BATCH=1] [PATH=host]
//
// MAX_BATCH: the model's max_batch (what its context sizes its memory for); PATH: the first runs
// (batch 1) on the host path ("host", fdnn_context_run) or the device path ("device",
// fdnn_context_run_device on device buffers allocated before timing, the context's own stream).
//
// Prints one JSON object per line: the first round (first in the process), then the repeats.
// Linked against a library built with -DCMAKE_CXX_FLAGS=-DFUSEDNN_LOAD_TIMELINE, the library
// also prints each load phase's microseconds to stderr (src/common/load_timeline.hpp).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"

namespace {

void check(fdnn_status status, const char* what) {
  if (status != FDNN_STATUS_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, fdnn_status_string(status),
                 fdnn_last_error_message());
    std::exit(1);
  }
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [REPEATS] [MAX_BATCH] [host|device]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const long long max_batch = argc > 3 ? std::atoll(argv[3]) : 1;
  const std::string run_path = argc > 4 ? argv[4] : "host";
  if (max_batch < 1 || (run_path != "host" && run_path != "device")) {
    std::fprintf(stderr, "MAX_BATCH must be positive and PATH host or device\n");
    return 2;
  }
  if (cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA context\n");
    return 1;
  }
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  for (int round = 0; round <= repeats; ++round) {
    fdnn_model_options options;
    check(fdnn_model_options_init(&options, sizeof options), "options");
    options.device = FDNN_DEVICE_CUDA;
    options.max_batch = max_batch;
    auto start = std::chrono::steady_clock::now();
    fdnn_model* model = nullptr;
    check(fdnn_model_create_from_file(path, &options, &model), "create_from_file");
    const double create_ms = ms_since(start);
    start = std::chrono::steady_clock::now();
    fdnn_context* context = nullptr;
    check(fdnn_context_create(model, &context), "context_create");
    const double context_ms = ms_since(start);
    fdnn_shape in_shape, out_shape;
    check(fdnn_model_input_shape(model, &in_shape), "input_shape");
    check(fdnn_model_output_shape(model, &out_shape), "output_shape");
    size_t in_count = 1, out_count = 1;
    for (int d = 0; d < in_shape.rank; ++d) in_count *= static_cast<size_t>(in_shape.dims[d]);
    for (int d = 0; d < out_shape.rank; ++d) out_count *= static_cast<size_t>(out_shape.dims[d]);
    std::vector<float> input(in_count, 0.5f), output(out_count);
    void* device_input = nullptr;
    void* device_output = nullptr;
    if (run_path == "device") {
      if (cudaMalloc(&device_input, in_count * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&device_output, out_count * sizeof(float)) != cudaSuccess ||
          cudaMemcpy(device_input, input.data(), in_count * sizeof(float),
                     cudaMemcpyHostToDevice) != cudaSuccess) {
        std::fprintf(stderr, "device buffers\n");
        return 1;
      }
    }
    double run_ms[2];
    for (double& ms : run_ms) {
      start = std::chrono::steady_clock::now();
      if (run_path == "device") {
        check(fdnn_context_run_device(context, 1, static_cast<const float*>(device_input), in_count,
                                      static_cast<float*>(device_output), out_count, nullptr),
              "run_device");
      } else {
        check(fdnn_context_run(context, 1, input.data(), in_count, output.data(), out_count),
              "run");
      }
      ms = ms_since(start);
    }
    cudaFree(device_input);
    cudaFree(device_output);
    start = std::chrono::steady_clock::now();
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
    const double destroy_ms = ms_since(start);
    std::printf(
        "{\"cold_start\": \"%s\", \"max_batch\": %lld, \"path\": \"%s\", \"module_loading\": "
        "\"%s\", "
        "\"round\": %d, \"create_ms\": %.3f, "
        "\"context_ms\": %.3f, \"first_run_ms\": %.3f, \"second_run_ms\": %.3f, "
        "\"total_to_first_result_ms\": %.3f, \"destroy_ms\": %.3f}\n",
        path, max_batch, run_path.c_str(), loading != nullptr ? loading : "default", round,
        create_ms, context_ms, run_ms[0], run_ms[1], create_ms + context_ms + run_ms[0],
        destroy_ms);
  }
  return 0;
}
