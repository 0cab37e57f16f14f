// SPDX-License-Identifier: Apache-2.0
// One execution context of the CUDA backend: its own non-blocking stream, a workspace for
// max_batch, device and pinned host staging for the host path, and the CUDA graphs it captured.
//
// Host path (run_host), staged (fdnn_host_io; CudaBackend::host_io_choice() picks the path):
// input -> pinned staging -> async copy in, the kernels, async copy out, one stream
// synchronisation, pinned staging -> output. With options.host_io AUTO, where the batch's input
// and output are small (kZeroCopyBytes each) and the backend allows it at the batch
// (CudaBackend::host_mapped_io_at()), the kernels read and write the pinned staging themselves
// through its device mapping, with no copies: each copy in a graph costs microseconds of
// latency, while a few KB read over the bus cost about one round trip. The override
// host_zero_copy=0 turns this off, =1 takes it at every size the backend allows.
// Host path, mapped (integrated GPUs by default; forced by options.host_io): no DMA copy. The
// caller's buffers are registered for the run (host_registration.hpp) and the plan runs on
// their device addresses as the device path runs (run_device_in_dtypes, on the context's own
// stream, graphs re-pointed), then the stream is synchronised and the registrations released.
// A buffer that cannot be registered (unsupported, misaligned for its dtype, overlapping the
// other buffer or a registration it cannot share, a 16-bit input cuBLASLt would read) is
// replaced by the context's mapped pinned staging, with a host memcpy (or dtype conversion) in
// or out. Batches the backend cannot run on host memory (host_mapped_io_at) are staged.
// Device path (run_device): the kernels read and write the caller's device buffers on the
// caller's stream; nothing is copied, allocated or waited for (a NULL stream means the context's
// own stream, and then the call waits).
//
// Graphs: with cuda_graphs on, the first run of each batch size (per path) is captured on the
// context's own stream (never on the legacy default stream, which cannot be captured) and
// instantiated; later runs launch the graph onto the run's stream. A device-path graph captured
// with one pair of caller buffers is pointed at another pair by rewriting the parameters of the
// kernels that touch them (cudaGraphExecKernelNodeSetParams), not by capturing again; where a
// cuBLASLt call touches the caller's buffers (its kernels cannot be re-pointed so), graphs are
// kept per pair of buffers as well as per batch size instead. A plan of one kernel launch skips
// graphs on the device path (a graph launch costs what a kernel launch does), as do runs on a
// stream the caller is itself capturing: those kernels go straight into the caller's capture.
//
// Caller dtypes (run_host_typed / run_device_typed): on the host path a 16-bit input is widened
// into the pinned staging and a 16-bit output narrowed out of it, on the host; the graphs are
// those of run_host. On the device path the kernels that read the model input and write its
// output convert 16-bit buffers themselves where the backend says they can at the run's batch
// (CudaBackend::reads_16_bit_input / writes_16_bit_output: the tensor-core MLP forms, cuBLASLt
// with 16-bit operands); elsewhere
// a 16-bit input is widened on the caller's stream into the context's device_input and a 16-bit
// output narrowed from its device_output (convert_dtype.cu), so those kernels see float32. Either
// way the kernels are launched through launch_kernel: they are captured with the plan, graphs
// are keyed on the dtypes too, and the caller's 16-bit buffers are re-pointed in whichever
// kernels touch them. FLOAT32 both ways is run_host / run_device.
//
// Consecutive runs of one context on different streams are ordered (the new stream waits for
// the old one), since they share the workspace; device-path runs of plans that touch no memory
// of the context's (CudaBackend::runs_touch_context_memory) are not, and record no event.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/exec/cuda_executor.hpp"
#include "backends/cuda/platform/device_memory.hpp"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {

class CudaContext final : public ExecutionContext {
 public:
  explicit CudaContext(const CudaBackend& backend);
  ~CudaContext() override;

  void run_host(int64_t batch, const float* input, float* output) override;
  void run_device(int64_t batch, const float* input, float* output, void* stream) override;
  bool run_host_typed(int64_t batch, const void* input, fdnn_dtype input_dtype, void* output,
                      fdnn_dtype output_dtype) override;
  void run_device_typed(int64_t batch, const void* input, fdnn_dtype input_dtype, void* output,
                        fdnn_dtype output_dtype, void* stream) override;
  fdnn_host_io host_io() const override { return host_io_; }

 private:
  // The memory and handles, created with the model's device current.
  // One device allocation, made with the context, holds the workspace and cuBLASLt's workspace.
  // The staging, sized for max_batch, is made by the first run that needs it (before that run's
  // work), so that a context used only on the device path with float32 buffers never holds it:
  // the device copies of the input and output (the host path's copies, a 16-bit side's
  // conversions on the device path) in one device allocation, and the host path's staging in
  // one pinned allocation, which at a large max_batch costs a first model's load the most
  // (bench/cuda/cold_start.cpp).
  struct Resources {
    explicit Resources(const CudaBackend& backend);
    Stream stream;
    Event order_event;
    DeviceArray<float> device_memory;
    DeviceArray<float> device_staging;
    PinnedArray<float> pinned_memory;
    float* workspace = nullptr;                   // in device_memory, each on 256 bytes
    unsigned char* cublaslt_workspace = nullptr;  // null when no step runs on cuBLASLt
    float* device_input = nullptr;                // in device_staging; null until made
    float* device_output = nullptr;
    float* host_input = nullptr;  // in pinned_memory; null until made
    float* host_output = nullptr;
    size_t input_floats = 0;  // each side's staging, on 256 bytes
    size_t output_floats = 0;
  };

  // Where a caller buffer's address sits in a captured kernel's parameters.
  struct PointerSlot {
    size_t offset = 0;
    bool is_output = false;
    int64_t delta = 0;  // bytes past the buffer's start
  };
  struct Patch {
    CapturedLaunch launch;
    std::vector<PointerSlot> slots;
    std::vector<unsigned char> scratch;  // the rewritten parameters, sized once
  };
  struct CachedGraph {
    int64_t batch = 0;
    int alignment = 0;  // alignment_class() of the buffers it was captured with
    fdnn_dtype input_dtype = FDNN_DTYPE_FLOAT32;  // the caller buffers' element types
    fdnn_dtype output_dtype = FDNN_DTYPE_FLOAT32;
    // Which sides the context converts (1: the input is widened, 2: the output narrowed). For
    // one batch and pair of dtypes this can vary with the input's address (cuBLASLt reads a
    // 16-bit input itself on 256 bytes only), and with it whether the graph can be re-pointed.
    int conversions = 0;
    const void* input = nullptr;
    void* output = nullptr;
    Graph graph;
    GraphExec exec;
    std::vector<CapturedLaunch> launches;
    std::vector<Patch> patches;
  };

  template <typename Body>
  CachedGraph capture(int64_t batch, Body&& body);
  // The graph for `batch` captured on buffers of `alignment` (alignment_class()), of these
  // dtypes and these conversions (CachedGraph::conversions); with `input` / `output` not null,
  // only one captured on those buffers.
  static CachedGraph* find(std::vector<CachedGraph>& graphs, int64_t batch, int alignment,
                           fdnn_dtype input_dtype, fdnn_dtype output_dtype, int conversions = 0,
                           const void* input = nullptr, const void* output = nullptr);
  static int alignment_class(const void* input, const void* output);
  // input_bytes / output_bytes: the caller buffers' real sizes in bytes (2 per 16-bit element).
  static void find_pointer_slots(CachedGraph& graph, int64_t input_bytes, int64_t output_bytes);
  static void repoint(CachedGraph& graph, const void* input, void* output);
  // The host path, converting from and to the caller's dtypes while staging.
  void run_host_in_dtypes(int64_t batch, const void* input, fdnn_dtype input_dtype, void* output,
                          fdnn_dtype output_dtype);
  // The mapped host path (see the file comment).
  void run_host_mapped(int64_t batch, const void* input, fdnn_dtype input_dtype, void* output,
                       fdnn_dtype output_dtype);
  // The device path; FLOAT32 both ways runs the plan on the caller's buffers.
  void run_device_in_dtypes(int64_t batch, const void* input, fdnn_dtype input_dtype, void* output,
                            fdnn_dtype output_dtype, void* handle);
  void order_after_previous(cudaStream_t stream);
  // Make the device staging, or the pinned staging and its device view, where not yet made.
  void ensure_device_staging();
  void ensure_host_staging();
  // Whether a host-path run of these sizes skips the copies (see the file comment).
  bool host_zero_copy(int64_t batch, size_t input_bytes, size_t output_bytes) const;

  const CudaBackend& backend_;
  int device_;
  std::unique_ptr<Resources> resources_;
  cudaStream_t last_stream_ = nullptr;  // of the last run ordered against the others
  bool has_run_ = false;
  // The pinned staging as the device sees it; null where the device cannot map host memory.
  float* mapped_input_ = nullptr;
  float* mapped_output_ = nullptr;
  // CudaBackend::host_io_choice()'s path, staged where the device cannot map host memory.
  fdnn_host_io host_io_ = FDNN_HOST_IO_STAGED;
  std::vector<CachedGraph> host_graphs_;
  std::vector<CachedGraph> device_graphs_;
};

}  // namespace fusednn::cuda
