// SPDX-License-Identifier: Apache-2.0
// The fusednn command-line tool: inspect a model, explain its plan, measure its latency.
//   fusednn info MODEL [--plan [--json]] [--batch N] [--device cpu|cuda|auto]
//                      [--precision fp32|tf32|fp16|bf16] [--weights PATH]
//   fusednn bench MODEL [--batch N] [--iterations K] [--warmup W] [--threads T]
//                       [--device cpu|cuda|auto] [--precision fp32|tf32|fp16|bf16]
//                       [--weights PATH]
//   fusednn --help | --version
// Exit status: 0 on success, 1 when the library reports an error, 2 for a bad command line (an
// error line naming the argument on stderr). Built only on the public C++ wrapper, so it doubles
// as a usage example.
#include <algorithm>
#include <cerrno>
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

const char* const kUsage =
    "usage: fusednn info MODEL [--plan [--json]] [--batch N] [--device cpu|cuda|auto]\n"
    "                          [--precision fp32|tf32|fp16|bf16] [--weights PATH]\n"
    "       fusednn bench MODEL [--batch N] [--iterations K] [--warmup W]\n"
    "                           [--threads T] [--device cpu|cuda|auto]\n"
    "                           [--precision fp32|tf32|fp16|bf16] [--weights PATH]\n"
    "       fusednn --help | --version\n"
    "\n"
    "MODEL is a JSON spec or a bundle (.safetensors with the spec inside).\n"
    "info --plan prints, for each step of the plan at --batch (default 1), the layers it covers,\n"
    "the kernel form the backend picks and why, its output's workspace slot, and its FLOPs and\n"
    "bytes; --json prints the same as JSON (fdnn_model_explain).\n"
    "--precision bounds the error (docs/precision.md); the CPU always runs fp32.\n"
    "--batch also sets the model's max batch.\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "fusednn: %s\nrun 'fusednn --help' for usage\n", message.c_str());
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
  for (fdnn_precision value :
       {FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16, FDNN_PRECISION_BF16}) {
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
  bool plan = false, json = false;
};

// A whole decimal integer in [low, high], or false.
bool parse_integer(const char* text, int64_t low, int64_t high, int64_t& value) {
  if (*text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < low || parsed > high) return false;
  value = parsed;
  return true;
}

// What the command line asks for: run a command, print usage or the version, or a bad argument.
enum class Parsed { Run, Help, Version, Error };

Parsed parse(int argc, char** argv, Arguments& args, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--help" || word == "-h") return Parsed::Help;
    if (word == "--version") return Parsed::Version;
  }
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag.rfind("-", 0) != 0 || flag == "-") {
      positional.push_back(flag);
      continue;
    }
    if (flag == "--plan") {
      args.plan = true;
      continue;
    }
    if (flag == "--json") {
      args.json = true;
      continue;
    }
    const bool takes_value = flag == "--batch" || flag == "--iterations" || flag == "--warmup" ||
                             flag == "--threads" || flag == "--device" || flag == "--weights" ||
                             flag == "--precision";
    if (!takes_value) {
      error = "unknown option '" + flag + "'";
      return Parsed::Error;
    }
    if (i + 1 >= argc) {
      error = flag + " needs a value";
      return Parsed::Error;
    }
    const char* value = argv[++i];
    int64_t number = 0;
    if (flag == "--batch" || flag == "--iterations" || flag == "--warmup" || flag == "--threads") {
      const int64_t low = flag == "--batch" ? 1 : 0;
      const int64_t high = flag == "--threads" ? 4096 : (int64_t{1} << 40);
      if (!parse_integer(value, low, high, number)) {
        error = flag + " is '" + value + "'; use a whole number from " + std::to_string(low) +
                " to " + std::to_string(high);
        return Parsed::Error;
      }
    }
    if (flag == "--batch")
      args.batch = number;
    else if (flag == "--iterations")
      args.iterations = number;
    else if (flag == "--warmup")
      args.warmup = number;
    else if (flag == "--threads")
      args.threads = static_cast<int32_t>(number);
    else if (flag == "--weights")
      args.weights = value;
    else if (flag == "--device") {
      args.device = value;
      if (args.device != "cpu" && args.device != "cuda" && args.device != "auto") {
        error = "--device is '" + args.device + "'; use cpu, cuda or auto";
        return Parsed::Error;
      }
    } else if (!parse_precision(value, args.precision)) {
      error = std::string("--precision is '") + value + "'; use fp32, tf32, fp16 or bf16";
      return Parsed::Error;
    }
  }
  if (positional.empty()) {
    error = "no command given; use info or bench";
    return Parsed::Error;
  }
  args.command = positional[0];
  if (args.command != "info" && args.command != "bench") {
    error = "unknown command '" + args.command + "'; use info or bench";
    return Parsed::Error;
  }
  if (positional.size() < 2) {
    error = args.command + " needs a MODEL file";
    return Parsed::Error;
  }
  if (positional.size() > 2) {
    error = "unexpected argument '" + positional[2] + "'";
    return Parsed::Error;
  }
  args.model = positional[1];
  if (args.command != "info" && (args.plan || args.json)) {
    error = std::string(args.plan ? "--plan" : "--json") + " applies to info only";
    return Parsed::Error;
  }
  if (args.json && !args.plan) {
    error = "--json applies to info --plan only";
    return Parsed::Error;
  }
  return Parsed::Run;
}

fusednn::Model open(const Arguments& args) {
  fusednn::ModelOptions options;
  options.max_batch(std::max<int64_t>(args.batch, 1)).cpu_threads(args.threads);
  options.precision(args.precision);
  if (args.device == "cuda")
    options.device(FDNN_DEVICE_CUDA);
  else if (args.device == "auto")
    options.device(FDNN_DEVICE_AUTO);
  fusednn::Model model = fusednn::Model::from_file(args.model, options);
  if (!args.weights.empty()) model.load_weights(args.weights);
  return model;
}

int info(const Arguments& args) {
  fusednn::Model model = open(args);
  if (args.plan) {
    const fdnn_explain_format format =
        args.json ? FDNN_EXPLAIN_FORMAT_JSON : FDNN_EXPLAIN_FORMAT_TEXT;
    std::fputs(model.explain(args.batch, format).c_str(), stdout);
    return 0;
  }
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
    const double one =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    iterations = std::clamp<int64_t>(static_cast<int64_t>(1.0 / std::max(one, 1e-7)), 10, 100000);
  }
  std::vector<double> micros(static_cast<size_t>(iterations));
  for (int64_t i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_once(static_cast<size_t>(i));
    micros[i] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
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
  std::string error;
  switch (parse(argc, argv, args, error)) {
    case Parsed::Help: std::fputs(kUsage, stdout); return 0;
    case Parsed::Version: std::printf("fusednn %s\n", fdnn_version_string()); return 0;
    case Parsed::Error: return usage_error(error);
    case Parsed::Run: break;
  }
  try {
    return args.command == "info" ? info(args) : bench(args);
  } catch (const fusednn::Error& error) {
    std::fprintf(stderr, "fusednn: %s\n", error.what());
    return 1;
  }
}
