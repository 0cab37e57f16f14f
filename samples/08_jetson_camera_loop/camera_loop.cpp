// SPDX-License-Identifier: Apache-2.0
// 08_jetson_camera_loop: a fixed-rate frame loop, as an embedded camera application runs one.
//
// A synthetic frame source stands in for a camera: at a fixed rate it writes a 28 x 28 frame (a
// bright stroke that moves from frame to frame, over noise) into a ring of page-locked, mapped
// host buffers, the memory a camera driver hands out on a Jetson. Each frame is classified by
// LeNet-5 (or the digits MLP, on the frame's 8 x 8 average) straight from that buffer: on an
// integrated GPU the context's host path is mapped (fdnn_context_host_io() says so), so the
// kernels read the frame and write the scores where they lie, with no copies. At the end the
// sample prints the per-frame latency percentiles and how many frames missed their slot.
//
//   camera_loop [MODEL] [--frames N] [--fps F] [--host-io auto|mapped|staged]
//
// MODEL defaults to the repository's models/digits/lenet5.safetensors (mlp.safetensors is the
// MLP). --host-io mapped forces the mapped path on a discrete GPU (for testing it there);
// --host-io staged forces copies. The first frame's scores are checked against the CPU backend
// on the same frame (within 1e-4 relative), so a wrong result exits 1; on a machine without a
// usable GPU the loop runs on the CPU. An error exits 1 with the library's message.
#include <fusednn/fusednn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)
#include <cuda_runtime.h>
#endif

#ifndef FUSEDNN_SAMPLE_MODELS_DIR
#define FUSEDNN_SAMPLE_MODELS_DIR "models/digits"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSide = 28;      // the camera's frame: 28 x 28 grey levels
constexpr int kFrameRing = 3;  // frames in flight between the source and the model

bool ok(fdnn_status status, const char* call) {
  if (status == FDNN_STATUS_OK) return true;
  std::fprintf(stderr, "FAIL: %s returned %s: %s\n", call, fdnn_status_string(status),
               fdnn_last_error_message());
  return false;
}

// Page-locked host memory mapped into the GPU's address space where the CUDA runtime is linked
// (cudaHostAlloc), plain memory otherwise: the library registers plain memory for each run on
// the mapped path, which costs a system call per run that page-locked memory does not.
class FrameMemory {
 public:
  explicit FrameMemory(size_t floats) : floats_(floats) {
#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)
    void* memory = nullptr;
    if (cudaHostAlloc(&memory, floats * sizeof(float),
                      cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess) {
      pinned_ = static_cast<float*>(memory);
      return;
    }
    cudaGetLastError();  // no GPU: fall back to plain memory
#endif
    plain_.resize(floats);
  }
  ~FrameMemory() {
#if defined(FUSEDNN_SAMPLE_WITH_CUDA_RUNTIME)
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
#endif
  }
  FrameMemory(const FrameMemory&) = delete;
  FrameMemory& operator=(const FrameMemory&) = delete;
  float* data() { return pinned_ != nullptr ? pinned_ : plain_.data(); }
  bool page_locked() const { return pinned_ != nullptr; }
  size_t size() const { return floats_; }

 private:
  size_t floats_;
  float* pinned_ = nullptr;
  std::vector<float> plain_;
};

// The synthetic camera: frame n is a diagonal stroke shifted by n, over a fixed noise pattern,
// in [-1, 1] as the digits models were trained on.
void capture(int64_t n, float* frame) {
  uint32_t noise = 12345u;
  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      noise = noise * 1664525u + 1013904223u;
      const int offset = static_cast<int>((x - y + n) % 9);
      const float stroke = (offset == 0 || offset == 1) ? 1.0f : -1.0f;
      frame[y * kSide + x] = 0.9f * stroke + 0.1f * (static_cast<float>(noise >> 8) / 16777216.0f);
    }
  }
}

// A 64-input model's input from a frame: its 8 x 8 average (the digits MLP's 8 x 8 images; the
// last 4 rows and columns are left out). A 28 x 28 model reads the frame itself.
void downsample(const float* frame, float* input) {
  for (int y = 0; y < 8; ++y) {
    for (int x = 0; x < 8; ++x) {
      float sum = 0;
      for (int dy = 0; dy < 3; ++dy)
        for (int dx = 0; dx < 3; ++dx) sum += frame[(y * 3 + dy) * kSide + x * 3 + dx];
      input[y * 8 + x] = sum / 9;
    }
  }
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = static_cast<size_t>(p / 100 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

int64_t elements(const fdnn_shape& shape) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.dims[d];
  return count;
}

struct Model {
  fdnn_model* model = nullptr;
  fdnn_context* context = nullptr;
  ~Model() {
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
  }
};

bool open(const char* path, fdnn_device device, fdnn_host_io host_io, Model* m) {
  fdnn_model_options options;
  if (!ok(fdnn_model_options_init(&options, sizeof options), "fdnn_model_options_init"))
    return false;
  options.device = device;
  options.max_batch = 1;
  options.host_io = host_io;
  return ok(fdnn_model_create_from_file(path, &options, &m->model),
            "fdnn_model_create_from_file") &&
         ok(fdnn_context_create(m->model, &m->context), "fdnn_context_create");
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = FUSEDNN_SAMPLE_MODELS_DIR "/lenet5.safetensors";
  long frames = 240;
  double fps = 240;
  fdnn_host_io host_io = FDNN_HOST_IO_AUTO;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--frames" && i + 1 < argc) {
      frames = std::atol(argv[++i]);
    } else if (arg == "--fps" && i + 1 < argc) {
      fps = std::atof(argv[++i]);
    } else if (arg == "--host-io" && i + 1 < argc) {
      const std::string value = argv[++i];
      host_io = value == "mapped"   ? FDNN_HOST_IO_MAPPED
                : value == "staged" ? FDNN_HOST_IO_STAGED
                                    : FDNN_HOST_IO_AUTO;
      if (value != "mapped" && value != "staged" && value != "auto") {
        std::fprintf(stderr, "FAIL: --host-io takes auto, mapped or staged\n");
        return 1;
      }
    } else if (arg.rfind("--", 0) != 0) {
      path = arg;
    } else {
      std::fprintf(stderr,
                   "usage: %s [MODEL] [--frames N] [--fps F] [--host-io auto|mapped|staged]\n",
                   argv[0]);
      return 1;
    }
  }
  if (frames < 1 || !(fps > 0)) {
    std::fprintf(stderr, "FAIL: --frames and --fps must be positive\n");
    return 1;
  }

  int32_t gpus = 0;
  if (!ok(fdnn_cuda_device_count(&gpus), "fdnn_cuda_device_count")) return 1;
  Model model, reference;
  if (!open(path.c_str(), gpus > 0 ? FDNN_DEVICE_CUDA : FDNN_DEVICE_CPU, host_io, &model) ||
      !open(path.c_str(), FDNN_DEVICE_CPU, FDNN_HOST_IO_AUTO, &reference)) {
    return 1;
  }
  fdnn_shape in_shape, out_shape;
  if (!ok(fdnn_model_input_shape(model.model, &in_shape), "fdnn_model_input_shape") ||
      !ok(fdnn_model_output_shape(model.model, &out_shape), "fdnn_model_output_shape")) {
    return 1;
  }
  const int64_t input_count = elements(in_shape), output_count = elements(out_shape);
  if (input_count != kSide * kSide && input_count != 64) {
    std::fprintf(stderr, "FAIL: %s takes %lld inputs; the camera gives 28 x 28 (or 8 x 8)\n",
                 path.c_str(), static_cast<long long>(input_count));
    return 1;
  }
  const char* where = "the CPU";
  fdnn_host_io path_used = FDNN_HOST_IO_STAGED;
  if (gpus > 0) {
    if (!ok(fdnn_context_host_io(model.context, &path_used), "fdnn_context_host_io")) return 1;
    where = path_used == FDNN_HOST_IO_MAPPED ? "the GPU, mapped host path (no copies)"
                                             : "the GPU, staged host path (copies)";
  }

  // The ring: each slot holds the camera's frame, the MLP's downsampled input (none for a model
  // that reads the frame itself) and the scores.
  const bool reads_frame = input_count == kSide * kSide;
  const size_t slot_floats =
      static_cast<size_t>(kSide * kSide + (reads_frame ? 0 : input_count) + output_count);
  FrameMemory memory(slot_floats * kFrameRing);
  std::printf("camera_loop: %s on %s; %ld frames at %.0f fps; frames in %s memory\n", path.c_str(),
              where, frames, fps, memory.page_locked() ? "page-locked" : "plain");

  // The first frame, checked against the CPU backend.
  std::vector<float> expected(static_cast<size_t>(output_count));
  std::vector<double> latency_us;
  latency_us.reserve(static_cast<size_t>(frames));
  long missed = 0;
  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1 / fps));
  auto next = Clock::now();
  for (long n = 0; n < frames; ++n) {
    std::this_thread::sleep_until(next);
    next += period;
    float* slot = memory.data() + static_cast<size_t>(n % kFrameRing) * slot_floats;
    float* frame = slot;
    float* input = reads_frame ? frame : frame + kSide * kSide;
    float* scores = reads_frame ? frame + kSide * kSide : input + input_count;
    capture(n, frame);  // the camera's frame arrives
    const auto start = Clock::now();
    if (!reads_frame) downsample(frame, input);
    if (!ok(fdnn_context_run(model.context, 1, input, static_cast<size_t>(input_count), scores,
                             static_cast<size_t>(output_count)),
            "fdnn_context_run")) {
      return 1;
    }
    const auto end = Clock::now();
    latency_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    if (end > next) ++missed;
    if (n == 0) {
      if (!ok(fdnn_context_run(reference.context, 1, input, static_cast<size_t>(input_count),
                               expected.data(), expected.size()),
              "fdnn_context_run (CPU reference)")) {
        return 1;
      }
      float largest = 0;
      for (const float value : expected) largest = std::max(largest, std::fabs(value));
      for (int64_t o = 0; o < output_count; ++o) {
        if (!(std::fabs(scores[o] - expected[static_cast<size_t>(o)]) <=
              1e-4f * std::max(largest, 1.0f))) {
          std::fprintf(stderr, "FAIL: frame 0 score %lld is %g, the CPU backend says %g\n",
                       static_cast<long long>(o), scores[o], expected[static_cast<size_t>(o)]);
          return 1;
        }
      }
      const int64_t best = std::max_element(scores, scores + output_count) - scores;
      std::printf("frame 0: class %lld, the same scores as the CPU backend\n",
                  static_cast<long long>(best));
    }
  }
  std::printf("latency per frame (us): p50 %.1f, p90 %.1f, p99 %.1f, max %.1f; missed slots: %ld\n",
              percentile(latency_us, 50), percentile(latency_us, 90), percentile(latency_us, 99),
              percentile(latency_us, 100), missed);
  return 0;
}
