// SPDX-License-Identifier: Apache-2.0
// Per-call time of one model through the C API with no Python in the loop: the device path
// (caller's stream, rotating device buffers, CUDA events around back-to-back calls) and the host
// path (wall clock around synchronous calls). Medians of repeated runs.
//
//   device_latency MODEL.safetensors BATCH [CUDA_GRAPHS=1] [BUFFER_SETS=8] [PRECISION=fp32]
//                  [device]
//
// BUFFER_SETS=1 runs every call on the same buffers (a captured graph is never re-pointed).
// "device" skips the host path (host_path_us -1): at millions of rows its pageable copies take
// seconds a run.
//
// Prints one JSON object per line.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
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

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s MODEL BATCH [CUDA_GRAPHS] [BUFFER_SETS] [fp32|tf32|fp16|bf16] "
                 "[device]\n",
                 argv[0]);
    return 2;
  }
  const char* path = argv[1];
  const int64_t batch = std::atoll(argv[2]);
  const int graphs = argc > 3 ? std::atoi(argv[3]) : 1;
  const int sets = argc > 4 ? std::max(1, std::min(8, std::atoi(argv[4]))) : 8;
  const std::string precision = argc > 5 ? argv[5] : "fp32";
  const bool host_path = !(argc > 6 && std::string(argv[6]) == "device");

  check_cuda(cudaFree(nullptr), "cudaFree(0)");  // the CUDA context exists before timing
  fdnn_model_options options;
  check(fdnn_model_options_init(&options, sizeof options), "options");
  options.device = FDNN_DEVICE_CUDA;
  options.max_batch = batch;
  options.cuda_graphs = graphs;
  options.precision = precision == "tf32"   ? FDNN_PRECISION_TF32
                      : precision == "fp16" ? FDNN_PRECISION_FP16
                      : precision == "bf16" ? FDNN_PRECISION_BF16
                                            : FDNN_PRECISION_FP32;
  fdnn_model* model = nullptr;
  check(fdnn_model_create_from_file(path, &options, &model), "create");
  fdnn_shape in_shape, out_shape;
  check(fdnn_model_input_shape(model, &in_shape), "input shape");
  check(fdnn_model_output_shape(model, &out_shape), "output shape");
  size_t in_count = static_cast<size_t>(batch), out_count = static_cast<size_t>(batch);
  for (int i = 0; i < in_shape.rank; ++i) in_count *= static_cast<size_t>(in_shape.dims[i]);
  for (int i = 0; i < out_shape.rank; ++i) out_count *= static_cast<size_t>(out_shape.dims[i]);
  fdnn_context* context = nullptr;
  check(fdnn_context_create(model, &context), "context");

  constexpr int kSets = 8;
  std::mt19937 random(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> host_in(in_count), host_out(out_count);
  float* device_in[kSets];
  float* device_out[kSets];
  for (float& v : host_in) v = normal(random);  // one draw for every set: timing only
  for (int k = 0; k < kSets; ++k) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_in[k]), in_count * sizeof(float)),
               "malloc");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_out[k]), out_count * sizeof(float)),
               "malloc");
    check_cuda(
        cudaMemcpy(device_in[k], host_in.data(), in_count * sizeof(float), cudaMemcpyHostToDevice),
        "copy");
  }
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");

  auto device_call = [&](int i) {
    check(fdnn_context_run_device(context, batch, device_in[i % sets], in_count,
                                  device_out[i % sets], out_count, stream),
          "run_device");
  };
  const int calls = batch <= 64 ? 2000 : batch <= 4096 ? 500 : 50;
  for (int i = 0; i < calls / 4; ++i) device_call(i);
  check_cuda(cudaStreamSynchronize(stream), "sync");
  std::vector<double> device_us, submit_us;
  for (int repeat = 0; repeat < 15; ++repeat) {
    check_cuda(cudaEventRecord(start, stream), "record");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) device_call(i);
    const auto t1 = std::chrono::steady_clock::now();
    check_cuda(cudaEventRecord(stop, stream), "record");
    check_cuda(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    device_us.push_back(1000.0 * ms / calls);
    submit_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }

  std::vector<double> host_us;
  if (host_path) {
    const int host_calls = batch <= 64 ? 1000 : batch <= 4096 ? 200 : 20;
    auto host_call = [&] {
      check(fdnn_context_run(context, batch, host_in.data(), in_count, host_out.data(), out_count),
            "run");
    };
    for (int i = 0; i < host_calls / 4; ++i) host_call();
    for (int repeat = 0; repeat < 9; ++repeat) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < host_calls; ++i) host_call();
      const auto t1 = std::chrono::steady_clock::now();
      host_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / host_calls);
    }
  }
  std::printf(
      "{\"model\": \"%s\", \"batch\": %lld, \"cuda_graphs\": %d, \"buffer_sets\": %d, "
      "\"precision\": \"%s\", \"device_path_us\": %.3f, \"device_path_submit_us\": %.3f, "
      "\"host_path_us\": %.3f}\n",
      path, static_cast<long long>(batch), graphs, sets, precision.c_str(), median(device_us),
      median(submit_us), host_path ? median(host_us) : -1.0);

  fdnn_context_destroy(context);
  fdnn_model_destroy(model);
  for (int k = 0; k < kSets; ++k) {
    cudaFree(device_in[k]);
    cudaFree(device_out[k]);
  }
  cudaStreamDestroy(stream);
  return 0;
}
