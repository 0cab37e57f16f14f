// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's internals: the backend that owns the plan lowered to a program of kernel
// launches (ops, op.hpp) over device-resident weights. Contexts (cuda_context.hpp) own the
// per-run memory and call enqueue().
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/conv/conv_net.hpp"
#include "backends/cuda/device/element_type.hpp"
#include "backends/cuda/elementwise/convert_dtype.hpp"
#include "backends/cuda/exec/op.hpp"
#include "backends/cuda/linear/linear_cublaslt.hpp"
#include "backends/cuda/platform/device_info.hpp"
#include "backends/cuda/platform/device_memory.hpp"
#include "common/checked_math.hpp"
#include "planner/plan.hpp"

namespace fusednn::cuda {

struct HostImages;  // step_lowering.hpp
struct OpRefs;
struct LinearRefs;

// How host-path runs move the input and output (fdnn_host_io), and why.
struct HostIoChoice {
  fdnn_host_io path = FDNN_HOST_IO_STAGED;  // STAGED or MAPPED
  std::string reason;
};

// Which kernel a FusedMlp op runs for a number of rows (CudaBackend::mlp_route).
enum class MlpRoute { TensorCore, Split, Fused };

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const Plan> plan, int64_t max_batch, int device_ordinal,
              bool cuda_graphs, Precision precision, fdnn_host_io host_io,
              const SelectionOverrides& selection_overrides);
  ~CudaBackend() override;

  fdnn_device device() const override { return FDNN_DEVICE_CUDA; }
  // The lowest precision any step runs in: precision() where a step has a kernel for it (the
  // fused MLP on tensor cores), fp32 otherwise.
  Precision effective_precision() const override { return effective_precision_; }
  size_t weight_bytes() const override {
    return weights_.bytes() + tensor_core_images_.bytes() + half_weights_.bytes();
  }
  size_t context_bytes() const override;
  std::unique_ptr<ExecutionContext> create_context() const override;
  // The forms enqueue() would launch for `batch` samples with buffers on 256 bytes (the context's
  // own, and cudaMalloc's), and why. Picks cuBLASLt's algorithm for the batch where a step uses
  // it, as a first run would; launches nothing.
  BackendExplanation explain(int64_t batch) const override;
  // The kernel a FusedMlp op runs for `rows` rows: enqueue() follows it.
  static MlpRoute mlp_route(const MlpChainOp& chain, int64_t rows);

  // Queues the whole plan for `batch` samples on `stream`: input and output are device
  // pointers, workspace a context's workspace_floats() buffer and cublaslt_workspace its
  // cublaslt_workspace_bytes() buffer. Nothing is allocated; the first run of a batch size picks
  // the cuBLASLt algorithms for it (host work only, cached for every context).
  // A 16-bit input only where reads_16_bit_input(batch), a 16-bit output only where
  // writes_16_bit_output(batch, its type): the kernels that touch them convert as they read and
  // write.
  void enqueue(int64_t batch, TypedInput input, TypedOutput output, float* workspace,
               void* cublaslt_workspace, cudaStream_t stream) const;
  // Whether every op that reads the model input at `batch` reads a 16-bit one of type `input` at
  // `data` itself, and whether the op that writes the model output writes one of type `output`
  // at `data` itself (nothing runs in place on it after). Where not, the context widens the
  // caller's input into a float32 buffer first, or narrows the output from one after
  // (convert_dtype.hpp); it decides the output first. `model_output`, `model_output_type`: where
  // the plan writes its output and in which type (the caller's buffer, or the context's float32
  // one when it narrows after), whose alignment and type cuBLASLt's choice depends on.
  bool reads_16_bit_input(int64_t batch, ElementType input, const void* data,
                          const void* model_output,
                          ElementType model_output_type = ElementType::Float32) const;
  bool writes_16_bit_output(int64_t batch, ElementType output, const void* data) const;
  // Whether a cuBLASLt call reads a 16-bit model input itself (LinearOp::reads_16_bit_input), or
  // writes a 16-bit model output itself (LinearOp::writes_16_bit_output): a graph of such a run
  // cannot be re-pointed at other caller buffers.
  bool cublaslt_reads_16_bit_input() const { return cublaslt_reads_16_bit_input_; }
  bool cublaslt_writes_16_bit_output() const { return cublaslt_writes_16_bit_output_; }

  const Plan& plan() const { return *plan_; }
  const DeviceInfo& device_info() const { return device_; }
  int64_t max_batch() const { return max_batch_; }
  bool cuda_graphs() const { return cuda_graphs_; }
  // The precision the caller allows (fdnn_model_options::precision).
  Precision precision() const { return precision_; }
  int64_t workspace_floats() const { return workspace_floats_; }
  // Where in the workspace (floats) the 16-bit x of the ops with a half_weight is staged.
  int64_t half_staging_offset() const { return half_staging_offset_; }
  // Where in the workspace (floats) split chains (MlpChainOp::split) keep their first layer's
  // output.
  int64_t split_middle_offset() const { return split_middle_offset_; }
  int64_t input_floats() const {
    return checked_multiply(max_batch_, plan_->values[0].elements, FDNN_STATUS_OUT_OF_MEMORY,
                            "the GPU input buffer for options.max_batch");
  }
  int64_t output_floats() const {
    return checked_multiply(max_batch_, plan_->values[plan_->output_value].elements,
                            FDNN_STATUS_OUT_OF_MEMORY,
                            "the GPU output buffer for options.max_batch");
  }
  // The workspace each context gives cuBLASLt; 0 when no step runs on it.
  size_t cublaslt_workspace_bytes() const { return cublaslt_workspace_bytes_; }
  // Why steps meant for cuBLASLt run on the tiled GEMM instead; empty when cuBLASLt is in use.
  const std::string& cublaslt_unavailable_reason() const { return cublaslt_unavailable_reason_; }
  // Whether a device-path graph can be pointed at other caller buffers by rewriting its kernels'
  // parameters: not when a cuBLASLt call reads the model input or writes the model output, since
  // its kernels are not launched through launch_kernel and cannot be re-pointed. Such graphs are
  // kept per pair of caller buffers instead.
  bool device_graphs_repointable() const { return device_graphs_repointable_; }
  // Whether the model input and output may be pinned host memory mapped into the device (the
  // host path's zero-copy runs, cuda_context.hpp): not when cuBLASLt (or the small-batch
  // Linear's bulk copies) reads or writes them, which are not relied on to reach host memory.
  bool host_mapped_io() const { return host_mapped_io_; }
  // Whether a run of `batch` samples may read and write them there: host_mapped_io(), and no
  // step reading the model input takes the Warpgroup MLP form at that batch, whose bulk copies
  // of the input are not relied on to reach host memory either. Such runs are staged.
  bool host_mapped_io_at(int64_t batch) const;
  // The host path the model's contexts take (fdnn_model_options::host_io, the device, and
  // host_mapped_io()), and why: mapped by default on an integrated GPU, staged on a discrete one.
  HostIoChoice host_io_choice() const;
  // fdnn_model_options::host_io as given (AUTO, STAGED or MAPPED).
  fdnn_host_io requested_host_io() const { return requested_host_io_; }
  // Whether a run of `batch` samples reads or writes memory of the context's (workspace values,
  // cuBLASLt's workspace or staging, a split chain's middle) rather than only the caller's
  // buffers and the weights. Runs that touch none need no order against the context's others.
  bool runs_touch_context_memory(int64_t batch) const {
    return runs_touch_context_memory_ || splits_at(batch) > 0;
  }
  // Called by a context that queued a run on a caller's stream with no event to wait on: the
  // destructor then waits for the device before it frees the weights.
  void note_unordered_run() const { unordered_runs_.store(true, std::memory_order_release); }
  // Kernel launches one run of `batch` samples makes (graphs pay off from two).
  // `input_read_in_16_bits`: the run's input is 16-bit and reads_16_bit_input() holds for it; the
  // cuBLASLt steps that take it as their operand then narrow nothing into the staging first.
  int launches_per_run(int64_t batch, bool input_read_in_16_bits = false) const {
    if (single_launch_.takes(batch)) return 1;
    return launches_per_run_ + count_from(split_launch_min_batches_, batch) -
           (input_read_in_16_bits ? cublaslt_input_narrowings_ : 0);
  }
  const std::vector<Op>& ops() const { return ops_; }

  // For tests: every cuBLASLt step refuses cuBLASLt from now on (for batch sizes not run yet),
  // so that the tiled GEMM fallback runs.
  void refuse_cublaslt_for_testing();

 private:
  void upload_and_point(const HostImages& images, const std::vector<OpRefs>& refs);
  void point_linear(const Step& step, const LinearRefs& ref, LinearOp* linear);
  void prepare_runs();
  void plan_single_launch();
  void assign_workspace();
  // Sets the ops' reads_model_input and writes_model_output, and the cuBLASLt ops' 16-bit I/O.
  void find_model_io_ops();
  // Whether `op` runs, at `batch`, an MLP kernel (tensor-core or fp32 FMA) that converts the
  // model input or output itself.
  bool op_takes_16_bit_io(const Op& op, int64_t batch) const;
  // Whether `op` reads, at `batch`, a model input of type `input` at `data` itself.
  bool op_reads_16_bit(const Op& op, int64_t batch, ElementType input, const void* data,
                       const void* model_output, ElementType model_output_type) const;
  // Whether `op` (which writes the model output) writes, at `batch`, one of type `output` at
  // `data` itself.
  bool op_writes_16_bit(const Op& op, int64_t batch, ElementType output, const void* data) const;

  std::shared_ptr<const Plan> plan_;
  int64_t max_batch_;
  bool cuda_graphs_;
  Precision precision_;
  fdnn_host_io requested_host_io_;
  Precision effective_precision_ = Precision::FP32;
  DeviceInfo device_;
  std::unique_ptr<CublasLtHandle> cublaslt_;  // created at load when a step runs on cuBLASLt
  DeviceArray<float> weights_;
  DeviceArray<uint32_t> tensor_core_images_;  // the ops' TensorCoreMlpPlan images, one allocation
  DeviceArray<uint16_t> half_weights_;        // the ops' half_weight, one allocation
  HalfFormat half_format_ = HalfFormat::Bfloat16;  // their type, from the model's precision
  std::vector<Op> ops_;  // declared after the handle and the weights they use: destroyed first
  size_t cublaslt_workspace_bytes_ = 0;
  std::string cublaslt_unavailable_reason_;  // set when cuBLASLt could not be loaded
  std::string cublaslt_origin_;  // the library loaded and its version (CublasLtLibrary::origin)
  bool device_graphs_repointable_ = true;
  bool cublaslt_reads_16_bit_input_ = false;
  bool cublaslt_writes_16_bit_output_ = false;
  // The cuBLASLt steps with 16-bit operands that read the model input: launches_per_run_ counts
  // each one's narrowing of a float32 x, which a 16-bit input they read themselves spares.
  int cublaslt_input_narrowings_ = 0;
  bool host_mapped_io_ = true;
  bool runs_touch_context_memory_ = false;
  mutable std::atomic<bool> unordered_runs_{false};
  std::vector<int64_t> value_offset_;  // device workspace offset (floats) of each workspace value
  int64_t workspace_floats_ = 0;
  int64_t half_staging_offset_ = 0;
  int64_t split_middle_offset_ = 0;
  // Per split chain (MlpChainOp::split), the batch from which it runs split: two kernels, and the
  // context's workspace between them; split_launch_min_batches_ has those of the chains whose
  // split adds a launch (not those with a folded tail).
  std::vector<int64_t> split_min_batches_, split_launch_min_batches_;
  static int count_from(const std::vector<int64_t>& min_batches, int64_t batch) {
    int count = 0;
    for (const int64_t min_batch : min_batches) count += batch >= min_batch ? 1 : 0;
    return count;
  }
  int splits_at(int64_t batch) const { return count_from(split_min_batches_, batch); }
  int launches_per_run_ = 0;
  // The whole network as one kernel for the batches it takes (conv_net.hpp); none when the plan
  // is not a stack of fused conv layers with an optional MLP head.
  ConvNetPlan single_launch_;
};

}  // namespace fusednn::cuda
