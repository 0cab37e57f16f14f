// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: lowers a plan to ops (step_lowering.hpp, with the forms the selection table
// of form_selection.hpp picks), uploads every weight once in one allocation, in the layout its
// kernel reads, and queues a run as a sequence of launches on one stream.
#include "backends/cuda/cuda_backend.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <string>

#include "backends/cuda/conv/channel_affine.hpp"
#include "backends/cuda/conv/conv2d.hpp"
#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "backends/cuda/conv/conv_pool.hpp"
#include "backends/cuda/conv/pool2d.hpp"
#include "backends/cuda/elementwise/concat.hpp"
#include "backends/cuda/elementwise/convert_dtype.hpp"
#include "backends/cuda/elementwise/elementwise.hpp"
#include "backends/cuda/elementwise/layer_norm.hpp"
#include "backends/cuda/elementwise/softmax.hpp"
#include "backends/cuda/exec/cuda_context.hpp"
#include "backends/cuda/exec/cuda_executor.hpp"
#include "backends/cuda/linear/cublaslt_library.hpp"
#include "backends/cuda/linear/linear.hpp"
#include "backends/cuda/linear/linear_cublaslt.hpp"
#include "backends/cuda/linear/small_batch_linear.hpp"
#include "backends/cuda/mlp/fused_mlp_row_image.hpp"
#include "backends/cuda/selection/form_selection.hpp"
#include "backends/cuda/selection/step_lowering.hpp"
#include "common/checked_math.hpp"
#include "common/elementwise_op.hpp"
#include "common/error.hpp"
#include "common/half_float.hpp"
#include "common/load_timeline.hpp"

namespace fusednn {
namespace cuda {
namespace {

static_assert(kSelectionFusedMlpMaxWidth == kFusedMlpMaxWidth &&
                  kSelectionBlockMaxRows == kFusedMlpBlockMaxRows &&
                  kSelectionWarpTileRows == kWarpRegisterTileRows,
              "the selection table reasons with the kernels' own limits");

// The cuBLASLt compute type for a model precision: fp32 data throughout, tensor-core products in
// the reduced format from compute capability 8.0 on (unless the override tensor_cores=0).
cublasComputeType_t cublaslt_compute_type(Precision precision, const DeviceInfo& device) {
  if (device.major < kTensorCoreMinMajor || !device.overrides.reduced_tensor_cores) {
    return CUBLAS_COMPUTE_32F;
  }
  switch (precision) {
    case Precision::TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::FP16: return CUBLAS_COMPUTE_32F_FAST_16F;
    case Precision::BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::FP32: break;
  }
  return CUBLAS_COMPUTE_32F;
}

int launches_for(const Op& op, const Step& step) {
  const int passes = static_cast<int>(op.epilogue.size()) - 1;
  switch (op.kind) {
    case OpKind::Add: {
      const int n = static_cast<int>(step.inputs.size());
      const int extra =
          n > kMaxAddInputs ? (n - kMaxAddInputs + kMaxAddInputs - 2) / (kMaxAddInputs - 1) : 0;
      return 1 + extra + passes;
    }
    case OpKind::Concat: return static_cast<int>(step.inputs.size());
    case OpKind::FusedMlp:  // the fused kernel and the row kernel below the tensor-core rows
                            // (a split chain's second kernel: CudaBackend::launches_per_run)
      return (op.as<MlpChainOp>()->row_tail_input >= 0 ? 2 : 1) + std::max(passes, 0);
    default: return 1 + std::max(passes, 0);
  }
}

// The device's properties the selection table and the launchers read, and the overrides.
DeviceInfo query_device(int ordinal, const SelectionOverrides& overrides) {
  DeviceInfo device;
  device.ordinal = ordinal;
  int value = 0;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, ordinal));
  device.major = value;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMinor, ordinal));
  device.minor = value;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, ordinal));
  device.sm_count = std::max(1, value);
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
  device.shared_per_block_optin = static_cast<size_t>(value);
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal));
  device.shared_per_sm = static_cast<size_t>(value);
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrIntegrated, ordinal));
  device.integrated = value != 0;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrHostRegisterSupported, ordinal));
  device.host_register = value != 0;
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrHostRegisterReadOnlySupported, ordinal));
  device.host_register_read_only = value != 0;
  device.overrides = overrides;
  return device;
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const Plan> plan, int64_t max_batch, int device_ordinal,
                         bool cuda_graphs, Precision precision, fdnn_host_io host_io,
                         const SelectionOverrides& selection_overrides)
    : plan_(std::move(plan)),
      max_batch_(max_batch),
      cuda_graphs_(cuda_graphs),
      precision_(precision),
      requested_host_io_(host_io) {
  const std::string reason = cuda_unavailable_reason(device_ordinal);
  if (!reason.empty()) fail(FDNN_STATUS_UNSUPPORTED, "cannot create the CUDA backend: ", reason);
  DeviceScope scope(device_ordinal);
  device_ = query_device(device_ordinal, selection_overrides);
  FDNN_LOAD_STAMP("backend: device attributes");
  // Step by step into ops, each by its step kind's lowering (step_lowering.hpp), which takes
  // its forms from the selection table (form_selection.hpp).
  const Plan& p = *plan_;
  const LoweringInput lowering = make_lowering_input(p, device_, precision_, max_batch_);
  half_format_ = lowering.half_format;
  HostImages images;
  std::vector<OpRefs> refs;
  for (size_t s = 0; s < p.steps.size();) {
    LoweredOp lowered = lower_step(lowering, s, &images);
    if (lowered.runs_reduced_precision) effective_precision_ = precision_;
    if (lowered.cublaslt_touches_model_io) {
      device_graphs_repointable_ = false;
      host_mapped_io_ = false;
    }
    launches_per_run_ += launches_for(lowered.op, p.steps[s]);
    s = static_cast<size_t>(lowered.op.last_step) + 1;
    ops_.push_back(std::move(lowered.op));
    refs.push_back(std::move(lowered.refs));
  }
  FDNN_LOAD_STAMP("backend: ops planned, images built");
  upload_and_point(images, refs);
  prepare_runs();
}

// Loads cuBLASLt where a step runs on it, uploads the images (one allocation each) and points
// the ops at their data.
void CudaBackend::upload_and_point(const HostImages& images, const std::vector<OpRefs>& refs) {
  const Plan& p = *plan_;
  bool uses_cublaslt = false;
  for (const Op& op : ops_) uses_cublaslt = uses_cublaslt || op.kind == OpKind::CublasLtLinear;
  // Without a loadable cuBLASLt those steps run on the tiled GEMM (the reason is kept for
  // cublaslt_unavailable_reason()).
  if (uses_cublaslt && !cublaslt_allowed(device_.overrides)) {
    cublaslt_unavailable_reason_ = "cuBLASLt is off (override cublaslt=0)";
  } else if (const CublasLtLibrary* library =
                 uses_cublaslt ? cublaslt_library(&cublaslt_unavailable_reason_) : nullptr) {
    cublaslt_origin_ = library->origin;
    cublaslt_ = std::make_unique<CublasLtHandle>();  // on the model's device, current here
    cublaslt_workspace_bytes_ = recommended_cublaslt_workspace_bytes(device_);
  }

  FDNN_LOAD_STAMP("backend: cuBLASLt handle");
  // One allocation and one copy for every weight; then the ops get their pointers.
  const std::vector<float>& floats = images.floats;
  weights_ = DeviceArray<float>(floats.size());
  if (!floats.empty()) {
    FDNN_CUDA_CHECK(cudaMemcpy(weights_.data(), floats.data(), floats.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  }
  if (cublaslt_ && !images.half.empty()) {
    half_weights_ = DeviceArray<uint16_t>(images.half.size());
    FDNN_CUDA_CHECK(cudaMemcpy(half_weights_.data(), images.half.data(),
                               images.half.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
  tensor_core_images_ = DeviceArray<uint32_t>(images.tensor_core.size());
  if (!images.tensor_core.empty()) {
    FDNN_CUDA_CHECK(cudaMemcpy(tensor_core_images_.data(), images.tensor_core.data(),
                               images.tensor_core.size() * sizeof(uint32_t),
                               cudaMemcpyHostToDevice));
  }
  FDNN_LOAD_STAMP("backend: weights uploaded");
  auto image_at = [&](size_t offset) -> const uint32_t* {
    return offset == kNoOffset ? nullptr : tensor_core_images_.data() + offset;
  };
  const float* base = weights_.data();
  auto pointer = [&](size_t offset) -> const float* {
    return offset == kNoOffset ? nullptr : base + offset;
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    const OpRefs& ref = refs[i];
    const float* weight = pointer(ref.weight);
    const float* bias = pointer(ref.bias);
    if (MlpChainOp* chain = op.as<MlpChainOp>()) {
      const MlpChainRefs& chain_ref = std::get<MlpChainRefs>(ref.of_kind);
      chain->tail_gamma = weight;
      chain->tail_beta = bias;
      chain->mlp.block_image = pointer(chain_ref.block_image);
      chain->mlp.cluster_image = pointer(chain_ref.cluster_image);
      for (size_t l = 0; l < chain->mlp.layers.size() && l < chain_ref.layer_weight.size(); ++l) {
        chain->mlp.layers[l].weight_t = pointer(chain_ref.layer_weight[l]);
        chain->mlp.layers[l].bias = pointer(chain_ref.layer_bias[l]);
      }
      chain->tensor_core.image = image_at(chain_ref.tensor_core_image);
      chain->split.first.image = image_at(chain_ref.split_first_image);
      chain->split.rest.image = image_at(chain_ref.split_rest_image);
    } else if (LinearOp* linear = op.as<LinearOp>()) {
      linear->weight = weight;
      linear->bias = bias;
      point_linear(p.steps[op.first_step], std::get<LinearRefs>(ref.of_kind), linear);
    } else if (Conv2dOp* conv = op.as<Conv2dOp>()) {
      conv->weight = weight;
      conv->bias = bias;
      if (const ConvGemmRefs* gemm_ref = std::get_if<ConvGemmRefs>(&ref.of_kind)) {
        conv->conv_gemm.image = image_at(gemm_ref->image);
      }
    } else if (ConvPoolOp* conv_pool = op.as<ConvPoolOp>()) {
      conv_pool->weight = weight;
      conv_pool->bias = bias;
    } else if (ChannelAffineOp* affine = op.as<ChannelAffineOp>()) {
      affine->scale = weight;
      affine->shift = bias;
    } else if (LayerNormOp* norm = op.as<LayerNormOp>()) {
      norm->gamma = weight;
      norm->beta = bias;
    }
  }
  FDNN_LOAD_STAMP("backend: cuBLASLt descriptors, small-batch Linear kernels");
}

// A CublasLtLinear op's 16-bit weight and cuBLASLt descriptor where cuBLASLt is loaded, and its
// small-batch kernel; its fp32 weight and bias are set.
void CudaBackend::point_linear(const Step& step, const LinearRefs& ref, LinearOp* linear_op) {
  LinearOp& linear = *linear_op;
  if (cublaslt_) {
    if (ref.half_weight != kNoOffset) {
      linear.half_weight = half_weights_.data() + ref.half_weight;
      ++launches_per_run_;  // the narrowing of a float32 x (cublaslt_input_narrowings_)
    }
    const cublasComputeType_t compute = linear.half_weight != nullptr
                                            ? CUBLAS_COMPUTE_32F
                                            : cublaslt_compute_type(precision_, device_);
    const cudaDataType_t operands = linear.half_weight == nullptr          ? CUDA_R_32F
                                    : half_format_ == HalfFormat::Binary16 ? CUDA_R_16F
                                                                           : CUDA_R_16BF;
    const void* half_bias =
        ref.half_bias != kNoOffset ? half_weights_.data() + ref.half_bias : nullptr;
    linear.lt = std::make_unique<CublasLtLinear>(
        cublaslt_->get(), static_cast<int32_t>(step.in_features),
        static_cast<int32_t>(step.out_features), ref.activation,
        linear.half_weight != nullptr ? linear.half_weight : linear.weight, linear.bias,
        cublaslt_workspace_bytes_, compute, operands, half_bias);
    if (compute != CUBLAS_COMPUTE_32F || linear.half_weight != nullptr) {
      effective_precision_ = precision_;
    }
  }
  prepare_small_batch_linear_kernel(linear.small_batch);
}

// Readies what runs need beyond the ops: the single launch, the per-layer kernels the batches
// reach, the workspace, and the facts the contexts ask about.
void CudaBackend::prepare_runs() {
  const Plan& p = *plan_;
  if (device_.overrides.fused_conv) plan_single_launch();
  FDNN_LOAD_STAMP("backend: single launch planned");
  // The per-layer kernels batches outside the single launch reach. Readying a kernel loads it,
  // and a first model in a process waits for each one it loads (bench/cuda/cold_start.cpp).
  if (!single_launch_.takes(1) || !single_launch_.takes(max_batch_)) {
    for (const Op& op : ops_) {
      const int64_t rows = max_batch_ * p.steps[op.first_step].rows_per_sample;
      if (const MlpChainOp* chain = op.as<MlpChainOp>()) {
        prepare_fused_mlp_kernels(chain->mlp, rows, device_);
      }
      const ConvPoolOp* conv_pool = op.as<ConvPoolOp>();
      if (conv_pool != nullptr &&
          !prepare_conv_pool_kernels(conv_pool->conv_pool, max_batch_, device_)) {
        fail(FDNN_STATUS_DEVICE_ERROR, "the device refused the shared memory of step '",
             p.steps[op.first_step].label, "' (fused conv + pool), which it reports having");
      }
      FDNN_LOAD_STAMP("backend: one op's per-layer kernels prepared");
    }
  }
  FDNN_LOAD_STAMP("backend: per-layer kernels prepared");
  assign_workspace();
  // Whether a run touches memory of the context's: a workspace value an op reads or writes, or
  // cuBLASLt (its workspace, the 16-bit staging); a split chain's middle counts from the batch
  // that splits it (split_min_batches_).
  for (const Op& op : ops_) {
    const MlpChainOp* chain = op.as<MlpChainOp>();
    if (chain != nullptr && chain->split.usable()) {
      const int64_t rows_per_sample = p.steps[op.first_step].rows_per_sample;
      const int64_t min_batch = (chain->split.min_rows + rows_per_sample - 1) / rows_per_sample;
      split_min_batches_.push_back(min_batch);
      // With a folded tail, two launches either way: the chain's kernel and the row kernel
      // below the split's rows, the split's two from there (launches_for counts two).
      if (chain->row_tail_input < 0) split_launch_min_batches_.push_back(min_batch);
    }
    bool workspace = op.kind == OpKind::CublasLtLinear;
    std::vector<int> values = p.steps[op.first_step].inputs;
    values.push_back(p.steps[op.last_step].output);
    if (chain != nullptr) values.push_back(chain->row_tail_input);
    for (const int id : values) {
      workspace = workspace || (id >= 0 && p.values[id].storage == Storage::Workspace);
    }
    runs_touch_context_memory_ = runs_touch_context_memory_ || workspace;
  }
  find_model_io_ops();
}

void CudaBackend::find_model_io_ops() {
  const Plan& p = *plan_;
  bool output_read = false;  // a step reads the model output (then no kernel writes it in 16 bits)
  for (const Step& step : p.steps) {
    for (const int id : step.inputs) {
      output_read = output_read || p.values[id].storage == Storage::ModelOutput;
    }
  }
  for (Op& op : ops_) {
    for (int s = op.first_step; s <= op.last_step; ++s) {
      for (const int id : p.steps[s].inputs) {
        op.reads_model_input = op.reads_model_input || p.values[id].storage == Storage::ModelInput;
      }
    }
    op.writes_model_output =
        !output_read && p.values[p.steps[op.last_step].output].storage == Storage::ModelOutput;
    LinearOp* linear = op.as<LinearOp>();
    if (linear == nullptr || linear->lt == nullptr || linear->half_weight == nullptr) continue;
    linear->reads_16_bit_input =
        p.values[p.steps[op.first_step].inputs.front()].storage == Storage::ModelInput;
    cublaslt_reads_16_bit_input_ = cublaslt_reads_16_bit_input_ || linear->reads_16_bit_input;
    if (linear->reads_16_bit_input) ++cublaslt_input_narrowings_;
    // cuBLASLt's epilogue is the last thing done to its output: no pass may run in place after.
    linear->writes_16_bit_output = op.writes_model_output && op.epilogue.size() <= 1;
    cublaslt_writes_16_bit_output_ = cublaslt_writes_16_bit_output_ || linear->writes_16_bit_output;
    if (linear->writes_16_bit_output) {
      op.load_reason += "; a model output of that type on 256 bytes is cuBLASLt's D as it is";
    }
  }
}

bool CudaBackend::op_takes_16_bit_io(const Op& op, int64_t batch) const {
  const MlpChainOp* chain = op.as<MlpChainOp>();
  if (chain == nullptr) return false;
  const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
  switch (mlp_route(*chain, rows)) {
    case MlpRoute::TensorCore: return tensor_core_mlp_takes_16_bit_io(chain->tensor_core);
    // The fp32 FMA kernels of an fp16 or bf16 model (the rows below the tensor cores') read a
    // 16-bit model input and write such an output themselves, the output where no row kernel or
    // in-place pass follows them.
    case MlpRoute::Fused: return precision_ == Precision::FP16 || precision_ == Precision::BF16;
    case MlpRoute::Split: return false;
  }
  return false;
}

namespace {

// The cuBLASLt type of an element type.
cudaDataType_t cublaslt_type(ElementType type) {
  return type == ElementType::Float16    ? CUDA_R_16F
         : type == ElementType::Bfloat16 ? CUDA_R_16BF
                                         : CUDA_R_32F;
}

}  // namespace

bool CudaBackend::op_reads_16_bit(const Op& op, int64_t batch, ElementType input, const void* data,
                                  const void* model_output, ElementType model_output_type) const {
  const LinearOp* linear = op.as<LinearOp>();
  if (linear == nullptr) return op_takes_16_bit_io(op, batch);
  if (!linear->reads_16_bit_input) return false;
  // cuBLASLt's operand in its own type, on 256 bytes as the staging is: cuBLASLt then picks the
  // algorithm a float32 input's run picks, and the bits are those of that run.
  const ElementType own =
      half_format_ == HalfFormat::Binary16 ? ElementType::Float16 : ElementType::Bfloat16;
  if (input != own || reinterpret_cast<uintptr_t>(data) % 256 != 0) return false;
  const Plan& p = *plan_;
  const int64_t rows = batch * p.steps[op.first_step].rows_per_sample;
  const bool writes_output = p.values[p.steps[op.last_step].output].storage == Storage::ModelOutput;
  const void* y = writes_output ? model_output : reinterpret_cast<const void*>(256);
  const ElementType y_type = writes_output ? model_output_type : ElementType::Float32;
  return linear->lt->choose(rows, data, y, cublaslt_type(y_type)).usable;
}

bool CudaBackend::op_writes_16_bit(const Op& op, int64_t batch, ElementType output,
                                   const void* data) const {
  const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
  const LinearOp* linear = op.as<LinearOp>();
  if (linear == nullptr) {
    // In-place passes after the kernel (epilogue pieces past the first) run on float32.
    if (op.epilogue.size() > 1 || !op_takes_16_bit_io(op, batch)) return false;
    const MlpChainOp& chain = *op.as<MlpChainOp>();  // op_takes_16_bit_io() holds for chains only
    if (mlp_route(chain, rows) == MlpRoute::TensorCore) {
      return tensor_core_mlp_writes(chain.tensor_core, output, rows);
    }
    return chain.row_tail_input < 0;  // the FMA kernels write y unless a row kernel follows them
  }
  if (!linear->writes_16_bit_output) return false;
  // cuBLASLt's D in its operands' type, on 256 bytes. Its x is then on 256 bytes too, whichever
  // it reads: a 16-bit model input it takes as it is (op_reads_16_bit() asks for 256), or the
  // staging.
  const ElementType own =
      half_format_ == HalfFormat::Binary16 ? ElementType::Float16 : ElementType::Bfloat16;
  if (output != own || reinterpret_cast<uintptr_t>(data) % 256 != 0) return false;
  const auto* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  return linear->lt->choose(rows, aligned, data, cublaslt_type(output)).usable;
}

bool CudaBackend::reads_16_bit_input(int64_t batch, ElementType input, const void* data,
                                     const void* model_output,
                                     ElementType model_output_type) const {
  if (single_launch_.takes(batch) || input == ElementType::Float32) return false;
  bool any = false;
  for (const Op& op : ops_) {
    if (!op.reads_model_input) continue;
    if (!op_reads_16_bit(op, batch, input, data, model_output, model_output_type)) return false;
    any = true;
  }
  return any;
}

bool CudaBackend::host_mapped_io_at(int64_t batch) const {
  if (!host_mapped_io_) return false;
  if (single_launch_.takes(batch)) return true;
  // The Warpgroup form takes x on 16 bytes only: asked for such an x, as the staging is.
  const auto* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  for (const Op& op : ops_) {
    const MlpChainOp* chain = op.as<MlpChainOp>();
    if (!op.reads_model_input || chain == nullptr) continue;
    const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
    if (mlp_route(*chain, rows) == MlpRoute::TensorCore &&
        tensor_core_mlp_launch_form(chain->tensor_core, aligned, rows) ==
            TensorCoreLaunchForm::Warpgroup) {
      return false;
    }
  }
  return true;
}

bool CudaBackend::writes_16_bit_output(int64_t batch, ElementType output, const void* data) const {
  if (single_launch_.takes(batch) || output == ElementType::Float32) return false;
  for (const Op& op : ops_) {
    if (op.writes_model_output) return op_writes_16_bit(op, batch, output, data);
  }
  return false;
}

// LeNet-class plans, a stack of fused conv (+ pool) ops and an optional fp32 MLP head with
// nothing else in between, also get the whole network as one kernel (conv_net.hpp) for the
// batches where that is faster (every batch up to the SM count with the override
// single_launch=1, none with 0).
void CudaBackend::plan_single_launch() {
  const Forced mode = device_.overrides.conv_net_single_launch;
  if (mode == Forced::Off) return;
  const int64_t min_batch = mode == Forced::On ? 1 : kConvNetDefaultMinBatch;
  const int64_t max_batch =
      mode == Forced::On ? max_batch_ : std::min(max_batch_, kConvNetDefaultMaxBatch);
  if (max_batch < min_batch) return;
  const Plan& p = *plan_;
  std::vector<ConvNetStageDesc> stages;
  std::vector<FusedMlpLayerDesc> head;
  int expected_input = 0;  // the model input, then each op's output
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    const Step& first = p.steps[op.first_step];
    if (first.inputs.size() != 1 || first.inputs[0] != expected_input || op.epilogue.size() != 1) {
      return;
    }
    expected_input = p.steps[op.last_step].output;
    const ConvPoolOp* conv_pool = op.as<ConvPoolOp>();
    const MlpChainOp* chain = op.as<MlpChainOp>();
    if (conv_pool != nullptr && head.empty()) {
      stages.push_back({&conv_pool->conv_pool, conv_pool->weight, conv_pool->bias});
    } else if (chain != nullptr && i + 1 == ops_.size() && !stages.empty() &&
               chain->row_tail_input < 0 && first.rows_per_sample == 1) {
      head = chain->mlp.layers;
    } else {
      return;
    }
  }
  if (ops_.size() < 2 || p.values[expected_input].storage != Storage::ModelOutput) return;
  ConvNetPlan plan;
  if (plan_conv_net(stages, head, min_batch, max_batch, device_, &plan)) {
    single_launch_ = std::move(plan);
  }
}

CudaBackend::~CudaBackend() {
  // Released while the model's device is current: the weights and cuBLASLt's handle.
  int previous = 0;
  const bool restore = cudaGetDevice(&previous) == cudaSuccess && previous != device_.ordinal &&
                       cudaSetDevice(device_.ordinal) == cudaSuccess;
  // Device-path runs that record no event (CudaContext::run_device_in_dtypes) may still read the
  // weights on a caller's stream, which may be gone: wait for the device before freeing them.
  if (unordered_runs_.load(std::memory_order_acquire)) cudaDeviceSynchronize();
  ops_.clear();
  single_launch_ = ConvNetPlan();  // its head image
  cublaslt_.reset();
  weights_ = DeviceArray<float>();
  tensor_core_images_ = DeviceArray<uint32_t>();
  half_weights_ = DeviceArray<uint16_t>();
  cudaGetLastError();  // a failure above leaves nothing for the caller's next check
  if (restore) cudaSetDevice(previous);
}

void CudaBackend::refuse_cublaslt_for_testing() {
  for (const Op& op : ops_) {
    const LinearOp* linear = op.as<LinearOp>();
    if (linear != nullptr && linear->lt) linear->lt->refuse_for_testing();
  }
}

// Workspace slots as the planner assigned them (values sharing an offset share a slot), each
// starting on a 256-byte boundary so that vector loads apply.
void CudaBackend::assign_workspace() {
  const Plan& p = *plan_;
  // Every size here grows with max_batch: products and sums are checked, so a max_batch whose
  // workspace cannot be addressed is OUT_OF_MEMORY naming it rather than a wrapped size.
  const auto times_batch = [&](int64_t per_sample) {
    return checked_multiply(per_sample, max_batch_, FDNN_STATUS_OUT_OF_MEMORY,
                            "the GPU workspace for options.max_batch = ", max_batch_);
  };
  const auto after = [&](int64_t start, int64_t floats) {
    return checked_add(start, floats, FDNN_STATUS_OUT_OF_MEMORY,
                       "the GPU workspace for options.max_batch = ", max_batch_);
  };
  const auto aligned = [&](int64_t offset) {
    return after(offset, kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
  };
  std::map<int64_t, int64_t> slot_elements;  // plan offset -> most elements stored there
  for (const Value& value : p.values) {
    if (value.storage != Storage::Workspace) continue;
    int64_t& elements = slot_elements[value.workspace_offset];
    elements = std::max(elements, value.elements);
  }
  std::map<int64_t, int64_t> slot_start;
  int64_t end = 0;
  for (const auto& [offset, elements] : slot_elements) {
    const int64_t start = aligned(end);
    slot_start[offset] = start;
    end = after(start, times_batch(elements));
  }
  value_offset_.assign(p.values.size(), 0);
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (p.values[v].storage == Storage::Workspace) {
      value_offset_[v] = slot_start[p.values[v].workspace_offset];
    }
  }
  // The planner frees a step's inputs after that step, so a later step's output may take their
  // slot. An op that runs several steps in one kernel (a fused MLP chain, a conv with its
  // pooling) still reads its first step's inputs while its blocks write its last step's output,
  // so such an output gets a region of its own instead of sharing one with an input.
  // The same for the chain output a folded row op reads below the tensor-core rows.
  for (const Op& op : ops_) {
    if (op.first_step == op.last_step) continue;
    const MlpChainOp* chain = op.as<MlpChainOp>();
    const int row_tail_input = chain != nullptr ? chain->row_tail_input : -1;
    for (const int output : {p.steps[op.last_step].output, row_tail_input}) {
      if (output < 0 || p.values[output].storage != Storage::Workspace) continue;
      for (int input : p.steps[op.first_step].inputs) {
        if (p.values[input].storage == Storage::Workspace &&
            p.values[input].workspace_offset == p.values[output].workspace_offset) {
          const int64_t start = aligned(end);
          value_offset_[output] = start;
          end = after(start, times_batch(p.values[output].elements));
          break;
        }
      }
    }
  }
  // The 16-bit x of the ops with 16-bit cuBLASLt operands, one region for all (they run one
  // after another).
  int64_t staging_floats = 0;
  for (const Op& op : ops_) {
    const LinearOp* linear = op.as<LinearOp>();
    if (linear == nullptr || linear->half_weight == nullptr) continue;
    const Step& step = p.steps[op.first_step];
    const int64_t halves = times_batch(checked_multiply(
        step.rows_per_sample, step.in_features, FDNN_STATUS_OUT_OF_MEMORY, "a step's elements"));
    staging_floats = std::max(staging_floats, halves / 2 + halves % 2);
  }
  half_staging_offset_ = aligned(end);
  if (staging_floats > 0) end = after(half_staging_offset_, staging_floats);
  // The first layer's output of the split chains, one region for all.
  int64_t middle_floats = 0;
  for (const Op& op : ops_) {
    const MlpChainOp* chain = op.as<MlpChainOp>();
    if (chain == nullptr || !chain->split.usable()) continue;
    const Step& step = p.steps[op.first_step];
    middle_floats = std::max(
        middle_floats, times_batch(checked_multiply(
                           step.rows_per_sample, int64_t{chain->split.first_shape.out_channels},
                           FDNN_STATUS_OUT_OF_MEMORY, "a step's elements")));
  }
  split_middle_offset_ = aligned(end);
  if (middle_floats > 0) end = after(split_middle_offset_, middle_floats);
  workspace_floats_ = end;
}

HostIoChoice CudaBackend::host_io_choice() const {
  constexpr const char* kCannotMap =
      "a step reads the model input or writes its output with cuBLASLt or the small-batch "
      "Linear's bulk copies, which are not relied on to reach host memory";
  HostIoChoice choice;
  switch (requested_host_io_) {
    case FDNN_HOST_IO_STAGED:
      choice.reason = "options.host_io is FDNN_HOST_IO_STAGED";
      return choice;
    case FDNN_HOST_IO_MAPPED:
      if (!host_mapped_io_) {
        choice.reason = std::string("options.host_io is FDNN_HOST_IO_MAPPED, but ") + kCannotMap;
        return choice;
      }
      choice.path = FDNN_HOST_IO_MAPPED;
      choice.reason = "options.host_io is FDNN_HOST_IO_MAPPED";
      return choice;
    default: break;
  }
  if (!device_.integrated) {
    choice.reason =
        "a discrete GPU (copies through pinned staging; batches whose input and output are "
        "small enough read and write the staging in place)";
    if (!host_mapped_io_) choice.reason = "a discrete GPU (copies through pinned staging)";
    return choice;
  }
  if (!host_mapped_io_) {
    choice.reason = std::string("an integrated GPU, but ") + kCannotMap;
    return choice;
  }
  choice.path = FDNN_HOST_IO_MAPPED;
  choice.reason = "an integrated GPU, whose memory is the host's";
  return choice;
}

size_t CudaBackend::context_bytes() const {
  // Device workspace and the host path's device buffers, plus as much pinned host staging, and
  // cuBLASLt's workspace.
  const char* what = "the GPU context's bytes for options.max_batch";
  const int64_t io_floats =
      checked_add(input_floats(), output_floats(), FDNN_STATUS_OUT_OF_MEMORY, what);
  const int64_t floats = checked_add(
      workspace_floats_, checked_multiply(int64_t{2}, io_floats, FDNN_STATUS_OUT_OF_MEMORY, what),
      FDNN_STATUS_OUT_OF_MEMORY, what);
  return checked_add(checked_bytes(floats, sizeof(float), FDNN_STATUS_OUT_OF_MEMORY, what),
                     cublaslt_workspace_bytes_, FDNN_STATUS_OUT_OF_MEMORY, what);
}

std::unique_ptr<ExecutionContext> CudaBackend::create_context() const {
  return std::make_unique<CudaContext>(*this);
}

MlpRoute CudaBackend::mlp_route(const MlpChainOp& chain, int64_t rows) {
  // A split planned beside a tensor-core form (SharedTiles in fp16 and bf16) takes over from its
  // rows.
  if (chain.split.usable() && rows >= chain.split.min_rows) return MlpRoute::Split;
  if (chain.tensor_core.tile_rows > 0 && rows >= chain.tensor_core_min_rows) {
    return MlpRoute::TensorCore;
  }
  return MlpRoute::Fused;
}

namespace {

const char* fused_mlp_form_name(FusedMlpForm form) {
  switch (form) {
    case FusedMlpForm::Cluster: return "cluster of 4 blocks";
    case FusedMlpForm::Block: return "single block";
    case FusedMlpForm::Tile8: return "tiled, 8-row tiles";
    case FusedMlpForm::Tile32: return "tiled, 32-row tiles";
    case FusedMlpForm::Tile64: return "tiled, 64-row tiles";
  }
  return "?";
}

std::string fused_mlp_form_reason(const FusedMlpPlan& plan, FusedMlpForm form, int64_t rows) {
  switch (form) {
    case FusedMlpForm::Cluster:
      return std::to_string(rows) + " rows, at most the " + std::to_string(plan.cluster_max_rows) +
             " one wave of resident clusters takes";
    case FusedMlpForm::Block:
      return std::to_string(rows) + " rows, at most " + std::to_string(kFusedMlpBlockMaxRows);
    default:
      return std::to_string(rows) +
             " rows: the largest tile that fits shared memory and still gives every SM a block";
  }
}

const char* step_kernel_name(OpKind kind) {
  switch (kind) {
    case OpKind::MaxPool2d: return "max pooling kernel";
    case OpKind::AvgPool2d: return "average pooling kernel";
    case OpKind::Elementwise: return "elementwise kernel";
    case OpKind::ChannelAffine: return "channel affine kernel (unfolded BatchNorm)";
    case OpKind::LayerNorm: return "LayerNorm row kernel";
    case OpKind::Softmax: return "Softmax row kernel";
    case OpKind::Add: return "Add kernel";
    case OpKind::Concat: return "strided copies (Concat)";
    case OpKind::Copy: return "copy kernel";
    default: return "?";
  }
}

}  // namespace

BackendExplanation CudaBackend::explain(int64_t batch) const {
  const Plan& p = *plan_;
  BackendExplanation result;
  result.summary =
      "cuda: device " + std::to_string(device_.ordinal) + " (compute capability " +
      std::to_string(device_.major) + "." + std::to_string(device_.minor) + ", " +
      std::to_string(device_.sm_count) + " SMs); " + std::to_string(launches_per_run(batch)) +
      " launch(es) a run, " +
      (cuda_graphs_ ? "captured in a CUDA graph per context and batch size" : "launched directly") +
      "; forms for buffers on 256 bytes (the context's own, and cudaMalloc's)";
  if (!cublaslt_unavailable_reason_.empty()) {
    result.summary += "; cuBLASLt unavailable: " + cublaslt_unavailable_reason_;
  } else if (!cublaslt_origin_.empty()) {
    result.summary += "; cuBLASLt from " + cublaslt_origin_;
  }
  const HostIoChoice io = host_io_choice();
  result.summary += std::string("; host I/O ") +
                    (io.path == FDNN_HOST_IO_MAPPED ? "mapped" : "staged") + ": " + io.reason;
  if (io.path == FDNN_HOST_IO_MAPPED && !host_mapped_io_at(batch)) {
    result.summary += " (staged at batch " + std::to_string(batch) +
                      ": the Warpgroup MLP form reads the input by bulk copies)";
  }
  if (single_launch_.takes(batch)) {
    KernelChoice choice;
    choice.first_step = 0;
    choice.last_step = static_cast<int>(p.steps.size()) - 1;
    choice.form = "whole network in one launch (conv_net.cu, a cluster of 8 blocks a sample)";
    choice.reason = "a stack of fused conv (+ pool) layers with an optional MLP head, and batch " +
                    std::to_string(batch) + " is in " + std::to_string(single_launch_.min_batch) +
                    ".." + std::to_string(single_launch_.max_batch) +
                    ", the batches the single launch takes";
    result.kernels.push_back(std::move(choice));
    return result;
  }
  DeviceScope scope(device_.ordinal);  // cuBLASLt's algorithm query
  const auto* aligned = reinterpret_cast<const float*>(uintptr_t{256});
  for (const Op& op : ops_) {
    const Step& step = p.steps[op.first_step];
    const int64_t rows = batch * step.rows_per_sample;
    const int passes = static_cast<int>(op.epilogue.size()) - 1;
    KernelChoice choice;
    choice.first_step = op.first_step;
    choice.last_step = op.last_step;
    choice.launches = launches_for(op, step);
    std::string now;  // what decided the form at this batch
    switch (op.kind) {
      case OpKind::FusedMlp: {
        const MlpChainOp& chain = *op.as<MlpChainOp>();
        const bool tail = chain.row_tail_input >= 0;
        const std::string tail_name =
            tail ? step_kind_name(p.steps[op.last_step].kind) : std::string();
        switch (mlp_route(chain, rows)) {
          case MlpRoute::TensorCore: {
            const TensorCoreLaunchForm form =
                tensor_core_mlp_launch_form(chain.tensor_core, aligned, rows);
            const char* name = form == TensorCoreLaunchForm::Warpgroup       ? "Warpgroup (wgmma)"
                               : form == TensorCoreLaunchForm::WarpRegisters ? "WarpRegisters"
                                                                             : "SharedTiles";
            choice.form = std::string("fused MLP on tensor cores, ") + name + ", " +
                          tensor_core_math_name(chain.tensor_core.math) +
                          (tail ? " + folded " + tail_name : "");
            now = std::to_string(rows) + " rows, from " +
                  std::to_string(chain.tensor_core_min_rows) + " on tensor cores";
            if (chain.tensor_core.warpgroup.layer_count > 0) {
              now += form == TensorCoreLaunchForm::Warpgroup
                         ? ", from " + std::to_string(chain.tensor_core.warpgroup.min_rows) +
                               " the Warpgroup form"
                         : ", below the Warpgroup form's " +
                               std::to_string(chain.tensor_core.warpgroup.min_rows);
            }
            if (chain.split.usable()) {
              now += ", below the split form's " + std::to_string(chain.split.min_rows);
            }
            choice.launches = 1 + std::max(passes, 0);
            break;
          }
          case MlpRoute::Split:
            choice.form = std::string("split MLP: implicit GEMM, then WarpRegisters, ") +
                          tensor_core_math_name(chain.split.rest.math) +
                          (tail ? " + folded " + tail_name : "");
            now = std::to_string(rows) + " rows, from the split form's " +
                  std::to_string(chain.split.min_rows);
            choice.launches = 2 + std::max(passes, 0);
            break;
          case MlpRoute::Fused: {
            const FusedMlpForm form = fused_mlp_form(chain.mlp, rows, device_);
            choice.form = std::string("fused MLP (fp32 FMA), ") + fused_mlp_form_name(form) +
                          (tail ? ", then the " + tail_name + " row kernel" : "");
            now = fused_mlp_form_reason(chain.mlp, form, rows);
            if (chain.tensor_core.tile_rows > 0) {
              now += "; below the tensor-core form's " + std::to_string(chain.tensor_core_min_rows);
            } else if (chain.split.usable()) {
              now += "; below the split form's " + std::to_string(chain.split.min_rows);
            }
            choice.launches = (tail ? 2 : 1) + std::max(passes, 0);
            break;
          }
        }
        break;
      }
      case OpKind::CublasLtLinear: {
        const LinearOp& linear = *op.as<LinearOp>();
        const char* epilogue = "bias";
        if (linear.lt) {
          epilogue = linear.lt->activation() == CublasLtActivation::ReLU       ? "bias + ReLU"
                     : linear.lt->activation() == CublasLtActivation::GeluTanh ? "bias + GELU(tanh)"
                                                                               : "bias";
        }
        if (small_batch_linear_takes(linear.small_batch, rows, aligned)) {
          choice.form =
              std::string("small-batch Linear (3xTF32 tensor cores") +
              (linear.small_batch.cluster ? ", pairs of blocks sharing x where the rows allow"
                                          : "") +
              ")";
          now = std::to_string(rows) + " rows, at most " + std::to_string(kSmallBatchLinearMaxRows);
        } else if (linear.lt) {
          const CublasLtLinear::Choice& lt_choice = linear.lt->choose(rows, aligned, aligned);
          if (lt_choice.usable) {
            choice.form = std::string("cuBLASLt, ") +
                          (linear.half_weight == nullptr
                               ? precision_name(precision_) + std::string(" compute")
                           : half_format_ == HalfFormat::Binary16 ? std::string("fp16 operands")
                                                                  : std::string("bf16 operands")) +
                          ", " + epilogue + " in its epilogue";
            now = "cuBLASLt has an algorithm for " + std::to_string(rows) + " rows";
            if (linear.small_batch.planned()) {
              now += ", more than the small-batch kernel's " +
                     std::to_string(kSmallBatchLinearMaxRows);
            }
            if (linear.half_weight != nullptr) {
              ++choice.launches;  // a float32 x narrowed into the 16-bit staging first
              const char* own = half_format_ == HalfFormat::Binary16 ? "float16" : "bfloat16";
              if (linear.reads_16_bit_input) {
                now += std::string("; a ") + own +
                       " model input on 256 bytes is the operand as it is, one launch fewer";
              }
              if (linear.writes_16_bit_output) {
                const ElementType type = half_format_ == HalfFormat::Binary16
                                             ? ElementType::Float16
                                             : ElementType::Bfloat16;
                const CublasLtLinear::Choice& written =
                    linear.lt->choose(rows, aligned, aligned, cublaslt_type(type));
                now += !op_writes_16_bit(op, batch, type, aligned)
                           ? std::string("; a ") + own +
                                 " model output is narrowed after: " + written.reason
                           : std::string("; cuBLASLt writes a ") + own +
                                 " model output on 256 bytes itself, no narrowing pass after" +
                                 (written.bias_16_bit
                                      ? " (adding the bias rounded to 16 bits: cuBLASLt takes no "
                                        "fp32 bias with a 16-bit output here)"
                                      : "");
              }
            }
          } else {
            choice.form = "tiled GEMM (linear.cu)";
            now = lt_choice.reason;
          }
        } else {
          choice.form = "tiled GEMM (linear.cu)";
          now = "cuBLASLt is not in use: " + cublaslt_unavailable_reason_;
        }
        break;
      }
      case OpKind::Conv2d: {
        const ConvGemmPlan& gemm = op.as<Conv2dOp>()->conv_gemm;
        choice.form = gemm.usable ? std::string("implicit GEMM on tensor cores, ") +
                                        tensor_core_math_name(gemm.math) +
                                        (gemm.dense_rows ? ", dense rows" : "")
                                  : std::string("direct convolution (conv2d.cu)");
        break;
      }
      case OpKind::ConvPool: {
        const bool large = conv_pool_takes_large_tile(batch, device_);
        choice.form = std::string("fused conv + bias + activation") +
                      (op.last_step > op.first_step ? " + pooling" : "") + ", " +
                      (large ? "widest register tile" : "small tile, rows split over blocks");
        now = "batch " + std::to_string(batch) + (large ? " >= " : " < ") +
              std::to_string(device_.sm_count) + " SMs";
        break;
      }
      default: choice.form = step_kernel_name(op.kind); break;
    }
    choice.reason = op.load_reason.empty() ? "the one kernel for this step" : op.load_reason;
    if (!now.empty()) choice.reason += "; at this batch: " + now;
    if (op.reads_model_input) {
      const bool binary16 = reads_16_bit_input(batch, ElementType::Float16, aligned, aligned);
      const bool bfloat16 = reads_16_bit_input(batch, ElementType::Bfloat16, aligned, aligned);
      choice.reason += binary16 && bfloat16 ? "; reads a float16 or bfloat16 model input itself"
                       : binary16 ? "; reads a float16 model input itself (a bfloat16 one is "
                                    "widened to float32 first)"
                       : bfloat16 ? "; reads a bfloat16 model input itself (a float16 one is "
                                    "widened to float32 first)"
                                  : "; a float16 or bfloat16 model input is widened to float32 "
                                    "first";
    }
    if (op.writes_model_output) {
      const bool binary16 = writes_16_bit_output(batch, ElementType::Float16, aligned);
      const bool bfloat16 = writes_16_bit_output(batch, ElementType::Bfloat16, aligned);
      choice.reason += binary16 && bfloat16 ? "; writes a float16 or bfloat16 model output itself"
                       : binary16 ? "; writes a float16 model output itself (a bfloat16 one is "
                                    "narrowed from float32 after)"
                       : bfloat16 ? "; writes a bfloat16 model output itself (a float16 one is "
                                    "narrowed from float32 after)"
                                  : "; a float16 or bfloat16 model output is narrowed from "
                                    "float32 after";
    }
    if (passes > 0) {
      choice.reason += "; " + std::to_string(passes) + " in-place elementwise pass(es) after it";
    }
    result.kernels.push_back(std::move(choice));
  }
  return result;
}

void CudaBackend::enqueue(int64_t batch, TypedInput input, TypedOutput output, float* workspace,
                          void* cublaslt_workspace, cudaStream_t stream) const {
  const Plan& p = *plan_;
  if ((input.type != ElementType::Float32 &&
       !reads_16_bit_input(batch, input.type, input.data, output.data, output.type)) ||
      (output.type != ElementType::Float32 &&
       !writes_16_bit_output(batch, output.type, output.data))) {
    fail(FDNN_STATUS_INTERNAL_ERROR,
         "a 16-bit model input or output reached a kernel that reads "
         "and writes float32 only at batch ",
         batch);
  }
  // Every op but those that take 16-bit I/O sees float32 model buffers (checked above).
  auto data = [&](int value_id) -> float* {
    switch (p.values[value_id].storage) {
      case Storage::ModelInput:
        return const_cast<float*>(static_cast<const float*>(input.data));  // only ever read
      case Storage::ModelOutput: return static_cast<float*>(output.data);
      case Storage::Workspace: break;
    }
    return workspace + value_offset_[value_id];
  };
  // The same buffers with their element types, for the kernels that convert them themselves.
  auto typed_input = [&](int value_id) -> TypedInput {
    if (p.values[value_id].storage == Storage::ModelInput) return input;
    return TypedInput(data(value_id));
  };
  auto typed_output = [&](int value_id) -> TypedOutput {
    if (p.values[value_id].storage == Storage::ModelOutput) return output;
    return TypedOutput(data(value_id));
  };
  auto in_place_passes = [&](const Op& op, float* y, int64_t count) {
    for (size_t piece = 1; piece < op.epilogue.size(); ++piece) {
      ElementwiseArgs args;
      args.x = y;
      args.y = y;
      args.count = count;
      args.epilogue = op.epilogue[piece];
      launch_elementwise(args, device_, stream);
    }
  };

  // The LayerNorm or Softmax of `row_step` over `rows` rows (a LayerNorm's gamma and beta, null
  // where it has none): its own op, or one folded after a fused chain.
  auto row_op = [&](const Op& op, const Step& row_step, const float* gamma, const float* beta,
                    const float* in, float* out, int64_t rows) {
    if (row_step.kind == StepKind::Softmax) {
      SoftmaxArgs args;
      args.x = in;
      args.y = out;
      args.rows = rows;
      args.row_size = row_step.in_features;
      launch_softmax(args, device_, stream);
      return;
    }
    LayerNormArgs args;
    args.x = in;
    args.gamma = gamma;
    args.beta = beta;
    args.y = out;
    args.rows = rows;
    args.row_size = row_step.in_features;
    args.eps = row_step.eps;
    args.epilogue = op.epilogue.front();
    launch_layer_norm(args, device_, stream);
  };

  if (single_launch_.takes(batch)) {
    launch_conv_net(single_launch_, static_cast<const float*>(input.data),
                    static_cast<float*>(output.data), batch, stream);
    return;
  }
  for (const Op& op : ops_) {
    const Step& step = p.steps[op.first_step];
    const Step& last = p.steps[op.last_step];
    const float* x = data(step.inputs.front());
    float* y = data(last.output);
    const int64_t count = batch * p.values[last.output].elements;
    const WindowGeometry& w = step.window;
    switch (op.kind) {
      case OpKind::FusedMlp: {
        const MlpChainOp& chain = *op.as<MlpChainOp>();
        const int64_t rows = batch * step.rows_per_sample;
        const MlpRoute route = mlp_route(chain, rows);
        if (route == MlpRoute::TensorCore) {
          launch_tensor_core_mlp(chain.tensor_core, typed_input(step.inputs.front()),
                                 typed_output(last.output), rows, device_, stream);
        } else if (route == MlpRoute::Split) {
          launch_split_mlp(chain.split, x, chain.mlp.layers.front().bias,
                           workspace + split_middle_offset_, y, rows, device_, stream);
        } else if (chain.row_tail_input < 0) {
          launch_fused_mlp(chain.mlp, typed_input(step.inputs.front()), typed_output(last.output),
                           rows, device_, stream);
        } else {
          float* middle = data(chain.row_tail_input);
          launch_fused_mlp(chain.mlp, typed_input(step.inputs.front()), middle, rows, device_,
                           stream);
          row_op(op, last, chain.tail_gamma, chain.tail_beta, middle, y, rows);
        }
        break;
      }
      case OpKind::CublasLtLinear: {
        const LinearOp& linear = *op.as<LinearOp>();
        const int64_t rows = batch * step.rows_per_sample;
        // The small-batch kernel and the tiled GEMM apply the bias and the ops cuBLASLt's
        // epilogue would have fused, so the passes after them stay the same.
        LinearArgs args;
        args.x = x;
        args.weight = linear.weight;
        args.bias = linear.bias;
        args.y = y;
        args.rows = rows;
        args.in = static_cast<int32_t>(step.in_features);
        args.out = static_cast<int32_t>(step.out_features);
        args.epilogue = op.epilogue.front();
        // A 16-bit model input is cuBLASLt's operand as it is (reads_16_bit_input() checked that
        // cuBLASLt takes it); a float32 one is narrowed into the staging first. A 16-bit model
        // output is cuBLASLt's D as it is (writes_16_bit_output() checked that).
        const TypedInput typed_x = typed_input(step.inputs.front());
        const TypedOutput typed_y = typed_output(last.output);
        const bool direct = typed_x.type != ElementType::Float32;
        const bool direct_output = typed_y.type != ElementType::Float32;
        if (!direct && !direct_output && small_batch_linear_takes(linear.small_batch, rows, x)) {
          launch_small_batch_linear(linear.small_batch, args, stream);
          break;
        }
        if (linear.lt) {
          void* staging = workspace + half_staging_offset_;
          const void* operand = direct                          ? typed_x.data
                                : linear.half_weight != nullptr ? staging
                                                                : static_cast<const void*>(x);
          const CublasLtLinear::Choice& choice =
              linear.lt->choose(rows, operand, typed_y.data, cublaslt_type(typed_y.type));
          if (choice.usable) {
            if (linear.half_weight != nullptr && !direct) {
              launch_narrow(x, staging, half_format_, rows * step.in_features, device_, stream);
            }
            linear.lt->run(choice, operand, typed_y.data, cublaslt_workspace, stream);
            break;
          }
        }
        if (direct || direct_output) {
          fail(FDNN_STATUS_INTERNAL_ERROR, "step '", step.label,
               "' has no cuBLASLt algorithm for its 16-bit ", direct ? "input" : "output", " at ",
               rows, " rows, which the backend checked it had");
        }
        // No cuBLASLt algorithm for this shape (choice.reason says why): the tiled GEMM.
        launch_linear(args, device_, stream);
        break;
      }
      case OpKind::Conv2d: {
        const Conv2dOp& conv = *op.as<Conv2dOp>();
        Conv2dArgs args = conv2d_geometry(w);
        args.x = x;
        args.weight = conv.weight;
        args.bias = conv.bias;
        args.y = y;
        args.batch = batch;
        args.epilogue = op.epilogue.front();
        if (conv.conv_gemm.usable) {
          launch_conv2d_implicit_gemm(conv.conv_gemm, args, stream);
        } else {
          launch_conv2d(args, device_, stream);
        }
        break;
      }
      case OpKind::ConvPool: {
        const ConvPoolOp& conv_pool = *op.as<ConvPoolOp>();
        launch_conv_pool(conv_pool.conv_pool, x, conv_pool.weight, conv_pool.bias, y, batch,
                         device_, stream);
        break;
      }
      case OpKind::MaxPool2d:
      case OpKind::AvgPool2d: {
        Pool2dArgs args;
        args.x = x;
        args.y = y;
        args.planes = batch * w.in_channels;
        args.in_height = static_cast<int32_t>(w.in_height);
        args.in_width = static_cast<int32_t>(w.in_width);
        args.out_height = static_cast<int32_t>(w.out_height);
        args.out_width = static_cast<int32_t>(w.out_width);
        args.kernel_height = static_cast<int32_t>(w.kernel[0]);
        args.kernel_width = static_cast<int32_t>(w.kernel[1]);
        args.stride_height = static_cast<int32_t>(w.stride[0]);
        args.stride_width = static_cast<int32_t>(w.stride[1]);
        args.padding_height = static_cast<int32_t>(w.padding[0]);
        args.padding_width = static_cast<int32_t>(w.padding[1]);
        args.count_include_pad = w.count_include_pad ? 1 : 0;
        if (op.kind == OpKind::MaxPool2d) {
          launch_max_pool2d(args, device_, stream);
        } else {
          launch_avg_pool2d(args, device_, stream);
        }
        break;
      }
      case OpKind::Elementwise: {
        ElementwiseArgs args;
        args.x = x;
        args.y = y;
        args.count = count;
        args.epilogue = op.epilogue.front();
        launch_elementwise(args, device_, stream);
        break;
      }
      case OpKind::ChannelAffine: {
        const ChannelAffineOp& affine = *op.as<ChannelAffineOp>();
        ChannelAffineArgs args;
        args.x = x;
        args.scale = affine.scale;
        args.shift = affine.shift;
        args.y = y;
        args.batch = batch;
        args.channels = step.in_features;
        args.spatial = step.out_features;
        args.epilogue = op.epilogue.front();
        launch_channel_affine(args, device_, stream);
        break;
      }
      case OpKind::LayerNorm: {
        const LayerNormOp& norm = *op.as<LayerNormOp>();
        row_op(op, step, norm.gamma, norm.beta, x, y, batch * step.rows_per_sample);
        break;
      }
      case OpKind::Softmax:
        row_op(op, step, nullptr, nullptr, x, y, batch * step.rows_per_sample);
        break;
      case OpKind::Add: {
        // Up to kMaxAddInputs at a time, continuing the running sum in y; the epilogue on the
        // last launch.
        const size_t n = step.inputs.size();
        size_t next = 0;
        while (next < n) {
          AddArgs args;
          if (next > 0) args.x[args.input_count++] = y;
          while (next < n && args.input_count < kMaxAddInputs) {
            args.x[args.input_count++] = data(step.inputs[next++]);
          }
          args.y = y;
          args.count = count;
          if (next == n) args.epilogue = op.epilogue.front();
          launch_add(args, device_, stream);
        }
        break;
      }
      case OpKind::Concat: {
        const int64_t outer = batch * step.rows_per_sample;
        int64_t total = 0;
        for (int64_t inner : step.concat_inner) total += inner;
        int64_t offset = 0;
        for (size_t k = 0; k < step.inputs.size(); ++k) {
          StridedCopyArgs args;
          args.x = data(step.inputs[k]);
          args.y = y;
          args.outer = outer;
          args.x_row = step.concat_inner[k];
          args.y_row = total;
          args.y_offset = offset;
          launch_strided_copy(args, device_, stream);
          offset += step.concat_inner[k];
        }
        break;
      }
      case OpKind::Copy: {
        StridedCopyArgs args;
        args.x = x;
        args.y = y;
        args.outer = 1;
        args.x_row = count;
        args.y_row = count;
        launch_strided_copy(args, device_, stream);
        break;
      }
    }
    in_place_passes(op, y, count);
  }
}

}  // namespace cuda

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // not sticky, but leave no error behind for the caller's next check
    return 0;
  }
  return count;
}

std::string cuda_unavailable_reason(int device_id) noexcept {
  try {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return std::string("no CUDA device is visible (cudaGetDeviceCount: ") +
             cudaGetErrorString(error) + ")";
    }
    if (count == 0) return "no CUDA device is visible";
    if (device_id < 0 || device_id >= count) {
      return "options.device_id is " + std::to_string(device_id) + " but " + std::to_string(count) +
             " CUDA device(s) are visible";
    }
    return "";
  } catch (...) {
    return "out of host memory";
  }
}

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Plan> plan, int64_t max_batch,
                                           int device_id, bool cuda_graphs, Precision precision,
                                           fdnn_host_io host_io,
                                           const std::string& selection_overrides) {
  return std::make_unique<cuda::CudaBackend>(
      std::move(plan), max_batch, device_id, cuda_graphs, precision, host_io,
      cuda::parse_selection_overrides(selection_overrides.c_str()));
}

std::string read_cuda_selection_overrides() {
  const char* text = std::getenv(cuda::kSelectionOverridesVariable);
  if (text == nullptr) return "";
  cuda::parse_selection_overrides(text);  // refuses what the backend cannot take
  return text;
}

}  // namespace fusednn
