#include "backends/cuda/cuda_context.hpp"

#include <cstring>

#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

// Batch sizes a context keeps graphs for, per path; runs of other sizes launch directly.
constexpr size_t kMaxGraphs = 32;

}  // namespace

CudaContext::Resources::Resources(const CudaBackend& backend)
    : workspace(static_cast<size_t>(backend.workspace_floats())),
      cublaslt_workspace(backend.cublaslt_workspace_bytes()),
      device_input(static_cast<size_t>(backend.input_floats())),
      device_output(static_cast<size_t>(backend.output_floats())),
      host_input(static_cast<size_t>(backend.input_floats())),
      host_output(static_cast<size_t>(backend.output_floats())) {}

CudaContext::CudaContext(const CudaBackend& backend)
    : backend_(backend), device_(backend.device_info().ordinal) {
  DeviceScope scope(device_);
  resources_ = std::make_unique<Resources>(backend);
}

CudaContext::~CudaContext() {
  int previous = 0;
  const bool restore = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                       cudaSetDevice(device_) == cudaSuccess;
  if (has_run_) {
    // Work queued on a caller's stream may still use the workspace.
    if (last_stream_ != resources_->stream.get() &&
        cudaEventRecord(resources_->order_event.get(), last_stream_) == cudaSuccess) {
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

void CudaContext::order_after_previous(cudaStream_t stream) {
  if (has_run_ && stream != last_stream_) {
    FDNN_CUDA_CHECK(cudaEventRecord(resources_->order_event.get(), last_stream_));
    FDNN_CUDA_CHECK(cudaStreamWaitEvent(stream, resources_->order_event.get(), 0));
  }
}

CudaContext::CachedGraph* CudaContext::find(std::vector<CachedGraph>& graphs, int64_t batch,
                                             int alignment, const float* input,
                                             const float* output) {
  for (CachedGraph& graph : graphs) {
    if (graph.batch != batch || graph.alignment != alignment) continue;
    if (input != nullptr && (graph.input != input || graph.output != output)) continue;
    return &graph;
  }
  return nullptr;
}

// Kernels pick 16-byte or narrower memory accesses from their pointers' alignment when they are
// launched, so a graph replays only for caller buffers of the alignment it was captured with.
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
    FDNN_CUDA_CHECK(cudaStreamBeginCapture(own, cudaStreamCaptureModeThreadLocal));
    try {
      body(own);
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
  cudaGraphExec_t exec = nullptr;
  FDNN_CUDA_CHECK(cudaGraphInstantiate(&exec, entry.graph.get(), 0));
  entry.exec = GraphExec(exec);
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

void CudaContext::repoint(CachedGraph& graph, const float* input, float* output) {
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
  DeviceScope scope(device_);
  Resources& r = *resources_;
  const cudaStream_t own = r.stream.get();
  order_after_previous(own);
  const Plan& plan = backend_.plan();
  const size_t input_bytes = sizeof(float) * static_cast<size_t>(batch * plan.values[0].elements);
  const size_t output_bytes =
      sizeof(float) * static_cast<size_t>(batch * plan.values[plan.output_value].elements);
  std::memcpy(r.host_input.data(), input, input_bytes);

  auto body = [&](cudaStream_t stream) {
    FDNN_CUDA_CHECK(cudaMemcpyAsync(r.device_input.data(), r.host_input.data(), input_bytes,
                                    cudaMemcpyHostToDevice, stream));
    backend_.enqueue(batch, r.device_input.data(), r.device_output.data(), r.workspace.data(),
                     r.cublaslt_workspace.data(), stream);
    FDNN_CUDA_CHECK(cudaMemcpyAsync(r.host_output.data(), r.device_output.data(), output_bytes,
                                    cudaMemcpyDeviceToHost, stream));
  };
  CachedGraph* graph = nullptr;
  if (backend_.cuda_graphs()) {
    graph = find(host_graphs_, batch, 0);
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
  FDNN_CUDA_CHECK(cudaStreamSynchronize(own));
  std::memcpy(output, r.host_output.data(), output_bytes);
}

void CudaContext::run_device(int64_t batch, const float* input, float* output, void* handle) {
  DeviceScope scope(device_);
  Resources& r = *resources_;
  const cudaStream_t own = r.stream.get();
  const cudaStream_t stream = handle != nullptr ? static_cast<cudaStream_t>(handle) : own;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FDNN_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  const bool caller_capturing = capturing != cudaStreamCaptureStatusNone;
  if (!caller_capturing) order_after_previous(stream);

  const Plan& plan = backend_.plan();
  const int64_t input_bytes = int64_t{sizeof(float)} * batch * plan.values[0].elements;
  const int64_t output_bytes =
      int64_t{sizeof(float)} * batch * plan.values[plan.output_value].elements;
  const auto in_begin = reinterpret_cast<uintptr_t>(input);
  const auto out_begin = reinterpret_cast<uintptr_t>(output);
  const bool overlapping = in_begin < out_begin + static_cast<uintptr_t>(output_bytes) &&
                           out_begin < in_begin + static_cast<uintptr_t>(input_bytes);

  CachedGraph* graph = nullptr;
  if (backend_.cuda_graphs() && backend_.launches_per_run() >= 2 && !caller_capturing &&
      !overlapping) {
    const int alignment = alignment_class(input, output);
    graph = backend_.device_graphs_repointable()
                ? find(device_graphs_, batch, alignment)
                : find(device_graphs_, batch, alignment, input, output);
    if (graph == nullptr && device_graphs_.size() < kMaxGraphs) {
      CachedGraph captured = capture(batch, [&](cudaStream_t capture_stream) {
        backend_.enqueue(batch, input, output, r.workspace.data(), r.cublaslt_workspace.data(),
                         capture_stream);
      });
      captured.input = input;
      captured.output = output;
      captured.alignment = alignment_class(input, output);
      find_pointer_slots(captured, input_bytes, output_bytes);
      device_graphs_.push_back(std::move(captured));
      graph = &device_graphs_.back();
    }
  }
  if (graph != nullptr && (graph->input != input || graph->output != output)) {
    repoint(*graph, input, output);
  }
  if (!caller_capturing) {  // a capturing stream runs later, when the caller's graph does
    has_run_ = true;
    last_stream_ = stream;
  }
  if (graph != nullptr) {
    FDNN_CUDA_CHECK(cudaGraphLaunch(graph->exec.get(), stream));
  } else {
    backend_.enqueue(batch, input, output, r.workspace.data(), r.cublaslt_workspace.data(),
                     stream);
  }
  if (handle == nullptr) FDNN_CUDA_CHECK(cudaStreamSynchronize(own));
}

}  // namespace fusednn::cuda
