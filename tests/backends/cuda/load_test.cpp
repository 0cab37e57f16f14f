// SPDX-License-Identifier: Apache-2.0
// Load test of the CUDA backend: one model, T host threads, each with its own context (plus the
// model's own pool), for S seconds of runs at batch sizes drawn from a fixed, seeded set, every
// result compared bit for bit with a single-threaded reference, through the host-buffer path,
// the device-pointer path and fdnn_model_run. Device memory (cudaMemGetInfo, and the process's
// own from nvidia-smi where it answers) and host RSS are sampled every few seconds.
//
// Exit status: 0 when every run returned OK and matched and, after the warm-up, device memory
// and RSS each stayed within --growth-mib of their lowest sample; 1 otherwise; 77 without a GPU
// (CTest reads it as skipped); 2 for bad arguments.
//
//   fusednn_cuda_load_test [--threads 8] [--seconds 600] [--max-batch 4096] [--seed 1]
//                          [--sample-every 5] [--warmup 30] [--growth-mib 64] [--model FILE]
//                          [--device cuda|cpu] [--memory-source auto|process|device]
//
// The growth check reads the process's own device memory (nvidia-smi's figure for this pid) or
// the device's memory in use (cudaMemGetInfo), which counts every process on the GPU: auto takes
// the process's where nvidia-smi lists this process in every sample. Run beside other GPU work
// with only the device figure, the check measures that work too.
//
// --device cpu runs the same check on the CPU backend (host path and pool only, RSS only), so
// the harness itself can be tried on a machine without a GPU.
// Without --model the network is built here: Linear 256 -> 512, ReLU, Linear 512 -> 512, GELU,
// Linear 512 -> 256, Tanh, Linear 256 -> 10, with seeded random weights. The default is the
// issue's ten-minute run; CTest runs a few seconds of it (tests/backends/cuda/CMakeLists.txt).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fusednn/fusednn.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  int threads = 8;
  double seconds = 600;
  int64_t max_batch = 4096;
  uint32_t seed = 1;
  double sample_every = 5;
  double warmup = 30;
  double growth_mib = 64;
  std::string model_file;
  bool cpu = false;  // --device cpu: the CPU backend, host path and pool only, no device memory
  std::string memory_source = "auto";  // which device figure the growth check reads
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "fusednn_cuda_load_test: %s\n"
               "usage: fusednn_cuda_load_test [--threads N] [--seconds S] [--max-batch N] "
               "[--seed N] [--sample-every S] [--warmup S] [--growth-mib M] [--model FILE] "
               "[--device cuda|cpu] [--memory-source auto|process|device]\n",
               problem.c_str());
  std::exit(2);
}

double number_argument(const std::string& name, const char* text, double low, double high) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= low && value <= high)) {
    usage(name + " takes a number from " + std::to_string(low) + " to " + std::to_string(high) +
          ", not '" + text + "'");
  }
  return value;
}

Settings parse_arguments(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") usage("a load test of the CUDA backend");
    if (i + 1 >= argc) usage(name + " needs a value");
    const char* value = argv[++i];
    if (name == "--threads") {
      settings.threads = static_cast<int>(number_argument(name, value, 1, 256));
    } else if (name == "--seconds") {
      settings.seconds = number_argument(name, value, 0.1, 86400);
    } else if (name == "--max-batch") {
      settings.max_batch = static_cast<int64_t>(number_argument(name, value, 1, 1 << 20));
    } else if (name == "--seed") {
      settings.seed = static_cast<uint32_t>(number_argument(name, value, 0, 4294967295.0));
    } else if (name == "--sample-every") {
      settings.sample_every = number_argument(name, value, 0.05, 3600);
    } else if (name == "--warmup") {
      settings.warmup = number_argument(name, value, 0, 86400);
    } else if (name == "--growth-mib") {
      settings.growth_mib = number_argument(name, value, 0, 1 << 20);
    } else if (name == "--model") {
      settings.model_file = value;
    } else if (name == "--memory-source") {
      if (std::strcmp(value, "auto") != 0 && std::strcmp(value, "process") != 0 &&
          std::strcmp(value, "device") != 0) {
        usage("--memory-source takes auto, process or device, not '" + std::string(value) + "'");
      }
      settings.memory_source = value;
    } else if (name == "--device") {
      if (std::strcmp(value, "cuda") != 0 && std::strcmp(value, "cpu") != 0) {
        usage("--device takes cuda or cpu, not '" + std::string(value) + "'");
      }
      settings.cpu = std::strcmp(value, "cpu") == 0;
    } else {
      usage("unknown argument '" + name + "'");
    }
  }
  return settings;
}

// The built-in network and its weights.
struct LayerWeights {
  std::string name;
  int64_t in = 0, out = 0;
};

const std::vector<LayerWeights>& built_in_layers() {
  static const std::vector<LayerWeights> layers = {
      {"fc1", 256, 512}, {"fc2", 512, 512}, {"fc3", 512, 256}, {"fc4", 256, 10}};
  return layers;
}

std::string built_in_spec() {
  const auto& l = built_in_layers();
  auto linear = [](const LayerWeights& layer) {
    return R"({"type": "Linear", "name": ")" + layer.name + R"(", "in_features": )" +
           std::to_string(layer.in) + R"(, "out_features": )" + std::to_string(layer.out) + "}";
  };
  return R"({"fusednn": 1, "name": "load_test", "input": {"shape": [256]}, "layers": [)" +
         linear(l[0]) + R"(, {"type": "ReLU"}, )" + linear(l[1]) + R"(, {"type": "GELU"}, )" +
         linear(l[2]) + R"(, {"type": "Tanh"}, )" + linear(l[3]) + "]}";
}

bool check(fdnn_status status, const char* call) {
  if (status == FDNN_STATUS_OK) return true;
  std::fprintf(stderr, "%s: %s: %s\n", call, fdnn_status_string(status), fdnn_last_error_message());
  return false;
}

fdnn_model* create_model(const Settings& settings, std::mt19937& random) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = settings.max_batch;
  options.device = settings.cpu ? FDNN_DEVICE_CPU : FDNN_DEVICE_CUDA;
  fdnn_model* model = nullptr;
  if (!settings.model_file.empty()) {
    if (!check(fdnn_model_create_from_file(settings.model_file.c_str(), &options, &model),
               "fdnn_model_create_from_file")) {
      return nullptr;
    }
    return model;
  }
  const std::string spec = built_in_spec();
  if (!check(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
             "fdnn_model_create_from_spec")) {
    return nullptr;
  }
  for (const LayerWeights& layer : built_in_layers()) {
    std::normal_distribution<float> weight(0.0f, 1.0f / std::sqrt(static_cast<float>(layer.in)));
    std::normal_distribution<float> bias(0.0f, 0.1f);
    std::vector<float> w(static_cast<size_t>(layer.in * layer.out));
    std::vector<float> b(static_cast<size_t>(layer.out));
    for (float& v : w) v = weight(random);
    for (float& v : b) v = bias(random);
    const int64_t w_shape[2] = {layer.out, layer.in};
    const int64_t b_shape[1] = {layer.out};
    if (!check(fdnn_model_set_weight(model, (layer.name + ".weight").c_str(), FDNN_DTYPE_FLOAT32,
                                     w.data(), w_shape, 2),
               "fdnn_model_set_weight") ||
        !check(fdnn_model_set_weight(model, (layer.name + ".bias").c_str(), FDNN_DTYPE_FLOAT32,
                                     b.data(), b_shape, 1),
               "fdnn_model_set_weight")) {
      fdnn_model_destroy(model);
      return nullptr;
    }
  }
  return model;
}

int64_t elements(const fdnn_shape& shape) {
  int64_t count = 1;
  for (int32_t i = 0; i < shape.rank; ++i) count *= shape.dims[i];
  return count;
}

// 1 and max_batch, and 14 sizes drawn log-uniformly between them; sorted, without repeats.
std::vector<int64_t> batch_sizes(int64_t max_batch, std::mt19937& random) {
  std::vector<int64_t> sizes = {1, max_batch};
  std::uniform_real_distribution<double> exponent(0.0, std::log(static_cast<double>(max_batch)));
  for (int i = 0; i < 14; ++i) {
    sizes.push_back(
        std::clamp<int64_t>(static_cast<int64_t>(std::exp(exponent(random))), 1, max_batch));
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

enum Path { kHost = 0, kDevice = 1, kPool = 2, kPaths = 3 };
const char* const kPathNames[kPaths] = {"host", "device", "pool"};

struct Shared {
  fdnn_model* model = nullptr;
  bool cpu = false;
  std::vector<int64_t> batches;
  std::vector<float> input;  // max_batch samples; a run of b reads the first b
  int64_t input_elements = 0, output_elements = 0;
  std::vector<std::vector<float>> reference[kPaths];  // per path, per batch index
  Clock::time_point stop;
  std::atomic<int64_t> runs[kPaths] = {};
  std::atomic<int64_t> mismatches{0};
  std::atomic<int64_t> errors{0};
  std::atomic<bool> failed_setup{false};
  std::mutex report_mutex;
  int reported = 0;
};

void report(Shared& shared, const std::string& line) {
  std::lock_guard<std::mutex> lock(shared.report_mutex);
  if (shared.reported++ < 20) std::fprintf(stderr, "%s\n", line.c_str());
}

// The device buffers and stream of one thread.
struct DeviceSide {
  float* input = nullptr;
  float* output = nullptr;
  cudaStream_t stream = nullptr;
  ~DeviceSide() {
    if (input) cudaFree(input);
    if (output) cudaFree(output);
    if (stream) cudaStreamDestroy(stream);
  }
  bool create(const Shared& shared, int64_t max_batch) {
    if (shared.cpu) return true;
    const size_t in_bytes = static_cast<size_t>(max_batch * shared.input_elements) * sizeof(float);
    const size_t out_bytes =
        static_cast<size_t>(max_batch * shared.output_elements) * sizeof(float);
    return cudaMalloc(reinterpret_cast<void**>(&input), in_bytes) == cudaSuccess &&
           cudaMalloc(reinterpret_cast<void**>(&output), out_bytes) == cudaSuccess &&
           cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMemcpy(input, shared.input.data(), in_bytes, cudaMemcpyHostToDevice) ==
               cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
  }
};

// One run of `batch` on `path`, its output in `output` (poisoned first); false on an error.
bool run_once(Shared& shared, fdnn_context* context, DeviceSide& device, Path path, int64_t batch,
              std::vector<float>& output) {
  const size_t in_count = static_cast<size_t>(batch * shared.input_elements);
  const size_t out_count = static_cast<size_t>(batch * shared.output_elements);
  output.assign(out_count, NAN);
  fdnn_status status = FDNN_STATUS_OK;
  if (path == kHost) {
    status =
        fdnn_context_run(context, batch, shared.input.data(), in_count, output.data(), out_count);
  } else if (path == kPool) {
    status = fdnn_model_run(shared.model, batch, shared.input.data(), in_count, output.data(),
                            out_count);
  } else {
    if (cudaMemsetAsync(device.output, 0xff, out_count * sizeof(float), device.stream) !=
        cudaSuccess) {
      return false;
    }
    status = fdnn_context_run_device(context, batch, device.input, in_count, device.output,
                                     out_count, device.stream);
    if (status == FDNN_STATUS_OK &&
        (cudaMemcpyAsync(output.data(), device.output, out_count * sizeof(float),
                         cudaMemcpyDeviceToHost, device.stream) != cudaSuccess ||
         cudaStreamSynchronize(device.stream) != cudaSuccess)) {
      report(shared, std::string("CUDA error after a device-path run: ") +
                         cudaGetErrorString(cudaGetLastError()));
      return false;
    }
  }
  if (status != FDNN_STATUS_OK) {
    report(shared, std::string(kPathNames[path]) + " run of batch " + std::to_string(batch) + ": " +
                       fdnn_status_string(status) + ": " + fdnn_last_error_message());
    return false;
  }
  return true;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void worker(Shared& shared, int index, uint32_t seed, int64_t max_batch) {
  fdnn_context* context = nullptr;
  if (!check(fdnn_context_create(shared.model, &context), "fdnn_context_create")) {
    shared.failed_setup = true;
    return;
  }
  DeviceSide device;
  if (!device.create(shared, max_batch)) {
    std::fprintf(stderr, "thread %d: cannot allocate its device buffers\n", index);
    shared.failed_setup = true;
    fdnn_context_destroy(context);
    return;
  }
  std::mt19937 random(seed + 1000u * static_cast<uint32_t>(index + 1));
  std::uniform_int_distribution<size_t> pick_batch(0, shared.batches.size() - 1);
  std::uniform_int_distribution<int> pick_path(0, kPaths - 1);
  std::vector<float> output;
  auto run_and_compare = [&](Path path, size_t b) {
    const int64_t batch = shared.batches[b];
    if (!run_once(shared, context, device, path, batch, output)) {
      ++shared.errors;
      return;
    }
    ++shared.runs[path];
    if (same_bits(output, shared.reference[path][b])) return;
    ++shared.mismatches;
    size_t first = 0;
    while (first < output.size() &&
           std::memcmp(&output[first], &shared.reference[path][b][first], sizeof(float)) == 0) {
      ++first;
    }
    std::ostringstream line;
    line << "MISMATCH thread " << index << ", " << kPathNames[path] << " path, batch " << batch
         << ": element " << first << " is " << output[first] << ", the reference "
         << shared.reference[path][b][first];
    report(shared, line.str());
  };
  // Every batch on every path once first, all threads at a time: the context captures its
  // graphs and the pool grows to its size under this load before the memory is watched.
  for (size_t b = 0; b < shared.batches.size() && Clock::now() < shared.stop; ++b) {
    for (int path = 0; path < kPaths; ++path) {
      if (!(shared.cpu && path == kDevice)) run_and_compare(static_cast<Path>(path), b);
    }
  }
  while (Clock::now() < shared.stop) {
    const size_t b = pick_batch(random);
    auto path = static_cast<Path>(pick_path(random));
    if (shared.cpu && path == kDevice) path = kHost;
    run_and_compare(path, b);
  }
  fdnn_context_destroy(context);
}

// Device memory in use (all processes), this process's (from nvidia-smi; -1 where it does not
// answer) and this process's resident host memory, in MiB.
struct Sample {
  double seconds = 0;
  double device_used = 0;
  double process_device = -1;
  double rss = 0;
  int64_t runs = 0;
};

double process_device_mib() {
  FILE* pipe = popen(
      "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null",
      "r");
  if (pipe == nullptr) return -1;
  const long own = static_cast<long>(getpid());
  double found = -1;
  char line[256];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    long pid = 0;
    double mib = 0;
    if (std::sscanf(line, "%ld, %lf", &pid, &mib) == 2 && pid == own) found = mib;
  }
  pclose(pipe);
  return found;
}

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

Sample take_sample(const Shared& shared, Clock::time_point start) {
  Sample sample;
  sample.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  size_t free = 0, total = 0;
  if (!shared.cpu && cudaMemGetInfo(&free, &total) == cudaSuccess) {
    sample.device_used = static_cast<double>(total - free) / (1 << 20);
  }
  if (!shared.cpu) sample.process_device = process_device_mib();
  sample.rss = rss_mib();
  for (const auto& runs : shared.runs) sample.runs += runs.load();
  return sample;
}

struct Range {
  double low = INFINITY, high = -INFINITY;
  void add(double value) {
    low = std::min(low, value);
    high = std::max(high, value);
  }
  double spread() const { return high >= low ? high - low : 0; }
};

}  // namespace

int main(int argc, char** argv) {
  const Settings settings = parse_arguments(argc, argv);
  int32_t gpus = 0;
  if (!settings.cpu && (fdnn_cuda_device_count(&gpus) != FDNN_STATUS_OK || gpus == 0)) {
    std::printf("SKIPPED: no CUDA device (or a libfusednn without the CUDA backend)\n");
    return 77;
  }
  std::mt19937 random(settings.seed);
  Shared shared;
  shared.cpu = settings.cpu;
  shared.model = create_model(settings, random);
  if (shared.model == nullptr) return 1;
  int64_t max_batch = 0;
  fdnn_shape in{}, out{};
  if (!check(fdnn_model_max_batch(shared.model, &max_batch), "fdnn_model_max_batch") ||
      !check(fdnn_model_input_shape(shared.model, &in), "fdnn_model_input_shape") ||
      !check(fdnn_model_output_shape(shared.model, &out), "fdnn_model_output_shape")) {
    return 1;
  }
  shared.input_elements = elements(in);
  shared.output_elements = elements(out);
  shared.batches = batch_sizes(max_batch, random);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  shared.input.resize(static_cast<size_t>(max_batch * shared.input_elements));
  for (float& v : shared.input) v = normal(random);

  // The references: one thread, one context, each batch on each path.
  {
    fdnn_context* context = nullptr;
    if (!check(fdnn_context_create(shared.model, &context), "fdnn_context_create")) return 1;
    DeviceSide device;
    if (!device.create(shared, max_batch)) {
      std::fprintf(stderr, "cannot allocate the reference's device buffers\n");
      return 1;
    }
    for (int path = 0; path < kPaths; ++path) {
      for (int64_t batch : shared.batches) {
        std::vector<float> output;
        if (shared.cpu && path == kDevice) {
          shared.reference[path].emplace_back();
          continue;
        }
        if (!run_once(shared, context, device, static_cast<Path>(path), batch, output)) return 1;
        shared.reference[path].push_back(std::move(output));
      }
    }
    fdnn_context_destroy(context);
  }
  int64_t paths_differ = 0;
  for (size_t b = 0; b < shared.batches.size() && !shared.cpu; ++b) {
    if (!same_bits(shared.reference[kHost][b], shared.reference[kDevice][b])) ++paths_differ;
  }

  std::printf("load test (%s): %d threads x %.0f s, max_batch %lld, %zu batch sizes:",
              settings.cpu ? "cpu" : "cuda", settings.threads, settings.seconds,
              static_cast<long long>(max_batch), shared.batches.size());
  for (int64_t b : shared.batches) std::printf(" %lld", static_cast<long long>(b));
  std::printf(
      "\nmodel: %s; seed %u; host and device paths differ at %lld of the batch sizes "
      "(each is checked against its own reference)\n",
      settings.model_file.empty() ? "built in (256-512-512-256-10)" : settings.model_file.c_str(),
      settings.seed, static_cast<long long>(paths_differ));
  std::fflush(stdout);

  const Clock::time_point start = Clock::now();
  shared.stop = start + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(settings.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < settings.threads; ++t) {
    threads.emplace_back(worker, std::ref(shared), t, settings.seed, max_batch);
  }
  Range device_range, process_range, rss_range;
  std::vector<Sample> samples;
  const auto every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(settings.sample_every));
  for (Clock::time_point next = start + every; next < shared.stop; next += every) {
    std::this_thread::sleep_until(next);
    const Sample sample = take_sample(shared, start);
    samples.push_back(sample);
    std::printf(
        "sample %7.1f s: runs %lld, device used %.0f MiB, process %.0f MiB, rss %.0f MiB, "
        "mismatches %lld, errors %lld\n",
        sample.seconds, static_cast<long long>(sample.runs), sample.device_used,
        sample.process_device, sample.rss, static_cast<long long>(shared.mismatches.load()),
        static_cast<long long>(shared.errors.load()));
    std::fflush(stdout);
    if (sample.seconds >= settings.warmup) {
      device_range.add(sample.device_used);
      if (sample.process_device >= 0) process_range.add(sample.process_device);
      rss_range.add(sample.rss);
    }
  }
  for (std::thread& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  fdnn_model_destroy(shared.model);

  int64_t total = 0;
  for (const auto& runs : shared.runs) total += runs.load();
  // The device figure the check reads (auto: the process's where nvidia-smi gave it throughout).
  bool use_process = settings.memory_source == "process";
  if (settings.memory_source == "auto" && !samples.empty()) {
    use_process = std::all_of(samples.begin(), samples.end(),
                              [](const Sample& sample) { return sample.process_device >= 0; });
  }
  const Range& device_checked = use_process ? process_range : device_range;
  const bool measured = device_checked.high >= device_checked.low;
  const bool device_flat = settings.cpu || device_checked.spread() <= settings.growth_mib;
  const bool rss_flat = rss_range.spread() <= settings.growth_mib;
  const bool pass = !shared.failed_setup && shared.mismatches == 0 && shared.errors == 0 &&
                    total > 0 && measured && device_flat && rss_flat;
  std::printf(
      "SUMMARY threads=%d seconds=%.1f runs=%lld (host %lld, device %lld, pool %lld) "
      "runs_per_second=%.0f mismatches=%lld errors=%lld\n",
      settings.threads, elapsed, static_cast<long long>(total),
      static_cast<long long>(shared.runs[kHost].load()),
      static_cast<long long>(shared.runs[kDevice].load()),
      static_cast<long long>(shared.runs[kPool].load()), total / elapsed,
      static_cast<long long>(shared.mismatches.load()),
      static_cast<long long>(shared.errors.load()));
  if (measured) {
    std::printf(
        "SUMMARY after %.0f s of warm-up, %zu samples: device used %.0f-%.0f MiB, process "
        "%.0f-%.0f MiB, rss %.0f-%.0f MiB; checked: %s and rss, each within %.0f MiB: %s, %s\n",
        settings.warmup, samples.size(), device_range.low, device_range.high,
        process_range.high >= process_range.low ? process_range.low : -1.0,
        process_range.high >= process_range.low ? process_range.high : -1.0, rss_range.low,
        rss_range.high,
        settings.cpu  ? "no device memory"
        : use_process ? "the process's device memory (nvidia-smi)"
                      : "the device's memory in use (cudaMemGetInfo, every process)",
        settings.growth_mib, device_flat ? "device flat" : "DEVICE MEMORY GREW",
        rss_flat ? "rss flat" : "RSS GREW");
  } else {
    std::printf(
        "SUMMARY no memory sample after the warm-up (%.0f s): run longer or sample more "
        "often\n",
        settings.warmup);
  }
  std::printf("RESULT %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
