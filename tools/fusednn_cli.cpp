// The fusednn command-line tool: inspect a model and measure its latency.
//   fusednn info MODEL [--device cpu|cuda|auto] [--precision fp32|tf32|fp16|bf16] [--weights PATH]
//   fusednn bench MODEL [--batch N] [--iterations K] [--warmup W] [--threads T]
//                       [--device cpu|cuda|auto] [--precision fp32|tf32|fp16|bf16]
//                       [--weights PATH]
// Built only on the public C++ wrapper, so it doubles as a usage example.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fusednn/fusednn.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: fusednn info MODEL [--device cpu|cuda|auto]\n"
               "                          [--precision fp32|tf32|fp16|bf16] [--weights PATH]\n"
               "       fusednn bench MODEL [--batch N] [--iterations K] [--warmup W]\n"
               "                           [--threads T] [--device cpu|cuda|auto]\n"
               "                           [--precision fp32|tf32|fp16|bf16] [--weights PATH]\n"
               "MODEL is a JSON spec or a bundle (.safetensors with the spec inside).\n"
               "--precision bounds the error (docs/precision.md); the CPU always runs fp32.\n");
  return 2;
}

std::string shape_text(const fdnn_shape& shape) {
  std::string text = "[";
  for (int32_t i = 0; i < shape.rank; ++i) {
    if (i) text += ", ";
    text += std::to_string(shape.dims[i]);
  }
  return text + "]";
}

std::string shape_text(const fusednn::Shape& shape) {
  fdnn_shape c_shape{};
  c_shape.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) c_shape.dims[i] = shape[i];
  return shape_text(c_shape);
}

const char* device_name(fdnn_device device) {
  switch (device) {
    case FDNN_DEVICE_CPU: return "cpu";
    case FDNN_DEVICE_CUDA: return "cuda";
    case FDNN_DEVICE_AUTO: return "auto";
  }
  return "?";
}

const char* precision_name(fdnn_precision precision) {
  switch (precision) {
    case FDNN_PRECISION_FP32: return "fp32";
    case FDNN_PRECISION_TF32: return "tf32";
    case FDNN_PRECISION_FP16: return "fp16";
    case FDNN_PRECISION_BF16: return "bf16";
  }
  return "?";
}

bool parse_precision(const std::string& name, fdnn_precision& precision) {
  for (fdnn_precision value : {FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16,
                               FDNN_PRECISION_BF16}) {
    if (name == precision_name(value)) {
      precision = value;
      return true;
    }
  }
  return false;
}

struct Arguments {
  std::string command, model, weights, device = "cpu";
  fdnn_precision precision = FDNN_PRECISION_FP32;
  int64_t batch = 1, iterations = 0, warmup = 20;
  int32_t threads = 0;
};

bool parse(int argc, char** argv, Arguments& args) {
  if (argc < 3) return false;
  args.command = argv[1];
  args.model = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "--batch") args.batch = std::atoll(value);
    else if (flag == "--iterations") args.iterations = std::atoll(value);
    else if (flag == "--warmup") args.warmup = std::atoll(value);
    else if (flag == "--threads") args.threads = std::atoi(value);
    else if (flag == "--device") args.device = value;
    else if (flag == "--weights") args.weights = value;
    else if (flag == "--precision") {
      if (!parse_precision(value, args.precision)) {
        std::fprintf(stderr, "fusednn: --precision is '%s'; use fp32, tf32, fp16 or bf16\n", value);
        return false;
      }
    } else return false;
  }
  return args.batch > 0 && args.iterations >= 0 && args.warmup >= 0;
}

fusednn::Model open(const Arguments& args) {
  fusednn::ModelOptions options;
  options.max_batch(std::max<int64_t>(args.batch, 1)).cpu_threads(args.threads);
  options.precision(args.precision);
  if (args.device == "cuda") options.device(FDNN_DEVICE_CUDA);
  else if (args.device == "auto") options.device(FDNN_DEVICE_AUTO);
  fusednn::Model model = fusednn::Model::from_file(args.model, options);
  if (!args.weights.empty()) model.load_weights(args.weights);
  return model;
}

int info(const Arguments& args) {
  fusednn::Model model = open(args);
  std::printf("model      %s\n", args.model.c_str());
  std::printf("input      %s float32\n", shape_text(model.input_shape()).c_str());
  std::printf("output     %s float32\n", shape_text(model.output_shape()).c_str());
  std::printf("\n%-4s %-24s %-12s %-20s %12s\n", "#", "layer", "type", "output", "parameters");
  const auto layers = model.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    std::printf("%-4zu %-24s %-12s %-20s %12lld\n", i, layers[i].name, layers[i].type,
                shape_text(layers[i].output_shape).c_str(),
                static_cast<long long>(layers[i].parameter_count));
  }
  const fdnn_memory_info memory = model.memory_info();
  std::printf("\nparameters %lld\n", static_cast<long long>(memory.parameter_count));
  std::printf("weights    %.1f KiB (after folding)\n", memory.weight_bytes / 1024.0);
  std::printf("context    %.1f KiB per execution context (max batch %lld)\n",
              memory.context_bytes / 1024.0, static_cast<long long>(model.max_batch()));
  std::printf("per sample %.4g FLOP, %.4g bytes of activations moved\n", memory.flops_per_sample,
              memory.bytes_per_sample);
  std::printf("device     %s\n", device_name(model.device()));
  const fdnn_precision precision = model.precision();
  if (precision == args.precision) {
    std::printf("precision  %s\n", precision_name(precision));
  } else {
    std::printf("precision  %s (%s allowed; see docs/precision.md)\n", precision_name(precision),
                precision_name(args.precision));
  }
  const fdnn_status status = fdnn_model_validate(model.get());
  std::printf("weights    %s\n",
              status == FDNN_STATUS_OK ? "complete and finite" : fdnn_last_error_message());
  return 0;
}

double percentile(std::vector<double> sorted, double p) {
  std::sort(sorted.begin(), sorted.end());
  const size_t index = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size())) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

int bench(const Arguments& args) {
  fusednn::Model model = open(args);
  fusednn::Context context = model.create_context();
  size_t in_per_sample = 1, out_per_sample = 1;
  for (int64_t extent : model.input_shape()) in_per_sample *= static_cast<size_t>(extent);
  for (int64_t extent : model.output_shape()) out_per_sample *= static_cast<size_t>(extent);
  const auto batch = static_cast<size_t>(args.batch);

  // Several input sets in rotation, so repeated runs do not just measure one cached input.
  std::mt19937 random(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> inputs(4, std::vector<float>(in_per_sample * batch));
  for (auto& input : inputs) {
    for (float& x : input) x = normal(random);
  }
  std::vector<float> output(out_per_sample * batch);

  auto run_once = [&](size_t i) {
    const auto& input = inputs[i % inputs.size()];
    context.run(args.batch, input.data(), input.size(), output.data(), output.size());
  };
  for (int64_t i = 0; i < args.warmup; ++i) run_once(static_cast<size_t>(i));
  // Without --iterations, run for about a second.
  int64_t iterations = args.iterations;
  if (iterations == 0) {
    const auto start = std::chrono::steady_clock::now();
    run_once(0);
    const double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    iterations = std::clamp<int64_t>(static_cast<int64_t>(1.0 / std::max(one, 1e-7)), 10, 100000);
  }
  std::vector<double> micros(static_cast<size_t>(iterations));
  for (int64_t i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_once(static_cast<size_t>(i));
    micros[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count();
  }
  const double p50 = percentile(micros, 50);
  std::printf("model %s  device %s  precision %s  batch %lld  iterations %lld\n",
              args.model.c_str(), device_name(model.device()), precision_name(model.precision()),
              static_cast<long long>(args.batch), static_cast<long long>(iterations));
  std::printf("latency us  p50 %.2f  p90 %.2f  p99 %.2f\n", p50, percentile(micros, 90),
              percentile(micros, 99));
  std::printf("throughput  %.0f samples/s\n", double(args.batch) * 1e6 / p50);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (!parse(argc, argv, args)) return usage();
  try {
    if (args.command == "info") return info(args);
    if (args.command == "bench") return bench(args);
  } catch (const fusednn::Error& error) {
    std::fprintf(stderr, "fusednn: %s\n", error.what());
    return 1;
  }
  return usage();
}
