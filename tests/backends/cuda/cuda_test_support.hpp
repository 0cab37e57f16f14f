// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the CUDA backend's tests: networks as specs with their weights, random
// data, and the comparison of every CUDA path against the CPU backend (exact fp32, itself
// checked against PyTorch by the golden tests).
//
// Each check draws fresh random weights and inputs; outputs are poisoned with NaN before every
// run, so an element left unwritten fails. The error is max |gpu - cpu| / max |cpu| and must be
// at most 1e-5 (fp32 summed in a different order lands near 1e-7).
//
// Without a GPU (or in a build without the CUDA backend) every test skips with a message
// (REQUIRE_CUDA). FUSEDNN_CUDA_TEST_QUICK=1 runs fewer batch sizes (for compute-sanitizer, which
// is slow). FUSEDNN_CUDA_TEST_HOST_IO=mapped (or staged) creates every GPU model that does not
// choose its own with that fdnn_model_options::host_io, so the whole suite runs on the mapped
// host path on a discrete GPU (test_host_io).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fusednn/fusednn.h"

#if FUSEDNN_TEST_WITH_CUDART
#include <cuda_runtime_api.h>
#endif

namespace fusednn_cuda_test {

inline constexpr double kTolerance = 1e-5;

// Sets an environment variable for the lifetime of the object.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* previous = std::getenv(name);
    if (previous != nullptr) previous_ = previous;
    had_previous_ = previous != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (had_previous_) {
      setenv(name_.c_str(), previous_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, previous_;
  bool had_previous_ = false;
};

// Adds key=value to the CUDA backend's selection overrides (FUSEDNN_CUDA_OVERRIDES, which the
// backend reads when a model is created) for the lifetime of the object; an empty value adds
// nothing. Nested objects add up, the innermost winning for a key.
class ScopedOverride {
 public:
  ScopedOverride(const char* key, const char* value)
      : environment_("FUSEDNN_CUDA_OVERRIDES", with(key, value).c_str()) {}

 private:
  static std::string with(const char* key, const char* value) {
    const char* current = std::getenv("FUSEDNN_CUDA_OVERRIDES");
    std::string text = current != nullptr ? current : "";
    if (value[0] != '\0') text += std::string(text.empty() ? "" : ",") + key + "=" + value;
    return text;
  }
  ScopedEnvironment environment_;
};

// The CUDA test binaries run fp16/bf16 chains on tensor cores from the first row and tf32 from
// the 17th (the override small_batch_tensor_cores=1, put before any the environment gives, so
// that those win),
// so that their small batches keep exercising the tensor-core kernels, as the tests were written
// to. The library's own rule (the FMA kernels below one 16-row tile per SM) is tested with
// ScopedOverride("small_batch_tensor_cores", "auto") (default_selection_test.cpp).
// FUSEDNN_CUDA_TEST_DEFAULT_SELECTION=1 leaves the override out: every test then runs on the
// default selection.
inline const bool kTensorCoresAtSmallBatches = [] {
  const char* keep = std::getenv("FUSEDNN_CUDA_TEST_DEFAULT_SELECTION");
  if (keep != nullptr && std::string(keep) == "1") return false;
  const char* current = std::getenv("FUSEDNN_CUDA_OVERRIDES");
  std::string text = "small_batch_tensor_cores=1";
  if (current != nullptr && current[0] != '\0') text += std::string(",") + current;
  setenv("FUSEDNN_CUDA_OVERRIDES", text.c_str(), 1);
  return true;
}();

// The host_io GPU models are created with unless a test chooses (FUSEDNN_CUDA_TEST_HOST_IO:
// "auto", "staged" or "mapped"; unset: AUTO, the library's default). An unknown value fails
// loudly rather than testing the default by mistake.
inline fdnn_host_io test_host_io() {
  const char* value = std::getenv("FUSEDNN_CUDA_TEST_HOST_IO");
  if (value == nullptr || std::string(value) == "auto") return FDNN_HOST_IO_AUTO;
  if (std::string(value) == "staged") return FDNN_HOST_IO_STAGED;
  if (std::string(value) == "mapped") return FDNN_HOST_IO_MAPPED;
  ADD_FAILURE() << "FUSEDNN_CUDA_TEST_HOST_IO is '" << value << "'; use auto, staged or mapped";
  return FDNN_HOST_IO_AUTO;
}

// A precision and its bound in the accuracy contract (fusednn.h): the largest error relative to
// the fp32 CPU backend's largest output.
struct PrecisionBound {
  fdnn_precision precision;
  const char* name;
  double bound;
};

// tf32, fp16 and bf16 (`with_fp32`: fp32 first, whose bound allows fp32 sums in another order).
inline std::vector<PrecisionBound> precision_bounds(bool with_fp32) {
  std::vector<PrecisionBound> all;
  if (with_fp32) all.push_back({FDNN_PRECISION_FP32, "fp32", 1e-5});
  all.push_back({FDNN_PRECISION_TF32, "tf32", 1e-3});
  all.push_back({FDNN_PRECISION_FP16, "fp16", 1e-2});
  all.push_back({FDNN_PRECISION_BF16, "bf16", 1e-2});
  return all;
}

// Whether `part` occurs in `text`.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The model's plan explanation at `batch` as text (fdnn_model_explain).
inline std::string explain_text(const fdnn_model* model, int64_t batch) {
  size_t size = 0;
  EXPECT_EQ(fdnn_model_explain(model, batch, FDNN_EXPLAIN_FORMAT_TEXT, nullptr, 0, &size),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  std::string text(size, '\0');
  EXPECT_EQ(
      fdnn_model_explain(model, batch, FDNN_EXPLAIN_FORMAT_TEXT, text.data(), text.size(), &size),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  return text;
}

inline bool quick() {
  const char* value = std::getenv("FUSEDNN_CUDA_TEST_QUICK");
  return value != nullptr && std::string(value) == "1";
}

// `sizes`, then `large` (a batch that makes persistent kernels loop) unless running quick, where
// `quick_large` stands in (0: none).
inline std::vector<int64_t> with_large(std::vector<int64_t> sizes, int64_t large,
                                       int64_t quick_large = 0) {
  const int64_t added = quick() ? quick_large : large;
  if (added > 0) sizes.push_back(added);
  return sizes;
}

inline std::vector<int64_t> all_batches() {
  if (quick()) return {1, 3, 33, 129};
  return {1, 2, 3, 31, 32, 33, 127, 128, 129, 1000, 4097};
}

inline std::vector<int64_t> few_batches() {
  if (quick()) return {1, 33};
  return {1, 2, 31, 33, 129};
}

#define REQUIRE_CUDA()                                                                      \
  do {                                                                                      \
    int32_t gpus_ = 0;                                                                      \
    ASSERT_EQ(fdnn_cuda_device_count(&gpus_), FDNN_STATUS_OK) << fdnn_last_error_message(); \
    if (gpus_ == 0) {                                                                       \
      GTEST_SKIP() << "no CUDA device: fdnn_cuda_device_count() is 0 (this libfusednn has " \
                      "no CUDA backend, or no GPU is visible); nothing to compare";         \
    }                                                                                       \
  } while (0)

// ------------------------------------------------------------------------------------------
// Networks: a spec and the weights it declares.

enum class Init { Weight, Bias, Gamma, Beta, Mean, Variance };

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::Weight;
  int64_t fan_in = 1;
};

class Net {
 public:
  explicit Net(std::vector<int64_t> input_shape) : input_shape_(std::move(input_shape)) {}

  Net& layer(const std::string& json) {
    layers_ += (layers_.empty() ? "" : ",\n") + json;
    return *this;
  }
  Net& linear(const std::string& name, int64_t in, int64_t out, bool bias = true,
              const std::string& inputs = "") {
    layer(R"({"type": "Linear", "name": ")" + name + R"(", "in_features": )" + std::to_string(in) +
          R"(, "out_features": )" + std::to_string(out) + R"(, "bias": )" +
          (bias ? "true" : "false") + inputs_field(inputs) + "}");
    tensors_.push_back({name + ".weight", {out, in}, Init::Weight, in});
    if (bias) tensors_.push_back({name + ".bias", {out}, Init::Bias, in});
    return *this;
  }
  // kernel, stride, padding, dilation as [h, w].
  Net& conv(const std::string& name, int64_t in, int64_t out, std::vector<int64_t> kernel,
            std::vector<int64_t> stride, std::vector<int64_t> padding,
            std::vector<int64_t> dilation, int64_t groups, bool bias) {
    auto pair = [](const std::vector<int64_t>& v) {
      return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + "]";
    };
    layer(R"({"type": "Conv2d", "name": ")" + name + R"(", "in_channels": )" + std::to_string(in) +
          R"(, "out_channels": )" + std::to_string(out) + R"(, "kernel_size": )" + pair(kernel) +
          R"(, "stride": )" + pair(stride) + R"(, "padding": )" + pair(padding) +
          R"(, "dilation": )" + pair(dilation) + R"(, "groups": )" + std::to_string(groups) +
          R"(, "bias": )" + (bias ? "true" : "false") + "}");
    const int64_t fan_in = in / groups * kernel[0] * kernel[1];
    tensors_.push_back(
        {name + ".weight", {out, in / groups, kernel[0], kernel[1]}, Init::Weight, fan_in});
    if (bias) tensors_.push_back({name + ".bias", {out}, Init::Bias, fan_in});
    return *this;
  }
  Net& batch_norm(const std::string& name, const std::string& type, int64_t channels) {
    layer(R"({"type": ")" + type + R"(", "name": ")" + name + R"(", "num_features": )" +
          std::to_string(channels) + R"(, "eps": 0.001})");
    tensors_.push_back({name + ".weight", {channels}, Init::Gamma});
    tensors_.push_back({name + ".bias", {channels}, Init::Beta});
    tensors_.push_back({name + ".running_mean", {channels}, Init::Mean});
    tensors_.push_back({name + ".running_var", {channels}, Init::Variance});
    return *this;
  }
  Net& layer_norm(const std::string& name, int64_t size, bool affine = true) {
    layer(R"({"type": "LayerNorm", "name": ")" + name + R"(", "normalized_shape": [)" +
          std::to_string(size) + R"(], "eps": 1e-5, "elementwise_affine": )" +
          (affine ? "true" : "false") + "}");
    if (affine) {
      tensors_.push_back({name + ".weight", {size}, Init::Gamma});
      tensors_.push_back({name + ".bias", {size}, Init::Beta});
    }
    return *this;
  }
  Net& act(const std::string& json_type) { return layer(json_type); }

  std::string spec() const {
    std::string shape;
    for (size_t i = 0; i < input_shape_.size(); ++i) {
      shape += (i ? ", " : "") + std::to_string(input_shape_[i]);
    }
    return R"({"fusednn": 1, "name": "cuda_test", "input": {"shape": [)" + shape +
           R"(], "dtype": "float32"}, "layers": [)" + layers_ + "]}";
  }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  static std::string inputs_field(const std::string& inputs) {
    return inputs.empty() ? "" : R"(, "inputs": )" + inputs;
  }
  std::vector<int64_t> input_shape_;
  std::string layers_;
  std::vector<Tensor> tensors_;
};

// The seed MLP 100-128-64-10 with ReLU.
inline Net seed_mlp() {
  Net net({100});
  net.linear("fc1", 100, 128).act(R"({"type": "ReLU"})");
  net.linear("fc2", 128, 64).act(R"({"type": "ReLU"})");
  net.linear("fc3", 64, 10);
  return net;
}

// LeNet-5 (1 x 28 x 28, Tanh, average pooling).
inline Net lenet5() {
  Net net({1, 28, 28});
  net.conv("c1", 1, 6, {5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  net.layer(R"({"type": "AvgPool2d", "name": "p1", "kernel_size": 2, "stride": 2})");
  net.conv("c2", 6, 16, {5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  net.layer(R"({"type": "AvgPool2d", "name": "p2", "kernel_size": 2, "stride": 2})");
  net.layer(R"({"type": "Flatten"})").linear("f1", 400, 120).act(R"({"type": "Tanh"})");
  net.linear("f2", 120, 84).act(R"({"type": "Tanh"})").linear("f3", 84, 10);
  return net;
}

// LeNet-5's MLP head 400-120-84-10, `activation` (a spec layer) after the first two layers.
inline Net lenet5_head(const std::string& activation) {
  Net net({400});
  net.linear("f5", 400, 120).act(activation);
  net.linear("f6", 120, 84).act(activation);
  net.linear("f7", 84, 10);
  return net;
}

// The activations as spec layers, with a parameter off the defaults where there is one.
inline const std::vector<std::pair<std::string, std::string>>& activations() {
  static const std::vector<std::pair<std::string, std::string>> all = {
      {"ReLU", R"({"type": "ReLU"})"},
      {"LeakyReLU", R"({"type": "LeakyReLU", "negative_slope": 0.2})"},
      {"GeluErf", R"({"type": "GELU", "approximate": "none"})"},
      {"GeluTanh", R"({"type": "GELU", "approximate": "tanh"})"},
      {"SiLU", R"({"type": "SiLU"})"},
      {"Sigmoid", R"({"type": "Sigmoid"})"},
      {"Tanh", R"({"type": "Tanh"})"},
      {"Scale", R"({"type": "Scale", "alpha": -0.75})"},
  };
  return all;
}

inline std::vector<float> normal(size_t count, std::mt19937& random, float mean, float deviation) {
  std::normal_distribution<float> distribution(mean, deviation);
  std::vector<float> values(count);
  for (float& v : values) v = distribution(random);
  return values;
}

inline std::vector<std::vector<float>> draw_weights(const Net& net, std::mt19937& random) {
  std::vector<std::vector<float>> values;
  for (const Tensor& tensor : net.tensors()) {
    size_t count = 1;
    for (int64_t extent : tensor.shape) count *= static_cast<size_t>(extent);
    const float scale = 1.0f / std::sqrt(static_cast<float>(tensor.fan_in));
    switch (tensor.init) {
      case Init::Weight: values.push_back(normal(count, random, 0.0f, scale)); break;
      case Init::Bias: values.push_back(normal(count, random, 0.0f, 0.1f)); break;
      case Init::Gamma: values.push_back(normal(count, random, 1.0f, 0.1f)); break;
      case Init::Beta: values.push_back(normal(count, random, 0.0f, 0.1f)); break;
      case Init::Mean: values.push_back(normal(count, random, 0.0f, 0.1f)); break;
      case Init::Variance: {
        std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
        std::vector<float> v(count);
        for (float& x : v) x = uniform(random);
        values.push_back(v);
        break;
      }
    }
  }
  return values;
}

inline fdnn_model* create_model(const std::string& spec, fdnn_device device, int64_t max_batch,
                                int32_t cuda_graphs, fdnn_precision precision = FDNN_PRECISION_FP32,
                                fdnn_host_io host_io = test_host_io()) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = max_batch;
  options.device = device;
  options.cuda_graphs = cuda_graphs;
  options.precision = precision;
  options.host_io = host_io;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message() << "\nspec: " << spec;
  return model;
}

inline void set_weights(fdnn_model* model, const Net& net,
                        const std::vector<std::vector<float>>& values) {
  for (size_t i = 0; i < net.tensors().size(); ++i) {
    const Tensor& tensor = net.tensors()[i];
    ASSERT_EQ(
        fdnn_model_set_weight(model, tensor.name.c_str(), FDNN_DTYPE_FLOAT32, values[i].data(),
                              tensor.shape.data(), static_cast<int32_t>(tensor.shape.size())),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
}

// The same net on the CPU (the reference) and on the GPU, with the same fresh weights; either
// is null where creating it failed (the caller asserts); the GPU model in gpu_precision. Destroy
// both with fdnn_model_destroy.
struct CpuAndGpu {
  fdnn_model* cpu = nullptr;
  fdnn_model* gpu = nullptr;
};
inline CpuAndGpu cpu_and_gpu_models(const Net& net, int64_t max_batch, std::mt19937& random,
                                    fdnn_precision gpu_precision = FDNN_PRECISION_FP32) {
  const auto weights = draw_weights(net, random);
  CpuAndGpu models;
  models.cpu = create_model(net.spec(), FDNN_DEVICE_CPU, max_batch, 1);
  models.gpu = create_model(net.spec(), FDNN_DEVICE_CUDA, max_batch, 1, gpu_precision);
  if (models.cpu != nullptr) set_weights(models.cpu, net, weights);
  if (models.gpu != nullptr) set_weights(models.gpu, net, weights);
  return models;
}

inline int64_t elements(const fdnn_shape& shape) {
  int64_t count = 1;
  for (int32_t i = 0; i < shape.rank; ++i) count *= shape.dims[i];
  return count;
}

// max |got - expected| / max |expected|; infinite when got has a NaN or Inf.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(got[i]) - double(expected[i])));
    scale = std::max(scale, std::fabs(double(expected[i])));
  }
  return worst / std::max(scale, 1e-30);
}

// Where got and expected differ most, for a failure's message: the row and column of outputs
// `width` wide, and both values.
inline std::string worst_difference(const std::vector<float>& got,
                                    const std::vector<float>& expected, int64_t width) {
  size_t worst = 0;
  double largest = -1;
  for (size_t i = 0; i < expected.size() && i < got.size(); ++i) {
    const double difference =
        std::isfinite(got[i]) ? std::fabs(double(got[i]) - expected[i]) : INFINITY;
    if (difference > largest) largest = difference, worst = i;
  }
  if (largest < 0 || width <= 0) return "no outputs";
  const auto columns = static_cast<size_t>(width);
  return "most apart at row " + std::to_string(worst / columns) + ", column " +
         std::to_string(worst % columns) + ": " + std::to_string(got[worst]) + " against " +
         std::to_string(expected[worst]);
}

#if FUSEDNN_TEST_WITH_CUDART
#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    const cudaError_t cuda_error_ = (call);                                                  \
    ASSERT_EQ(cuda_error_, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_error_); \
  } while (0)

// Host bytes to the device, landed before anything queued after it runs. cudaMemcpy from
// pageable memory may return before the copy reaches the device (CUDA's API synchronization
// behaviour), on the legacy stream, which the context's and the tests' non-blocking streams do
// not wait for: a run could read the old input, or the poison could land on its output.
inline void upload(void* device, const void* host, size_t bytes) {
  CUDA_OK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
}

// Device buffers for the device path, sized for the largest batch of a check.
struct DeviceBuffers {
  float* input = nullptr;
  float* output = nullptr;
  cudaStream_t stream = nullptr;
  ~DeviceBuffers() {
    if (input) cudaFree(input);
    if (output) cudaFree(output);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Runs on the device path and returns the output copied back. `stream` null: the NULL stream
// (the context's own, waited for by the call).
inline void run_device(fdnn_context* context, int64_t batch, const std::vector<float>& input,
                       size_t output_count, float* device_input, float* device_output,
                       cudaStream_t stream, std::vector<float>* output) {
  const std::vector<float> poison(output_count, NAN);
  ASSERT_NO_FATAL_FAILURE(upload(device_input, input.data(), input.size() * sizeof(float)));
  ASSERT_NO_FATAL_FAILURE(upload(device_output, poison.data(), output_count * sizeof(float)));
  ASSERT_EQ(fdnn_context_run_device(context, batch, device_input, input.size(), device_output,
                                    output_count, stream),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  if (stream) CUDA_OK(cudaStreamSynchronize(stream));
  output->assign(output_count, 0.0f);
  CUDA_OK(cudaMemcpy(output->data(), device_output, output_count * sizeof(float),
                     cudaMemcpyDeviceToHost));
}
#endif

// Calls into each CUDA model of expect_matches_cpu: before_runs once its context exists (the model
// is prepared: its backend is built) and before any run, after_runs after its last run. Tests
// that see the library's internals use them to steer or inspect the backend.
struct GpuHooks {
  std::function<void(fdnn_model*)> before_runs;
  std::function<void(fdnn_model*)> after_runs;
};

// The CPU model as the reference and CUDA models with graphs on and off, same weights; every
// batch through the host path, the device path on a stream and (first batch) the NULL stream
// and fdnn_model_run's pool.
// `precision` is what the CUDA models are created with and `tolerance` the bound for it (the CPU
// reference always runs fp32); `host_io` their fdnn_model_options::host_io.
inline void expect_matches_cpu(const Net& net, const std::vector<int64_t>& batches, uint32_t seed,
                               const std::string& what, const GpuHooks& hooks = {},
                               fdnn_precision precision = FDNN_PRECISION_FP32,
                               double tolerance = kTolerance,
                               fdnn_host_io host_io = test_host_io()) {
  SCOPED_TRACE(what);
  std::mt19937 random(seed);
  const std::vector<std::vector<float>> weights = draw_weights(net, random);
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  const std::string spec = net.spec();

  fdnn_model* cpu = create_model(spec, FDNN_DEVICE_CPU, max_batch, 1);
  ASSERT_NE(cpu, nullptr);
  set_weights(cpu, net, weights);
  fdnn_shape in_shape, out_shape;
  ASSERT_EQ(fdnn_model_input_shape(cpu, &in_shape), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_output_shape(cpu, &out_shape), FDNN_STATUS_OK);
  const int64_t in_elements = elements(in_shape);
  const int64_t out_elements = elements(out_shape);

  for (int32_t graphs : {1, 0}) {
    SCOPED_TRACE(graphs ? "cuda_graphs = 1" : "cuda_graphs = 0");
    fdnn_model* gpu = create_model(spec, FDNN_DEVICE_CUDA, max_batch, graphs, precision, host_io);
    ASSERT_NE(gpu, nullptr);
    set_weights(gpu, net, weights);
    fdnn_device device = FDNN_DEVICE_CPU;
    ASSERT_EQ(fdnn_model_device(gpu, &device), FDNN_STATUS_OK);
    EXPECT_EQ(device, FDNN_DEVICE_CUDA);
    fdnn_context* context = nullptr;
    ASSERT_EQ(fdnn_context_create(gpu, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
    if (hooks.before_runs) hooks.before_runs(gpu);

#if FUSEDNN_TEST_WITH_CUDART
    DeviceBuffers buffers;
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buffers.input),
                       sizeof(float) * max_batch * in_elements));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buffers.output),
                       sizeof(float) * max_batch * out_elements));
    CUDA_OK(cudaStreamCreateWithFlags(&buffers.stream, cudaStreamNonBlocking));
#endif

    bool first = true;
    for (int64_t batch : batches) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const std::vector<float> input =
          normal(static_cast<size_t>(batch * in_elements), random, 0.0f, 1.0f);
      const size_t output_count = static_cast<size_t>(batch * out_elements);
      std::vector<float> expected(output_count, NAN);
      ASSERT_EQ(
          fdnn_model_run(cpu, batch, input.data(), input.size(), expected.data(), expected.size()),
          FDNN_STATUS_OK)
          << fdnn_last_error_message();

      std::vector<float> got(output_count, NAN);
      ASSERT_EQ(
          fdnn_context_run(context, batch, input.data(), input.size(), got.data(), got.size()),
          FDNN_STATUS_OK)
          << fdnn_last_error_message();
      EXPECT_LE(relative_error(got, expected), tolerance) << "host path";

      if (first) {
        std::fill(got.begin(), got.end(), NAN);
        ASSERT_EQ(fdnn_model_run(gpu, batch, input.data(), input.size(), got.data(), got.size()),
                  FDNN_STATUS_OK)
            << fdnn_last_error_message();
        EXPECT_LE(relative_error(got, expected), tolerance) << "fdnn_model_run";
      }
#if FUSEDNN_TEST_WITH_CUDART
      run_device(context, batch, input, output_count, buffers.input, buffers.output, buffers.stream,
                 &got);
      EXPECT_LE(relative_error(got, expected), tolerance) << "device path, caller's stream";
      if (first) {
        run_device(context, batch, input, output_count, buffers.input, buffers.output, nullptr,
                   &got);
        EXPECT_LE(relative_error(got, expected), tolerance) << "device path, NULL stream";
      }
#endif
      first = false;
      if (::testing::Test::HasFatalFailure()) break;
    }
    if (hooks.after_runs) hooks.after_runs(gpu);
    fdnn_context_destroy(context);
    fdnn_model_destroy(gpu);
  }
  fdnn_model_destroy(cpu);
}

#if FUSEDNN_TEST_WITH_CUDART
// The device path with the caller's buffers changing between runs (graphs re-pointed, or kept
// per pair of buffers where they cannot be), a second stream, and runs queued back to back
// before one synchronisation; three rounds, so that graphs made in the first are reused.
// misaligned: two more sets of buffers, starting 8 and 4 bytes past a 256-byte boundary (for
// plans whose kernels accept any float alignment). `precision` and `tolerance` as
// expect_matches_cpu's.
inline void expect_rotating_buffers_match(const Net& net, uint32_t seed, const std::string& what,
                                          bool misaligned = false, int64_t batch = 33,
                                          fdnn_precision precision = FDNN_PRECISION_FP32,
                                          double tolerance = kTolerance) {
  SCOPED_TRACE(what);
  std::mt19937 random(seed);
  const auto weights = draw_weights(net, random);
  fdnn_model* cpu = create_model(net.spec(), FDNN_DEVICE_CPU, batch, 1);
  fdnn_model* gpu = create_model(net.spec(), FDNN_DEVICE_CUDA, batch, 1, precision);
  ASSERT_TRUE(cpu && gpu);
  set_weights(cpu, net, weights);
  set_weights(gpu, net, weights);
  fdnn_shape in_shape, out_shape;
  ASSERT_EQ(fdnn_model_input_shape(cpu, &in_shape), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_output_shape(cpu, &out_shape), FDNN_STATUS_OK);
  const size_t in_count = static_cast<size_t>(batch * elements(in_shape));
  const size_t out_count = static_cast<size_t>(batch * elements(out_shape));
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(gpu, &context), FDNN_STATUS_OK) << fdnn_last_error_message();

  // Misaligned sets: 8 bytes past a 256-byte boundary, then 4. The context keys its graphs by
  // 16-byte alignment, so the second replays the graph the first captured: a kernel that chose
  // 8-byte vector accesses there must not have.
  const int sets = misaligned ? 5 : 3;
  std::vector<std::vector<float>> inputs, expected;
  std::vector<float*> allocations, device_in, device_out;
  cudaStream_t streams[2] = {};
  for (cudaStream_t& stream : streams) {
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  const std::vector<float> poison(out_count, NAN);
  for (int k = 0; k < sets; ++k) {
    const size_t offset = k == 3 ? 2 : k == 4 ? 1 : 0;  // floats before the set's data
    inputs.push_back(normal(in_count, random, 0.0f, 1.0f));
    expected.emplace_back(out_count, NAN);
    ASSERT_EQ(fdnn_model_run(cpu, batch, inputs[k].data(), in_count, expected[k].data(), out_count),
              FDNN_STATUS_OK);
    float* in = nullptr;
    float* out = nullptr;
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&in), (in_count + offset) * sizeof(float)));
    allocations.push_back(in);
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&out), (out_count + offset) * sizeof(float)));
    allocations.push_back(out);
    device_in.push_back(in + offset);
    device_out.push_back(out + offset);
    ASSERT_NO_FATAL_FAILURE(upload(device_in[k], inputs[k].data(), in_count * sizeof(float)));
  }
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < sets; ++k) {
      ASSERT_NO_FATAL_FAILURE(upload(device_out[k], poison.data(), out_count * sizeof(float)));
    }
    // Queued back to back, alternating streams, one wait at the end.
    for (int k = 0; k < sets; ++k) {
      ASSERT_EQ(fdnn_context_run_device(context, batch, device_in[k], in_count, device_out[k],
                                        out_count, streams[(round + k) % 2]),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
    }
    CUDA_OK(cudaDeviceSynchronize());
    for (int k = 0; k < sets; ++k) {
      std::vector<float> got(out_count);
      CUDA_OK(
          cudaMemcpy(got.data(), device_out[k], out_count * sizeof(float), cudaMemcpyDeviceToHost));
      EXPECT_LE(relative_error(got, expected[k]), tolerance) << "round " << round << " set " << k;
    }
  }
  fdnn_context_destroy(context);
  for (float* allocation : allocations) cudaFree(allocation);
  for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
  fdnn_model_destroy(cpu);
  fdnn_model_destroy(gpu);
}
#endif

}  // namespace fusednn_cuda_test
