// SPDX-License-Identifier: Apache-2.0
// 07_cuda_stream: run on device buffers, queued on the caller's CUDA stream, with no copies.
//
// fdnn_context_run_device() takes device pointers and a cudaStream_t. It queues the model's work
// on that stream and returns without waiting, so it composes with the caller's own copies and
// kernels: here, for each of four batches, a host-to-device copy, the model, and a
// device-to-host copy are queued back to back on one stream, and the host waits once at the end.
// Then the same model runs with a NULL stream: the context's own stream, and the call waits.
//
// The network is the one of 00_hello_c, whose results are worked out by hand:
//   fc1 = Linear(3 -> 2)  weight [[1, 2, 3], [-1, 0, 1]]  bias [0.5, -1];  ReLU;
//   fc2 = Linear(2 -> 2)  weight [[1, 1], [2, -1]]        bias [0, 0.25]
// and every output is compared with the same formula written as a loop here.
//
// The sample builds with or without the CUDA toolkit. Without it (FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME
// undefined) it can only say so and skip. At run time it skips when fdnn_cuda_device_count() is
// 0: a CPU-only build of libfusednn, or no usable GPU. A skip prints a line starting with "SKIP:"
// and exits 0; a mismatch or an error exits 1.
#include <fusednn/fusednn.h>

#include <cmath>
#include <cstdio>
#include <vector>

#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)
#include <cuda_runtime.h>
#endif

namespace {

int library_failure(const char* call, fdnn_status status) {
  std::fprintf(stderr, "FAIL: %s returned %s: %s\n", call, fdnn_status_string(status),
               fdnn_last_error_message());
  return 1;
}

#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)

constexpr int kInputs = 3;
constexpr int kOutputs = 2;

const char kSpec[] = R"({
  "fusednn": 1,
  "name": "hello",
  "input": {"shape": [3]},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 2},
    {"type": "ReLU"},
    {"type": "Linear", "name": "fc2", "in_features": 2, "out_features": 2}
  ]
})";

const float kFc1Weight[2][3] = {{1, 2, 3}, {-1, 0, 1}};
const float kFc1Bias[2] = {0.5f, -1.0f};
const float kFc2Weight[2][2] = {{1, 1}, {2, -1}};
const float kFc2Bias[2] = {0.0f, 0.25f};

void reference(const float* x, float* y) {
  float hidden[2];
  for (int h = 0; h < 2; ++h) {
    float sum = kFc1Bias[h];
    for (int i = 0; i < kInputs; ++i) sum += kFc1Weight[h][i] * x[i];
    hidden[h] = sum > 0 ? sum : 0;
  }
  for (int o = 0; o < kOutputs; ++o)
    y[o] = kFc2Bias[o] + kFc2Weight[o][0] * hidden[0] + kFc2Weight[o][1] * hidden[1];
}

// Reports a failed CUDA runtime call with its error text; true when the call succeeded.
bool cuda_ok(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "FAIL: %s: %s (%s)\n", call, cudaGetErrorString(error),
               cudaGetErrorName(error));
  return false;
}
#define CUDA_OK(call) cuda_ok((call), #call)

// Frees whatever the sample allocated, in every exit path.
struct Resources {
  fdnn_model* model = nullptr;
  fdnn_context* context = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<void*> device_buffers;
  std::vector<void*> pinned_buffers;
  ~Resources() {
    if (stream) cudaStreamSynchronize(stream);
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
    for (void* buffer : device_buffers) cudaFree(buffer);
    for (void* buffer : pinned_buffers) cudaFreeHost(buffer);
    if (stream) cudaStreamDestroy(stream);
  }
  float* device_floats(size_t count) {
    void* buffer = nullptr;
    if (!CUDA_OK(cudaMalloc(&buffer, count * sizeof(float)))) return nullptr;
    device_buffers.push_back(buffer);
    return static_cast<float*>(buffer);
  }
  float* pinned_floats(size_t count) {
    void* buffer = nullptr;
    if (!CUDA_OK(cudaMallocHost(&buffer, count * sizeof(float)))) return nullptr;
    pinned_buffers.push_back(buffer);
    return static_cast<float*>(buffer);
  }
};

// Input feature f of sample s of batch b: -3 to 3 by 1/2.
float input_value(int b, int s, int f) {
  return static_cast<float>((b * 5 + s * 3 + f * 7) % 13 - 6) / 2;
}

int count_mismatches(const char* what, const float* input, const float* output, int batch) {
  int mismatches = 0;
  for (int s = 0; s < batch; ++s) {
    float want[kOutputs];
    reference(input + s * kInputs, want);
    for (int o = 0; o < kOutputs; ++o) {
      if (std::fabs(output[s * kOutputs + o] - want[o]) > 1e-6f * (1 + std::fabs(want[o]))) {
        if (mismatches < 5) {
          std::fprintf(stderr, "%s: sample %d output %d = %g, expected %g\n", what, s, o,
                       output[s * kOutputs + o], want[o]);
        }
        ++mismatches;
      }
    }
  }
  std::printf("%s: %d samples, %s\n", what, batch, mismatches ? "MISMATCH" : "ok");
  return mismatches;
}

int run_on_gpu() {
  Resources r;
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.device = FDNN_DEVICE_CUDA;
  options.device_id = 0;
  options.max_batch = 64;

  fdnn_status status = fdnn_model_create_from_spec(kSpec, sizeof kSpec - 1, &options, &r.model);
  if (status != FDNN_STATUS_OK) return library_failure("fdnn_model_create_from_spec", status);
  const int64_t w1_shape[] = {2, 3}, b1_shape[] = {2}, w2_shape[] = {2, 2}, b2_shape[] = {2};
  struct {
    const char* name;
    const void* data;
    const int64_t* shape;
    int32_t rank;
  } const weights[] = {{"fc1.weight", kFc1Weight, w1_shape, 2},
                       {"fc1.bias", kFc1Bias, b1_shape, 1},
                       {"fc2.weight", kFc2Weight, w2_shape, 2},
                       {"fc2.bias", kFc2Bias, b2_shape, 1}};
  for (const auto& w : weights) {
    status = fdnn_model_set_weight(r.model, w.name, FDNN_DTYPE_FLOAT32, w.data, w.shape, w.rank);
    if (status != FDNN_STATUS_OK) return library_failure("fdnn_model_set_weight", status);
  }
  // The context owns the scratch memory (and, with cuda_graphs, the captured graphs).
  status = fdnn_context_create(r.model, &r.context);
  if (status != FDNN_STATUS_OK) return library_failure("fdnn_context_create", status);

  // The caller's stream, on the model's device. Non-blocking: it does not wait for stream 0.
  if (!CUDA_OK(cudaSetDevice(options.device_id))) return 1;
  if (!CUDA_OK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking))) return 1;

  constexpr int kBatches = 4;
  const int batch_sizes[kBatches] = {1, 7, 32, 64};
  float* host_in[kBatches];
  float* host_out[kBatches];
  float* device_in[kBatches];
  float* device_out[kBatches];
  for (int b = 0; b < kBatches; ++b) {
    const size_t n_in = static_cast<size_t>(batch_sizes[b]) * kInputs;
    const size_t n_out = static_cast<size_t>(batch_sizes[b]) * kOutputs;
    host_in[b] = r.pinned_floats(n_in);
    host_out[b] = r.pinned_floats(n_out);
    device_in[b] = r.device_floats(n_in);
    device_out[b] = r.device_floats(n_out);
    if (!host_in[b] || !host_out[b] || !device_in[b] || !device_out[b]) return 1;
    for (int s = 0; s < batch_sizes[b]; ++s)
      for (int f = 0; f < kInputs; ++f) host_in[b][s * kInputs + f] = input_value(b, s, f);
    for (size_t i = 0; i < n_out; ++i) host_out[b][i] = NAN;  // poisoned: must be overwritten
  }

  // Queue everything on the one stream: copy in, run, copy out, for each batch in turn.
  for (int b = 0; b < kBatches; ++b) {
    const size_t n_in = static_cast<size_t>(batch_sizes[b]) * kInputs;
    const size_t n_out = static_cast<size_t>(batch_sizes[b]) * kOutputs;
    if (!CUDA_OK(cudaMemcpyAsync(device_in[b], host_in[b], n_in * sizeof(float),
                                 cudaMemcpyHostToDevice, r.stream)))
      return 1;
    status = fdnn_context_run_device(r.context, batch_sizes[b], device_in[b], n_in, device_out[b],
                                     n_out, r.stream);
    if (status != FDNN_STATUS_OK) return library_failure("fdnn_context_run_device", status);
    if (!CUDA_OK(cudaMemcpyAsync(host_out[b], device_out[b], n_out * sizeof(float),
                                 cudaMemcpyDeviceToHost, r.stream)))
      return 1;
  }
  // The only wait: every result is on the host once the stream has drained.
  if (!CUDA_OK(cudaStreamSynchronize(r.stream))) return 1;

  int mismatches = 0;
  for (int b = 0; b < kBatches; ++b) {
    char what[64];
    std::snprintf(what, sizeof what, "caller's stream, batch %d", b);
    mismatches += count_mismatches(what, host_in[b], host_out[b], batch_sizes[b]);
  }

  // A NULL stream: the context's own stream, and the call returns with the results ready.
  // device_in[3] still holds batch 3's input; the output goes to a fresh buffer.
  const int batch = batch_sizes[kBatches - 1];
  float* device_out_null = r.device_floats(static_cast<size_t>(batch) * kOutputs);
  if (!device_out_null) return 1;
  if (!CUDA_OK(cudaMemset(device_out_null, 0xff, batch * kOutputs * sizeof(float)))) return 1;
  status = fdnn_context_run_device(r.context, batch, device_in[kBatches - 1],
                                   static_cast<size_t>(batch) * kInputs, device_out_null,
                                   static_cast<size_t>(batch) * kOutputs, nullptr);
  if (status != FDNN_STATUS_OK) return library_failure("fdnn_context_run_device (NULL)", status);
  std::vector<float> output(static_cast<size_t>(batch) * kOutputs);
  if (!CUDA_OK(cudaMemcpy(output.data(), device_out_null, output.size() * sizeof(float),
                          cudaMemcpyDeviceToHost)))
    return 1;
  mismatches +=
      count_mismatches("NULL stream (the call waits)", host_in[kBatches - 1], output.data(), batch);
  if (mismatches) {
    std::fprintf(stderr, "FAIL: %d mismatching values\n", mismatches);
    return 1;
  }
  return 0;
}

#endif  // FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME

}  // namespace

int main() {
  std::printf("fusednn %s\n", fdnn_version_string());
  int32_t devices = 0;
  fdnn_status status = fdnn_cuda_device_count(&devices);
  if (status != FDNN_STATUS_OK) return library_failure("fdnn_cuda_device_count", status);
  if (devices == 0) {
    std::printf(
        "SKIP: fdnn_cuda_device_count() is 0 (libfusednn was built without CUDA, or no "
        "GPU can be used)\n");
    return 0;
  }
#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)
  std::printf("%d usable GPU(s); running on GPU 0\n", devices);
  if (run_on_gpu() != 0) return 1;
  std::printf("PASS: 07_cuda_stream\n");
  return 0;
#else
  std::printf(
      "SKIP: this build of the sample has no CUDA runtime (the CUDA toolkit was not "
      "found when it was built), although libfusednn sees %d GPU(s)\n",
      devices);
  return 0;
#endif
}
