// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/exec/cuda_context.hpp"

#include <cstring>

#include "backends/cuda/elementwise/convert_dtype.hpp"
#include "backends/cuda/exec/host_registration.hpp"
#include "common/caller_dtype.hpp"
#include "common/error.hpp"
#include "common/load_timeline.hpp"

namespace fusednn::cuda {
namespace {

// Batch sizes a context keeps graphs for, per path; runs of other sizes launch directly.
constexpr size_t kMaxGraphs = 32;

// The most input (and, separately, output) bytes a host-path run reads and writes in pinned
// memory through its device mapping instead of copying (cuda_context.hpp). The kernels may read
// an input more than once, each time over the bus, so only small batches qualify.
constexpr size_t kZeroCopyBytes = 16 * 1024;

// The device's view of pinned host memory, or null where it has none (the caller then copies).
float* device_view(float* host) {
  if (host == nullptr) return nullptr;
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess) {
    cudaGetLastError();  // not sticky: leave nothing for the next check
    return nullptr;
  }
  return static_cast<float*>(device);
}

static_assert(static_cast<int32_t>(HalfFormat::Binary16) == FDNN_DTYPE_FLOAT16 &&
                  static_cast<int32_t>(HalfFormat::Bfloat16) == FDNN_DTYPE_BFLOAT16,
              "HalfFormat mirrors fdnn_dtype's 16-bit values");

HalfFormat half_format(fdnn_dtype dtype) { return static_cast<HalfFormat>(dtype); }

static_assert(static_cast<int32_t>(ElementType::Float32) == FDNN_DTYPE_FLOAT32 &&
                  static_cast<int32_t>(ElementType::Float16) == FDNN_DTYPE_FLOAT16 &&
                  static_cast<int32_t>(ElementType::Bfloat16) == FDNN_DTYPE_BFLOAT16,
              "ElementType mirrors fdnn_dtype");

ElementType element_type(fdnn_dtype dtype) { return static_cast<ElementType>(dtype); }

}  // namespace

CudaContext::Resources::Resources(const CudaBackend& backend) {
  FDNN_LOAD_STAMP("context: stream, event");
  // Each piece on 256 bytes (64 floats), as the workspace's slots and cuBLASLt's workspace want.
  auto slot = [](int64_t floats) { return static_cast<size_t>((floats + 63) / 64 * 64); };
  const size_t workspace_floats = slot(backend.workspace_floats());
  const size_t cublaslt_floats = slot(static_cast<int64_t>(
      (backend.cublaslt_workspace_bytes() + sizeof(float) - 1) / sizeof(float)));
  input_floats = slot(backend.input_floats());
  output_floats = slot(backend.output_floats());
  device_memory = DeviceArray<float>(workspace_floats + cublaslt_floats);
  FDNN_LOAD_STAMP("context: device memory");
  float* device = device_memory.data();
  workspace = device;
  if (backend.cublaslt_workspace_bytes() > 0) {
    cublaslt_workspace = reinterpret_cast<unsigned char*>(device + workspace_floats);
  }
}

void CudaContext::ensure_device_staging() {
  Resources& r = *resources_;
  if (r.device_input != nullptr) return;
  r.device_staging = DeviceArray<float>(r.input_floats + r.output_floats);
  r.device_input = r.device_staging.data();
  r.device_output = r.device_input + r.input_floats;
}

void CudaContext::ensure_host_staging() {
  Resources& r = *resources_;
  if (r.host_input != nullptr) return;
  r.pinned_memory = PinnedArray<float>(r.input_floats + r.output_floats);
  r.host_input = r.pinned_memory.data();
  r.host_output = r.host_input + r.input_floats;
  // The staging's device view, from its allocation's start (the output lies inside it).
  mapped_input_ = device_view(r.host_input);
  if (mapped_input_ != nullptr) mapped_output_ = mapped_input_ + r.input_floats;
  FDNN_LOAD_STAMP("run: staging made");
}

CudaContext::CudaContext(const CudaBackend& backend)
    : backend_(backend), device_(backend.device_info().ordinal) {
  DeviceScope scope(device_);
  FDNN_LOAD_STAMP("context: start");
  resources_ = std::make_unique<Resources>(backend);
  // The mapped path stages, in the mapped staging, the buffers it cannot register: it needs a
  // device that maps host memory.
  int can_map = 0;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, device_));
  if (backend_.host_io_choice().path == FDNN_HOST_IO_MAPPED && can_map != 0) {
    host_io_ = FDNN_HOST_IO_MAPPED;
  }
}

bool CudaContext::host_zero_copy(int64_t batch, size_t input_bytes, size_t output_bytes) const {
  const Forced forced = backend_.device_info().overrides.host_zero_copy;
  if (mapped_input_ == nullptr || mapped_output_ == nullptr || forced == Forced::Off ||
      backend_.requested_host_io() != FDNN_HOST_IO_AUTO || !backend_.host_mapped_io_at(batch)) {
    return false;
  }
  return forced == Forced::On || (input_bytes <= kZeroCopyBytes && output_bytes <= kZeroCopyBytes);
}

CudaContext::~CudaContext() {
  int previous = 0;
  const bool restore = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                       cudaSetDevice(device_) == cudaSuccess;
  if (has_run_) {
    // Work queued on a caller's stream may still use the workspace. The event was recorded on
    // that stream when the work was queued: the caller may have destroyed the stream since.
    if (last_stream_ != resources_->stream.get()) {
      cudaEventSynchronize(resources_->order_event.get());
    }
    cudaStreamSynchronize(resources_->stream.get());
  }
  host_graphs_.clear();
  device_graphs_.clear();
  resources_.reset();
  cudaGetLastError();  // a failure above leaves nothing for the caller's next check
  if (restore) cudaSetDevice(previous);
}

// A run on a caller's stream records order_event there as it is queued (run_device_in_dtypes),
// so nothing here touches a caller's stream after its call returned: the caller may destroy it.
void CudaContext::order_after_previous(cudaStream_t stream) {
  if (has_run_ && stream != last_stream_) {
    if (last_stream_ == resources_->stream.get()) {
      FDNN_CUDA_CHECK(cudaEventRecord(resources_->order_event.get(), last_stream_));
    }
    FDNN_CUDA_CHECK(cudaStreamWaitEvent(stream, resources_->order_event.get(), 0));
  }
}

CudaContext::CachedGraph* CudaContext::find(std::vector<CachedGraph>& graphs, int64_t batch,
                                            int alignment, fdnn_dtype input_dtype,
                                            fdnn_dtype output_dtype, int conversions,
                                            const void* input, const void* output) {
  for (CachedGraph& graph : graphs) {
    if (graph.batch != batch || graph.alignment != alignment) continue;
    if (graph.input_dtype != input_dtype || graph.output_dtype != output_dtype) continue;
    if (graph.conversions != conversions) continue;
    if (input != nullptr && (graph.input != input || graph.output != output)) continue;
    return &graph;
  }
  return nullptr;
}

// Kernels pick 16-byte or narrower memory accesses from their pointers' alignment when they are
// launched, so a graph replays only for caller buffers of the alignment it was captured with.
// Graphs are kept per class and re-pointed within it, so a kernel may choose its accesses by
// 16-byte alignment of the caller's buffers, never by a finer one (8-byte float2 stores chosen
// for a buffer 8 bytes off 16 faulted when replayed 4 bytes off).
int CudaContext::alignment_class(const void* input, const void* output) {
  return (reinterpret_cast<uintptr_t>(input) % 16 == 0 ? 1 : 0) |
         (reinterpret_cast<uintptr_t>(output) % 16 == 0 ? 2 : 0);
}

template <typename Body>
CudaContext::CachedGraph CudaContext::capture(int64_t batch, Body&& body) {
  const cudaStream_t own = resources_->stream.get();
  CachedGraph entry;
  entry.batch = batch;
  CaptureLog log;
  {
    ScopedCaptureLog scoped(&log);
    // Thread-local mode: other threads' CUDA calls neither break this capture nor are refused.
    FDNN_LOAD_STAMP("run: capture start");
    FDNN_CUDA_CHECK(cudaStreamBeginCapture(own, cudaStreamCaptureModeThreadLocal));
    try {
      body(own);
      FDNN_LOAD_STAMP("run: body captured");
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(own, &broken);
      if (broken) cudaGraphDestroy(broken);
      cudaGetLastError();
      throw;
    }
    cudaGraph_t raw = nullptr;
    FDNN_CUDA_CHECK(cudaStreamEndCapture(own, &raw));
    entry.graph = Graph(raw);
  }
  FDNN_LOAD_STAMP("run: capture ended");
  entry.exec = GraphExec(entry.graph.get());
  FDNN_LOAD_STAMP("run: graph instantiated");
  entry.launches = std::move(log.launches);
  return entry;
}

// Finds, in every captured kernel's parameters, the 8-byte words that point into the caller's
// input or output buffer; those kernels are re-pointed when the caller's buffers change.
void CudaContext::find_pointer_slots(CachedGraph& graph, int64_t input_bytes,
                                     int64_t output_bytes) {
  const auto input = reinterpret_cast<uintptr_t>(graph.input);
  const auto output = reinterpret_cast<uintptr_t>(graph.output);
  for (const CapturedLaunch& launch : graph.launches) {
    Patch patch;
    for (size_t offset = 0; offset + sizeof(uintptr_t) <= launch.parameters.size();
         offset += sizeof(uintptr_t)) {
      uintptr_t word = 0;
      std::memcpy(&word, launch.parameters.data() + offset, sizeof word);
      if (word >= input && word < input + static_cast<uintptr_t>(input_bytes)) {
        patch.slots.push_back({offset, false, static_cast<int64_t>(word - input)});
      } else if (word >= output && word < output + static_cast<uintptr_t>(output_bytes)) {
        patch.slots.push_back({offset, true, static_cast<int64_t>(word - output)});
      }
    }
    if (!patch.slots.empty()) {
      patch.launch = launch;
      patch.scratch = launch.parameters;
      graph.patches.push_back(std::move(patch));
    }
  }
}

void CudaContext::repoint(CachedGraph& graph, const void* input, void* output) {
  for (Patch& patch : graph.patches) {
    std::memcpy(patch.scratch.data(), patch.launch.parameters.data(), patch.scratch.size());
    for (const PointerSlot& slot : patch.slots) {
      const char* base = slot.is_output ? reinterpret_cast<const char*>(output)
                                        : reinterpret_cast<const char*>(input);
      const char* address = base + slot.delta;
      std::memcpy(patch.scratch.data() + slot.offset, &address, sizeof address);
    }
    void* arguments[] = {patch.scratch.data()};
    cudaKernelNodeParams params{};
    params.func = const_cast<void*>(patch.launch.function);
    params.gridDim = patch.launch.grid;
    params.blockDim = patch.launch.block;
    params.sharedMemBytes = static_cast<unsigned>(patch.launch.shared_bytes);
    params.kernelParams = arguments;
    params.extra = nullptr;
    FDNN_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(graph.exec.get(), patch.launch.node, &params));
  }
  graph.input = input;
  graph.output = output;
}

void CudaContext::run_host(int64_t batch, const float* input, float* output) {
  run_host_in_dtypes(batch, input, FDNN_DTYPE_FLOAT32, output, FDNN_DTYPE_FLOAT32);
}

bool CudaContext::run_host_typed(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                 void* output, fdnn_dtype output_dtype) {
  run_host_in_dtypes(batch, input, input_dtype, output, output_dtype);
  return true;
}

// The graphs run on the staging buffers, which are float32 whatever the caller's dtypes: the
// conversions happen on the host, into and out of the pinned staging (a plain copy for float32).
void CudaContext::run_host_in_dtypes(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                     void* output, fdnn_dtype output_dtype) {
  if (host_io_ == FDNN_HOST_IO_MAPPED && backend_.host_mapped_io_at(batch)) {
    run_host_mapped(batch, input, input_dtype, output, output_dtype);
    return;
  }
  DeviceScope scope(device_);
  ensure_device_staging();
  ensure_host_staging();
  Resources& r = *resources_;
  const cudaStream_t own = r.stream.get();
  order_after_previous(own);
  const Plan& plan = backend_.plan();
  const auto input_count = static_cast<size_t>(batch * plan.values[0].elements);
  const auto output_count = static_cast<size_t>(batch * plan.values[plan.output_value].elements);
  const size_t input_bytes = sizeof(float) * input_count;
  const size_t output_bytes = sizeof(float) * output_count;
  widen_to_float(input, input_dtype, r.host_input, input_count);

  const bool zero_copy = host_zero_copy(batch, input_bytes, output_bytes);
  auto body = [&](cudaStream_t stream) {
    if (zero_copy) {
      backend_.enqueue(batch, mapped_input_, mapped_output_, r.workspace, r.cublaslt_workspace,
                       stream);
      return;
    }
    FDNN_CUDA_CHECK(
        cudaMemcpyAsync(r.device_input, r.host_input, input_bytes, cudaMemcpyHostToDevice, stream));
    backend_.enqueue(batch, r.device_input, r.device_output, r.workspace, r.cublaslt_workspace,
                     stream);
    FDNN_CUDA_CHECK(cudaMemcpyAsync(r.host_output, r.device_output, output_bytes,
                                    cudaMemcpyDeviceToHost, stream));
  };
  CachedGraph* graph = nullptr;
  if (backend_.cuda_graphs()) {
    graph = find(host_graphs_, batch, 0, FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT32);
    if (graph == nullptr && host_graphs_.size() < kMaxGraphs) {
      host_graphs_.push_back(capture(batch, body));
      graph = &host_graphs_.back();
    }
  }
  has_run_ = true;
  last_stream_ = own;
  if (graph != nullptr) {
    FDNN_CUDA_CHECK(cudaGraphLaunch(graph->exec.get(), own));
  } else {
    body(own);
  }
  FDNN_LOAD_STAMP("run: host path queued");
  FDNN_CUDA_CHECK(cudaStreamSynchronize(own));
  FDNN_LOAD_STAMP("run: host path synchronised");
  narrow_from_float(r.host_output, output, output_dtype, output_count);
}

void CudaContext::run_host_mapped(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                  void* output, fdnn_dtype output_dtype) {
  DeviceScope scope(device_);
  Resources& r = *resources_;
  const Plan& plan = backend_.plan();
  const auto input_count = static_cast<size_t>(batch * plan.values[0].elements);
  const auto output_count = static_cast<size_t>(batch * plan.values[plan.output_value].elements);
  const size_t input_bytes = dtype_bytes(input_dtype) * input_count;
  const size_t output_bytes = dtype_bytes(output_dtype) * output_count;
  const auto in_begin = reinterpret_cast<uintptr_t>(input);
  const auto out_begin = reinterpret_cast<uintptr_t>(output);
  // The kernels read and write whole elements: a buffer misaligned for its dtype is staged. So
  // is an output that overlaps the input, which the kernels would overwrite while reading it,
  // and a 16-bit input that cuBLASLt could read itself (it is not relied on to reach host
  // memory); staged, it is widened to float32 and narrowed again by a kernel of the plan's.
  const bool overlapping =
      in_begin < out_begin + output_bytes && out_begin < in_begin + input_bytes;
  const bool input_mappable =
      in_begin % dtype_bytes(input_dtype) == 0 &&
      (input_dtype == FDNN_DTYPE_FLOAT32 || !backend_.cublaslt_reads_16_bit_input());
  const bool output_mappable = out_begin % dtype_bytes(output_dtype) == 0 && !overlapping;
  const DeviceInfo& device = backend_.device_info();
  // Declared before the run's guard: released only once the stream is idle.
  MappedHostRange input_range(input_mappable ? input : nullptr, input_bytes, false, device);
  MappedHostRange output_range(output_mappable ? output : nullptr, output_bytes, true, device);

  const void* plan_input = input_range.device(input);
  void* plan_output = output_range.device(output);
  if (plan_input == nullptr || plan_output == nullptr) {
    ensure_host_staging();
    if (mapped_input_ == nullptr) {
      fail(FDNN_STATUS_DEVICE_ERROR,
           "the mapped host path cannot map the context's pinned "
           "staging into the device; create the model with "
           "host_io FDNN_HOST_IO_STAGED");
    }
  }
  fdnn_dtype plan_input_dtype = input_dtype;
  if (plan_input == nullptr) {
    widen_to_float(input, input_dtype, r.host_input, input_count);
    plan_input = mapped_input_;
    plan_input_dtype = FDNN_DTYPE_FLOAT32;
  }
  fdnn_dtype plan_output_dtype = output_dtype;
  if (plan_output == nullptr) {
    plan_output = mapped_output_;
    plan_output_dtype = FDNN_DTYPE_FLOAT32;
  }
  try {
    // The NULL stream: the context's own, synchronised before this returns.
    run_device_in_dtypes(batch, plan_input, plan_input_dtype, plan_output, plan_output_dtype,
                         nullptr);
  } catch (...) {
    // The kernels may still use the caller's pages: wait before the registrations are released.
    cudaStreamSynchronize(r.stream.get());
    cudaGetLastError();
    throw;
  }
  FDNN_LOAD_STAMP("run: mapped host path synchronised");
  if (plan_output == mapped_output_) {
    narrow_from_float(r.host_output, output, output_dtype, output_count);
  }
}

void CudaContext::run_device(int64_t batch, const float* input, float* output, void* handle) {
  run_device_in_dtypes(batch, input, FDNN_DTYPE_FLOAT32, output, FDNN_DTYPE_FLOAT32, handle);
}

void CudaContext::run_device_typed(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                   void* output, fdnn_dtype output_dtype, void* handle) {
  run_device_in_dtypes(batch, input, input_dtype, output, output_dtype, handle);
}

void CudaContext::run_device_in_dtypes(int64_t batch, const void* input, fdnn_dtype input_dtype,
                                       void* output, fdnn_dtype output_dtype, void* handle) {
  DeviceScope scope(device_);
  Resources& r = *resources_;
  const cudaStream_t own = r.stream.get();
  const cudaStream_t stream = handle != nullptr ? static_cast<cudaStream_t>(handle) : own;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FDNN_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  const bool caller_capturing = capturing != cudaStreamCaptureStatusNone;
  // A 16-bit side goes through the context's float32 buffer only where no kernel reads (or
  // writes) it in 16 bits itself at this batch; the plan then sees float32 on that side.
  const bool narrow = output_dtype != FDNN_DTYPE_FLOAT32 &&
                      !backend_.writes_16_bit_output(batch, element_type(output_dtype), output);
  if (narrow) ensure_device_staging();
  const bool widen =
      input_dtype != FDNN_DTYPE_FLOAT32 &&
      !backend_.reads_16_bit_input(batch, element_type(input_dtype), input,
                                   narrow ? static_cast<void*>(r.device_output) : output,
                                   narrow ? ElementType::Float32 : element_type(output_dtype));
  if (widen) ensure_device_staging();
  // A run of a plan that reads and writes only the caller's buffers and the weights, in one
  // launch (no conversion pass, no graph of the context's), shares nothing with the context's
  // other runs: it neither waits for the previous one nor records the order event, whose cost
  // is a noticeable part of so short a run.
  const int plan_launches =
      backend_.launches_per_run(batch, input_dtype != FDNN_DTYPE_FLOAT32 && !widen);
  const bool shares_nothing =
      !widen && !narrow && !backend_.runs_touch_context_memory(batch) && plan_launches < 2;
  const bool ordered = !caller_capturing && !shares_nothing;
  if (ordered) order_after_previous(stream);
  // Such a run still reads the weights: the backend waits for the device before freeing them.
  if (shares_nothing && !caller_capturing && stream != own) backend_.note_unordered_run();

  const Plan& plan = backend_.plan();
  const int64_t input_count = batch * plan.values[0].elements;
  const int64_t output_count = batch * plan.values[plan.output_value].elements;
  // The caller buffers' real extents: 2 bytes per element for the 16-bit dtypes. The pointer-slot
  // scan of a captured graph relies on them (a float32 extent would reach past a 16-bit buffer,
  // where a word pointing into the context's own memory could pass for a caller pointer).
  const int64_t input_bytes = static_cast<int64_t>(dtype_bytes(input_dtype)) * input_count;
  const int64_t output_bytes = static_cast<int64_t>(dtype_bytes(output_dtype)) * output_count;

  auto body = [&](const void* caller_input, void* caller_output, cudaStream_t run_stream) {
    const TypedInput plan_input =
        widen ? TypedInput(r.device_input) : TypedInput(caller_input, element_type(input_dtype));
    const TypedOutput plan_output = narrow ? TypedOutput(r.device_output)
                                           : TypedOutput(caller_output, element_type(output_dtype));
    if (widen) {
      launch_widen(caller_input, half_format(input_dtype), r.device_input, input_count,
                   backend_.device_info(), run_stream);
    }
    backend_.enqueue(batch, plan_input, plan_output, r.workspace, r.cublaslt_workspace, run_stream);
    if (narrow) {
      launch_narrow(r.device_output, caller_output, half_format(output_dtype), output_count,
                    backend_.device_info(), run_stream);
    }
  };
  const int launches = plan_launches + (widen ? 1 : 0) + (narrow ? 1 : 0);
  // cuBLASLt kernels cannot be re-pointed; with both sides converted, no plan kernel touches a
  // caller buffer (only the conversion kernels do, and they can be).
  const bool cublaslt_reads_caller_input =
      input_dtype != FDNN_DTYPE_FLOAT32 && !widen && backend_.cublaslt_reads_16_bit_input();
  const bool cublaslt_writes_caller_output =
      output_dtype != FDNN_DTYPE_FLOAT32 && !narrow && backend_.cublaslt_writes_16_bit_output();
  const bool repointable = (backend_.device_graphs_repointable() && !cublaslt_reads_caller_input &&
                            !cublaslt_writes_caller_output) ||
                           (widen && narrow);

  CachedGraph* graph = nullptr;
  // A run of one launch goes out directly, unless it may call cuBLASLt, whose host side costs
  // more than replaying a graph of its kernels. (Overlapping caller buffers never reach here:
  // the API refuses them.)
  const bool may_call_cublaslt = backend_.cublaslt_workspace_bytes() > 0;
  if (backend_.cuda_graphs() && (launches >= 2 || may_call_cublaslt) && !caller_capturing) {
    const int alignment = alignment_class(input, output);
    const int conversions = (widen ? 1 : 0) | (narrow ? 2 : 0);
    graph = repointable
                ? find(device_graphs_, batch, alignment, input_dtype, output_dtype, conversions)
                : find(device_graphs_, batch, alignment, input_dtype, output_dtype, conversions,
                       input, output);
    if (graph == nullptr && device_graphs_.size() < kMaxGraphs) {
      CachedGraph captured =
          capture(batch, [&](cudaStream_t capture_stream) { body(input, output, capture_stream); });
      captured.input = input;
      captured.output = output;
      captured.input_dtype = input_dtype;
      captured.output_dtype = output_dtype;
      captured.alignment = alignment;
      captured.conversions = conversions;
      find_pointer_slots(captured, input_bytes, output_bytes);
      device_graphs_.push_back(std::move(captured));
      graph = &device_graphs_.back();
    }
  }
  if (graph != nullptr && (graph->input != input || graph->output != output)) {
    repoint(*graph, input, output);
  }
  if (ordered) {  // a capturing stream runs later, when the caller's graph does
    has_run_ = true;
    last_stream_ = stream;
  }
  if (graph != nullptr) {
    FDNN_CUDA_CHECK(cudaGraphLaunch(graph->exec.get(), stream));
  } else {
    body(input, output, stream);
  }
  if (ordered && stream != own) {
    FDNN_CUDA_CHECK(cudaEventRecord(r.order_event.get(), stream));
  }
  if (handle == nullptr) FDNN_CUDA_CHECK(cudaStreamSynchronize(own));
}

}  // namespace fusednn::cuda
