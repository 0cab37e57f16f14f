// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: lowers a plan to ops, uploads every weight once in one allocation, in the
// layout its kernel reads, and queues a run as a sequence of launches on one stream.
//
// Linear steps: a chain of two or more (each feeding only the next, widths up to
// kFusedMlpMaxWidth) becomes one fused MLP launch (on tensor cores for reduced precisions), as
// does a lone layer whose input fits a tile. A lone layer wider than kFusedMlpMaxWidth runs on
// cuBLASLt with the bias and a ReLU or GELU(tanh) fused in its epilogue (linear_cublaslt.cpp; W
// kept in PyTorch's [out][in] layout; the override cublaslt=0 sends fp32 models to the fused
// kernel's column-split form instead); the epilogue ops cuBLASLt cannot fuse run
// as in-place elementwise passes, and the tiled GEMM of linear.cu stands in where cuBLASLt has
// no algorithm or is not loaded. In fp32 models, runs of up to 32 rows of such a layer take the
// small-batch kernel instead (small_batch_linear.hpp) where its plan says it is faster. In fp16
// and bf16 models cuBLASLt reads W in that type (a 16-bit copy made at load) and x narrowed into
// the workspace first.
#include "backends/cuda/cuda_backend.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <string>

#include "backends/cuda/channel_affine.hpp"
#include "backends/cuda/concat.hpp"
#include "backends/cuda/conv2d.hpp"
#include "backends/cuda/conv2d_implicit_gemm.hpp"
#include "backends/cuda/conv_pool.hpp"
#include "backends/cuda/convert_dtype.hpp"
#include "backends/cuda/cublaslt_library.hpp"
#include "backends/cuda/cuda_context.hpp"
#include "backends/cuda/cuda_executor.hpp"
#include "backends/cuda/elementwise.hpp"
#include "backends/cuda/fused_mlp_row_image.hpp"
#include "backends/cuda/layer_norm.hpp"
#include "backends/cuda/linear.hpp"
#include "backends/cuda/linear_cublaslt.hpp"
#include "backends/cuda/pool2d.hpp"
#include "backends/cuda/small_batch_linear.hpp"
#include "backends/cuda/softmax.hpp"
#include "common/checked_math.hpp"
#include "common/elementwise_op.hpp"
#include "common/error.hpp"
#include "common/half_float.hpp"
#include "common/load_timeline.hpp"

namespace fusednn {
namespace cuda {
namespace {

// Why a chain has no tensor-core form, named by the first limit it passes (the forms need
// compute capability 8.0, hidden widths up to 256, a first input up to 1024, and the weights in
// shared memory).
std::string tensor_core_refusal(const std::vector<FusedMlpLayerDesc>& layers,
                                const DeviceInfo& device) {
  if (device.major < 8) {
    return "compute capability " + std::to_string(device.major) + "." +
           std::to_string(device.minor) + " (the forms need 8.0 or newer)";
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].out > 256) {
      return "layer " + std::to_string(i + 1) + " has " + std::to_string(layers[i].out) +
             " outputs (the forms take up to 256)";
    }
    const int32_t most_in = i == 0 ? 1024 : 256;
    if (layers[i].in > most_in) {
      return "layer " + std::to_string(i + 1) + " has " + std::to_string(layers[i].in) +
             " inputs (the forms take up to " + std::to_string(most_in) + ")";
    }
  }
  return "the chain's weights do not fit in shared memory";
}

constexpr size_t kNone = static_cast<size_t>(-1);
constexpr int64_t kSlotAlignment = 64;  // floats: every workspace slot starts on 256 bytes

// The host image of the device weights; every tensor starts on a 16-byte boundary, or on
// `alignment` floats where asked.
class WeightBlob {
 public:
  size_t reserve(size_t count, size_t alignment = 4) {
    floats_.resize((floats_.size() + alignment - 1) / alignment * alignment, 0.0f);
    const size_t offset = floats_.size();
    floats_.resize(offset + count, 0.0f);
    return offset;
  }
  size_t add(const std::vector<float>& values, size_t alignment = 4) {
    const size_t offset = reserve(values.size(), alignment);
    std::copy(values.begin(), values.end(), floats_.begin() + static_cast<std::ptrdiff_t>(offset));
    return offset;
  }
  float* at(size_t offset) { return floats_.data() + offset; }
  std::vector<float>& floats() { return floats_; }

 private:
  std::vector<float> floats_;
};

// Blob offsets an op's pointers will take once the blob is on the device.
struct OpRefs {
  size_t weight = kNone;
  size_t bias = kNone;
  std::vector<size_t> layer_weight;
  std::vector<size_t> layer_bias;
  CublasLtActivation lt_activation = CublasLtActivation::None;  // CublasLtLinear only
  size_t half_weight = kNone;                                   // into the 16-bit blob
  size_t half_bias = kNone;      // into the 16-bit blob: a bias cuBLASLt may add to a 16-bit y
  size_t block_image = kNone;    // FusedMlp: the single-block form's image
  size_t cluster_image = kNone;  // FusedMlp: the cluster form's image
};

static_assert(kOpReLU == static_cast<int>(ElementwiseKind::ReLU) &&
                  kOpLeakyReLU == static_cast<int>(ElementwiseKind::LeakyReLU) &&
                  kOpGeluErf == static_cast<int>(ElementwiseKind::GeluErf) &&
                  kOpGeluTanh == static_cast<int>(ElementwiseKind::GeluTanh) &&
                  kOpSiLU == static_cast<int>(ElementwiseKind::SiLU) &&
                  kOpSigmoid == static_cast<int>(ElementwiseKind::Sigmoid) &&
                  kOpTanh == static_cast<int>(ElementwiseKind::Tanh) &&
                  kOpScale == static_cast<int>(ElementwiseKind::Scale),
              "device op codes must equal ElementwiseKind's values");

// The epilogue in pieces of at most kMaxEpilogueOps, in order; one empty piece for an empty
// epilogue, so that result.front() is always what the producing kernel applies.
std::vector<DeviceEpilogue> split_epilogue(const Epilogue& epilogue) {
  std::vector<DeviceEpilogue> pieces(1);
  for (const ElementwiseOp& op : epilogue) {
    if (pieces.back().count == kMaxEpilogueOps) pieces.emplace_back();
    DeviceEpilogue& piece = pieces.back();
    piece.kind[piece.count] = static_cast<int32_t>(op.kind);
    piece.parameter[piece.count] = op.parameter;
    ++piece.count;
  }
  return pieces;
}

// A cuBLASLt step's epilogue: [0] the ops its own epilogue fuses after the bias (the first
// `fused` of them), then the rest in pieces of at most kMaxEpilogueOps, applied in place.
std::vector<DeviceEpilogue> split_cublaslt_epilogue(const Epilogue& epilogue, size_t fused) {
  const Epilogue head(epilogue.begin(), epilogue.begin() + static_cast<std::ptrdiff_t>(fused));
  const Epilogue tail(epilogue.begin() + static_cast<std::ptrdiff_t>(fused), epilogue.end());
  std::vector<DeviceEpilogue> pieces{split_epilogue(head).front()};
  if (!tail.empty()) {
    for (const DeviceEpilogue& piece : split_epilogue(tail)) pieces.push_back(piece);
  }
  return pieces;
}

int32_t as_int32(int64_t value, const Step& step, const char* what) {
  if (value > INT32_MAX) {
    fail(FDNN_STATUS_UNSUPPORTED, "step '", step.label, "': ", what, " is ", value,
         "; the CUDA backend supports at most ", INT32_MAX);
  }
  return static_cast<int32_t>(value);
}

// W [out][in] -> W^T [in][row_stride], columns past out left zero.
size_t add_transposed(WeightBlob& blob, const std::vector<float>& weight, int64_t in, int64_t out,
                      int64_t row_stride) {
  const size_t offset = blob.reserve(static_cast<size_t>(in * row_stride));
  float* destination = blob.at(offset);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < in; ++k) destination[k * row_stride + o] = weight[o * in + k];
  }
  return offset;
}

// When an fp32 chain runs on tensor cores (3xTF32 split products, a few times the FMA kernels'
// error, both well inside fp32's 1e-5 contract): by default in the WarpRegisters form from the
// batch that gives every SM a warp tile: below that the FMA kernels are faster, above it 3xTF32
// is. The SharedTiles form is slower than the FMA kernels at every size, so it runs only when
// the override fp32_tensor_cores=1 asks for every batch (=0: never). Returns -1 for never.
int64_t fp32_tensor_core_min_rows(const TensorCoreMlpPlan& plan, const DeviceInfo& device) {
  const Forced forced = device.overrides.fp32_tensor_cores;
  if (forced == Forced::On) return 0;
  if (forced == Forced::Off || plan.form != TensorCoreForm::WarpRegisters) return -1;
  return int64_t{device.sm_count} * plan.tile_rows;
}

// Whether an fp32 chain of at most `most_rows` rows can ever reach its tensor-core form. When it
// cannot, the backend does not plan one: planning sets the kernel's attributes, which loads its
// module, and a model that cannot use it should not wait for that at load.
bool fp32_tensor_cores_reachable(int64_t most_rows, const DeviceInfo& device) {
  const Forced forced = device.overrides.fp32_tensor_cores;
  if (forced == Forced::On) return true;
  return forced != Forced::Off && most_rows >= int64_t{device.sm_count} * kWarpRegisterTileRows;
}

// A Conv2d window's sizes into the fields Conv2dArgs and ConvPoolDesc share (the output size is
// named differently in each: the caller sets it).
template <typename ConvFields>
void set_conv_window(const WindowGeometry& w, ConvFields* target) {
  target->in_channels = static_cast<int32_t>(w.in_channels);
  target->in_height = static_cast<int32_t>(w.in_height);
  target->in_width = static_cast<int32_t>(w.in_width);
  target->out_channels = static_cast<int32_t>(w.out_channels);
  target->kernel_height = static_cast<int32_t>(w.kernel[0]);
  target->kernel_width = static_cast<int32_t>(w.kernel[1]);
  target->stride_height = static_cast<int32_t>(w.stride[0]);
  target->stride_width = static_cast<int32_t>(w.stride[1]);
  target->padding_height = static_cast<int32_t>(w.padding[0]);
  target->padding_width = static_cast<int32_t>(w.padding[1]);
  target->dilation_height = static_cast<int32_t>(w.dilation[0]);
  target->dilation_width = static_cast<int32_t>(w.dilation[1]);
  target->groups = static_cast<int32_t>(w.groups);
}

// The Conv2d step s as conv_pool.cu's fused kernel (unless the override fused_conv=0): together
// with the pooling step after it when that step is the only reader of the conv's workspace output
// and its windows equal its stride (1 or 2, no dilation), else alone. Fills op's kind, last step,
// epilogue and conv_pool plan (its kernels are readied once the backend knows which batches reach
// them); false when the layer does not fit, and the caller lowers it as before.
bool lower_conv_pool(const Plan& p, size_t s, const std::vector<int>& consumers,
                     const DeviceInfo& device, Op* op) {
  const Step& conv = p.steps[s];
  const WindowGeometry& w = conv.window;
  for (int64_t extent : {w.in_channels, w.in_height, w.in_width, w.out_channels, w.out_height,
                         w.out_width, w.kernel[0], w.kernel[1], w.stride[0], w.stride[1],
                         w.padding[0], w.padding[1], w.dilation[0], w.dilation[1], w.groups}) {
    if (extent < 0 || extent > (int64_t{1} << 14)) return false;
  }
  if (conv.weight < 0 || conv.inputs.size() != 1) return false;
  ConvPoolDesc desc;
  set_conv_window(w, &desc);
  desc.conv_height = static_cast<int32_t>(w.out_height);
  desc.conv_width = static_cast<int32_t>(w.out_width);
  desc.pooled_height = desc.conv_height;
  desc.pooled_width = desc.conv_width;
  const std::vector<DeviceEpilogue> pieces = split_epilogue(conv.epilogue);
  desc.epilogue = pieces.front();

  if (s + 1 < p.steps.size() && pieces.size() == 1) {  // the whole epilogue before the pooling
    const Step& pool = p.steps[s + 1];
    const WindowGeometry& g = pool.window;
    const bool pooling = pool.kind == StepKind::MaxPool2d || pool.kind == StepKind::AvgPool2d;
    if (pooling && pool.inputs.size() == 1 && pool.inputs[0] == conv.output &&
        consumers[conv.output] == 1 && p.values[conv.output].storage == Storage::Workspace &&
        g.kernel[0] == g.kernel[1] && g.stride[0] == g.kernel[0] && g.stride[1] == g.kernel[1] &&
        (g.kernel[0] == 1 || g.kernel[0] == 2) && g.dilation[0] == 1 && g.dilation[1] == 1 &&
        g.padding[0] >= 0 && g.padding[0] <= 1 && g.padding[1] >= 0 && g.padding[1] <= 1 &&
        g.out_height <= w.out_height + 2 && g.out_width <= w.out_width + 2) {
      ConvPoolDesc pooled = desc;
      pooled.pool = pool.kind == StepKind::MaxPool2d ? ConvPoolKind::Max : ConvPoolKind::Average;
      pooled.pool_window = static_cast<int32_t>(g.kernel[0]);
      pooled.pool_padding_height = static_cast<int32_t>(g.padding[0]);
      pooled.pool_padding_width = static_cast<int32_t>(g.padding[1]);
      pooled.pooled_height = static_cast<int32_t>(g.out_height);
      pooled.pooled_width = static_cast<int32_t>(g.out_width);
      pooled.count_include_pad = g.count_include_pad;
      if (plan_conv_pool(pooled, device, &op->conv_pool)) {
        op->kind = OpKind::ConvPool;
        op->last_step = static_cast<int>(s + 1);
        op->epilogue = split_epilogue(pool.epilogue);
        return true;
      }
    }
  }
  if (!plan_conv_pool(desc, device, &op->conv_pool)) return false;
  op->kind = OpKind::ConvPool;
  op->epilogue = pieces;  // pieces past the first run in place after the kernel, as for Conv2d
  return true;
}

// Reduced precisions run on tensor cores unless the override tensor_cores=0 says otherwise (then
// fp32, and the model reports fp32).
bool reduced_tensor_cores_off(const SelectionOverrides& overrides) {
  return !overrides.reduced_tensor_cores;
}

// A Conv2d step's geometry as Conv2dArgs (no pointers, no batch).
Conv2dArgs conv2d_geometry(const WindowGeometry& w) {
  Conv2dArgs args;
  set_conv_window(w, &args);
  args.out_height = static_cast<int32_t>(w.out_height);
  args.out_width = static_cast<int32_t>(w.out_width);
  return args;
}

// Which unfused Conv2d steps run as implicit GEMMs on tensor cores (conv2d_implicit_gemm.hpp):
// by default every one in a reduced-precision model, and in fp32 models (as 3xTF32) those the
// direct kernel cannot stage in shared memory. The override implicit_gemm=0 keeps every one on
// the direct kernel (in fp32), =1 sends every one to the implicit GEMM.
bool conv_runs_as_gemm(const Conv2dArgs& geometry, Precision precision,
                       const SelectionOverrides& overrides) {
  if (overrides.implicit_gemm == Forced::Off) return false;
  if (overrides.implicit_gemm == Forced::On) return true;
  if (precision != Precision::FP32) return !reduced_tensor_cores_off(overrides);
  return !conv2d_fits_staged(geometry);
}

// Whether a reduced-precision model runs a Conv2d the fused conv + pool kernel could take as an
// implicit GEMM instead (its pooling then runs as a kernel of its own): where the product fills
// tensor-core tiles, from 32 output channels a group and 64-long dot products, the implicit GEMM
// is several times faster than the fused kernel; LeNet-5's convolutions (6 and 16 channels)
// stay.
bool reduced_precision_prefers_gemm(const Conv2dArgs& geometry, Precision precision,
                                    const SelectionOverrides& overrides) {
  if (precision == Precision::FP32 || reduced_tensor_cores_off(overrides) ||
      overrides.implicit_gemm == Forced::Off) {
    return false;
  }
  const int64_t group_in = geometry.in_channels / geometry.groups;
  return geometry.out_channels / geometry.groups >= 32 &&
         group_in * geometry.kernel_height * geometry.kernel_width >= 64;
}

// The batch rows from which a reduced-precision MLP chain runs on tensor cores; -1 for never.
// tf32 keeps batches of up to kFusedMlpBlockMaxRows rows in exact fp32: there the call is
// bound by its launch, not its arithmetic, and PyTorch with TF32 allowed computes a batch of 1
// in fp32 too (with fp32's error, far below tf32's), which the accuracy contract's "at most 2x
// PyTorch's error" holds fusednn to.
int64_t reduced_tensor_core_min_rows(Precision precision, const SelectionOverrides& overrides) {
  if (reduced_tensor_cores_off(overrides)) return -1;
  return precision == Precision::TF32 ? kFusedMlpBlockMaxRows + 1 : 0;
}

// The cuBLASLt compute type for a model precision: fp32 data throughout, tensor-core products in
// the reduced format from compute capability 8.0 on (unless the override tensor_cores=0).
cublasComputeType_t cublaslt_compute_type(Precision precision, const DeviceInfo& device) {
  if (device.major < 8 || reduced_tensor_cores_off(device.overrides)) return CUBLAS_COMPUTE_32F;
  switch (precision) {
    case Precision::TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::FP16: return CUBLAS_COMPUTE_32F_FAST_16F;
    case Precision::BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case Precision::FP32: break;
  }
  return CUBLAS_COMPUTE_32F;
}

TensorCoreMath tensor_core_math(Precision precision) {
  switch (precision) {
    case Precision::TF32: return TensorCoreMath::Tf32;
    case Precision::FP16: return TensorCoreMath::Fp16;
    case Precision::BF16: return TensorCoreMath::Bf16;
    case Precision::FP32: break;
  }
  return TensorCoreMath::Tf32x3;
}

// The 16-bit format cuBLASLt's operands take in fp16 and bf16 models (from compute capability
// 8.0 on, unless the override tensor_cores=0); false for the other precisions. The override
// cublaslt_half_operands=0 keeps fp32 operands with the 16-bit compute type instead.
bool half_operands(Precision precision, const DeviceInfo& device, HalfFormat* format) {
  if (device.major < 8 || reduced_tensor_cores_off(device.overrides)) return false;
  if (!device.overrides.cublaslt_half_operands) return false;
  if (precision != Precision::FP16 && precision != Precision::BF16) return false;
  *format = precision == Precision::FP16 ? HalfFormat::Binary16 : HalfFormat::Bfloat16;
  return true;
}

// W [out][in] in 16 bits, appended on a 256-byte boundary (cuBLASLt's preferred alignment),
// rounded to nearest even as the device's conversions do.
size_t add_half(std::vector<uint16_t>& blob, const std::vector<float>& weight, HalfFormat format) {
  blob.resize((blob.size() + 127) / 128 * 128, 0);
  const size_t offset = blob.size();
  for (const float value : weight) {
    blob.push_back(format == HalfFormat::Binary16 ? float_to_half(value)
                                                  : float_to_bfloat16(value));
  }
  return offset;
}

// The Softmax or LayerNorm step right after step `chain_end` when it may join the chain's
// kernel: it is the only reader of the chain's workspace output and normalises rows of exactly
// that output (Softmax with no epilogue of its own); else null.
const Step* foldable_row_tail(const Plan& p, size_t chain_end, const std::vector<int>& consumers) {
  const Step& end = p.steps[chain_end];
  if (chain_end + 1 >= p.steps.size()) return nullptr;
  const Step& tail = p.steps[chain_end + 1];
  const bool row_op = tail.kind == StepKind::Softmax || tail.kind == StepKind::LayerNorm;
  if (!row_op || tail.inputs.size() != 1 || tail.inputs[0] != end.output ||
      consumers[end.output] != 1 || p.values[end.output].storage != Storage::Workspace ||
      tail.in_features != end.out_features || tail.rows_per_sample != end.rows_per_sample) {
    return nullptr;
  }
  if (tail.kind == StepKind::Softmax && !tail.epilogue.empty()) return nullptr;
  return &tail;
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
      return (op.row_tail_input >= 0 ? 2 : 1) + std::max(passes, 0);
    default: return 1 + std::max(passes, 0);
  }
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
  device_.ordinal = device_ordinal;
  int value = 0;
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device_ordinal));
  device_.major = value;
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMinor, device_ordinal));
  device_.minor = value;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device_ordinal));
  device_.sm_count = std::max(1, value);
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_ordinal));
  device_.shared_per_block_optin = static_cast<size_t>(value);
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device_ordinal));
  device_.shared_per_sm = static_cast<size_t>(value);
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrIntegrated, device_ordinal));
  device_.integrated = value != 0;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrHostRegisterSupported, device_ordinal));
  device_.host_register = value != 0;
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrHostRegisterReadOnlySupported, device_ordinal));
  device_.host_register_read_only = value != 0;
  device_.overrides = selection_overrides;
  const SelectionOverrides& overrides = device_.overrides;
  FDNN_LOAD_STAMP("backend: device attributes");
  // Lone wide Linear layers go to cuBLASLt, which is faster there than the fused kernel's
  // column-split form. The override cublaslt=0 keeps fp32 models on that form.
  const bool use_cublaslt = precision_ != Precision::FP32 || overrides.cublaslt;
  const bool fused_conv = overrides.fused_conv;
  // A Softmax or LayerNorm after a tensor-core MLP chain folded into its kernel, which saves the
  // row kernel's launch and its read and write of the chain's output (unless fold_row_ops=0).
  // Chains with a first layer too wide for the tensor-core MLP kernels split in two at large
  // batches (fused_mlp_split.hpp). The override split_mlp=0 keeps them whole on the fused FMA
  // kernel, =1 splits them at every batch.
  const bool split_mlps_always = overrides.split_mlp == Forced::On;
  const bool split_mlps =
      overrides.split_mlp != Forced::Off &&
      (precision_ == Precision::FP32 ? overrides.fp32_tensor_cores != Forced::Off
                                     : !reduced_tensor_cores_off(overrides));
  const bool fold_row_ops = overrides.fold_row_ops;
  // Lone wide Linear layers at up to 32 rows on the small-batch kernel rather than cuBLASLt (fp32
  // models), as the override small_batch_linear says (small_batch_linear.hpp).
  const SmallBatchLinearMode small_batch_mode = overrides.small_batch_linear;

  WeightBlob blob;
  std::vector<uint16_t> half_blob;  // cuBLASLt's 16-bit weights
  const bool lt_half_operands = use_cublaslt && half_operands(precision_, device_, &half_format_);
  std::vector<uint32_t> tensor_core_blob;  // tensor-core images (MLP chains, convolutions)
  // Per op, where its images start in tensor_core_blob (kNone where it has none): its
  // tensor-core plan's or its implicit GEMM's, and a split chain's two.
  struct ImageOffsets {
    size_t main = kNone, split_first = kNone, split_rest = kNone;
  };
  std::vector<ImageOffsets> image_offsets;
  // An image of the op being planned (ops_.size()), on 16 bytes.
  auto add_image = [&](const std::vector<uint32_t>& image,
                       size_t ImageOffsets::*which = &ImageOffsets::main) {
    tensor_core_blob.resize((tensor_core_blob.size() + 3) / 4 * 4, 0u);
    image_offsets.resize(ops_.size() + 1);
    image_offsets[ops_.size()].*which = tensor_core_blob.size();
    tensor_core_blob.insert(tensor_core_blob.end(), image.begin(), image.end());
  };
  std::vector<OpRefs> refs;
  const Plan& p = *plan_;
  std::vector<int> consumers(p.values.size(), 0);
  for (const Step& step : p.steps) {
    for (int input : step.inputs) ++consumers[input];
  }
  auto constant = [&](int index) -> const std::vector<float>& { return p.constants.at(index); };

  size_t s = 0;
  while (s < p.steps.size()) {
    const Step& step = p.steps[s];
    Op op;
    OpRefs ref;
    op.first_step = op.last_step = static_cast<int>(s);
    op.epilogue = split_epilogue(step.epilogue);
    switch (step.kind) {
      case StepKind::Linear: {
        // The longest run of Linear steps each feeding only the next, widths on chip.
        std::vector<size_t> chain{s};
        while (chain.size() < static_cast<size_t>(kFusedMlpMaxLayers)) {
          const Step& last = p.steps[chain.back()];
          const size_t next = chain.back() + 1;
          if (next >= p.steps.size()) break;
          const Step& candidate = p.steps[next];
          if (candidate.kind != StepKind::Linear || candidate.inputs.size() != 1 ||
              candidate.inputs[0] != last.output || consumers[last.output] != 1 ||
              p.values[last.output].storage != Storage::Workspace ||
              candidate.rows_per_sample != last.rows_per_sample ||
              last.out_features > kFusedMlpMaxWidth || candidate.out_features > kFusedMlpMaxWidth ||
              last.epilogue.size() > static_cast<size_t>(kMaxEpilogueOps) ||
              candidate.epilogue.size() > static_cast<size_t>(kMaxEpilogueOps) || last.weight < 0 ||
              candidate.weight < 0) {
            break;
          }
          chain.push_back(next);
        }
        // The fused kernel if some prefix of the chain fits on chip, a lone layer only when its
        // columns fit one block; anything else runs on cuBLASLt.
        bool fused = false;
        while (!chain.empty() && step.weight >= 0) {
          if (chain.size() == 1 && step.out_features > kFusedMlpMaxWidth && use_cublaslt) break;
          std::vector<FusedMlpLayerDesc> layers;
          for (size_t index : chain) {
            const Step& layer_step = p.steps[index];
            FusedMlpLayerDesc layer;
            layer.in = as_int32(layer_step.in_features, layer_step, "in_features");
            layer.out = as_int32(layer_step.out_features, layer_step, "out_features");
            layer.padded_out = (layer.out + 3) / 4 * 4;
            layer.epilogue = split_epilogue(layer_step.epilogue).front();
            layers.push_back(layer);
          }
          if (plan_fused_mlp(layers, max_batch_ * step.rows_per_sample, device_, &op.mlp)) {
            fused = true;
            break;
          }
          chain.pop_back();
        }
        FDNN_LOAD_STAMP("backend: fused MLP planned");
        if (fused) {
          op.kind = OpKind::FusedMlp;
          op.last_step = static_cast<int>(chain.back());
          if (chain.size() > 1) {
            op.load_reason = std::to_string(chain.size()) +
                             " Linear layers, each read only by the next and at most " +
                             std::to_string(kFusedMlpMaxWidth) +
                             " wide: one fused MLP launch, activations kept on chip";
          } else if (step.out_features > kFusedMlpMaxWidth) {
            op.load_reason = "a lone Linear layer wider than " + std::to_string(kFusedMlpMaxWidth) +
                             " with cuBLASLt off for fp32 (override cublaslt=0): the fused "
                             "MLP kernel, columns split over blocks";
          } else {
            op.load_reason = "a lone Linear layer " + std::to_string(step.in_features) + "->" +
                             std::to_string(step.out_features) + " (at most " +
                             std::to_string(kFusedMlpMaxWidth) +
                             " outputs): the fused MLP kernel, every column in one block";
          }
          op.epilogue = split_epilogue(p.steps[chain.back()].epilogue);
          for (size_t index : chain) {
            const Step& layer_step = p.steps[index];
            const int64_t padded = (layer_step.out_features + 3) / 4 * 4;
            ref.layer_weight.push_back(add_transposed(blob, constant(layer_step.weight),
                                                      layer_step.in_features,
                                                      layer_step.out_features, padded));
            ref.layer_bias.push_back(layer_step.bias >= 0 ? blob.add(constant(layer_step.bias))
                                                          : kNone);
          }
          FDNN_LOAD_STAMP("backend: chain transposed");
          // The chain's W ([out][in]) and biases on the host, for the kernels' own images.
          std::vector<const float*> weights, biases;
          for (size_t index : chain) {
            const Step& layer_step = p.steps[index];
            weights.push_back(constant(layer_step.weight).data());
            biases.push_back(layer_step.bias >= 0 ? constant(layer_step.bias).data() : nullptr);
          }
          if (op.mlp.block_shared_bytes > 0) {
            ref.block_image = blob.add(build_fused_mlp_row_image(op.mlp.layers, weights, biases));
          }
          if (op.mlp.cluster_shared_bytes > 0) {
            ref.cluster_image =
                blob.add(build_fused_mlp_cluster_image(op.mlp.layers, weights, biases));
          }
          FDNN_LOAD_STAMP("backend: chain images built");
          // The same chain on tensor cores, where the device and the widths allow: in the
          // precision asked for, or for fp32 as 3xTF32 where the knob allows.
          const bool tensor_cores_reachable =
              precision_ != Precision::FP32 ||
              fp32_tensor_cores_reachable(max_batch_ * step.rows_per_sample, device_);
          if (tensor_cores_reachable &&
              plan_tensor_core_mlp(op.mlp.layers, tensor_core_math(precision_), device_,
                                   &op.tensor_core)) {
            op.tensor_core_min_rows = precision_ == Precision::FP32
                                          ? fp32_tensor_core_min_rows(op.tensor_core, device_)
                                          : reduced_tensor_core_min_rows(precision_, overrides);
            if (op.tensor_core_min_rows < 0) op.tensor_core = TensorCoreMlpPlan();
          }
          if (op.tensor_core.tile_rows > 0 && precision_ != Precision::FP32) {
            effective_precision_ = precision_;
          }
          if (op.tensor_core.tile_rows > 0) {
            op.load_reason +=
                std::string("; tensor cores (") +
                (op.tensor_core.form == TensorCoreForm::WarpRegisters ? "WarpRegisters"
                                                                      : "SharedTiles") +
                ", " + tensor_core_math_name(op.tensor_core.math) + ") from " +
                std::to_string(op.tensor_core_min_rows) + " rows";
            if (precision_ == Precision::FP32 && overrides.fp32_tensor_cores != Forced::On) {
              op.load_reason += " (3xTF32 pays off from one 16-row tile per SM: " +
                                std::to_string(device_.sm_count) + " SMs)";
            } else if (precision_ == Precision::TF32) {
              op.load_reason += " (tf32 keeps up to " + std::to_string(kFusedMlpBlockMaxRows) +
                                " rows in fp32, where the launch dominates)";
            }
            if (op.tensor_core.warpgroup.layer_count > 0) {
              op.load_reason += "; the Warpgroup (wgmma) form from " +
                                std::to_string(op.tensor_core.warpgroup.min_rows) +
                                " rows where x is on 16 bytes";
            }
          } else if (precision_ == Precision::FP32 && !tensor_cores_reachable) {
            op.load_reason +=
                "; no tensor-core form: fp32 chains take 3xTF32 from one 16-row "
                "tile per SM (" +
                std::to_string(int64_t{device_.sm_count} * kWarpRegisterTileRows) +
                " rows), beyond max_batch's " + std::to_string(max_batch_ * step.rows_per_sample) +
                " rows";
          } else if (precision_ != Precision::FP32 && reduced_tensor_cores_off(overrides)) {
            op.load_reason += "; no tensor-core form: override tensor_cores=0";
          } else {
            op.load_reason +=
                "; no tensor-core form: " + tensor_core_refusal(op.mlp.layers, device_);
          }
          // A Softmax or LayerNorm after the chain, folded into the tensor-core kernel that
          // ends it where one does (below its rows the chain's kernel and the row kernel run).
          const Step* tail = fold_row_ops && op.epilogue.size() == 1
                                 ? foldable_row_tail(p, chain.back(), consumers)
                                 : nullptr;
          TensorCoreRowTail row_tail;
          if (tail != nullptr) {
            row_tail.kind =
                tail->kind == StepKind::Softmax ? RowTailKind::Softmax : RowTailKind::LayerNorm;
            row_tail.eps = tail->eps;
            row_tail.gamma = tail->weight >= 0;
            row_tail.beta = tail->bias >= 0;
          }
          auto fold_tail = [&] {
            op.row_tail_input = p.steps[chain.back()].output;
            op.last_step = static_cast<int>(chain.back() + 1);
            // The kernel ends with the normalised rows; an activation after them runs as
            // in-place passes.
            op.epilogue = {DeviceEpilogue()};
            if (!tail->epilogue.empty()) {
              for (const DeviceEpilogue& piece : split_epilogue(tail->epilogue)) {
                op.epilogue.push_back(piece);
              }
            }
            if (tail->weight >= 0) ref.weight = blob.add(constant(tail->weight));
            if (tail->bias >= 0) ref.bias = blob.add(constant(tail->bias));
            op.load_reason += std::string("; the ") + step_kind_name(tail->kind) +
                              " after the chain folded into its tensor-core kernel";
          };
          if (tail != nullptr && op.tensor_core.form == TensorCoreForm::WarpRegisters &&
              op.tensor_core.tile_rows > 0) {
            TensorCoreMlpPlan folded;
            if (plan_tensor_core_mlp(op.mlp.layers, tensor_core_math(precision_), device_, &folded,
                                     row_tail)) {
              op.tensor_core = folded;
              fold_tail();
            }
          }
          // Chains too wide for that, split where the batch can reach the split's rows; the
          // tail folded into the split's second kernel where it fits there.
          const int64_t split_rows = int64_t{device_.sm_count} * kWarpRegisterTileRows;
          const bool split_reachable =
              split_mlps_always || max_batch_ * step.rows_per_sample >= split_rows;
          if (op.tensor_core.tile_rows == 0 && split_mlps && split_reachable) {
            const TensorCoreMath math = tensor_core_math(precision_);
            const bool split_folds = tail != nullptr && plan_split_mlp(op.mlp.layers, math, device_,
                                                                       &op.split, row_tail);
            if (split_folds || plan_split_mlp(op.mlp.layers, math, device_, &op.split)) {
              if (split_folds) fold_tail();
              if (split_mlps_always) {
                op.split.min_rows = precision_ == Precision::FP32
                                        ? 0
                                        : reduced_tensor_core_min_rows(precision_, overrides);
              }
              if (precision_ != Precision::FP32) effective_precision_ = precision_;
              op.load_reason += "; the split form from " + std::to_string(op.split.min_rows) +
                                " rows (the first layer, " + std::to_string(step.in_features) +
                                " inputs, too wide for the tensor-core MLP: it runs as an "
                                "implicit GEMM, the rest as WarpRegisters)";
              add_image(build_split_mlp_first_image(op.split, weights.front()),
                        &ImageOffsets::split_first);
              add_image(
                  build_split_mlp_rest_image(
                      op.split, weights, biases,
                      split_folds && tail->weight >= 0 ? constant(tail->weight).data() : nullptr,
                      split_folds && tail->bias >= 0 ? constant(tail->bias).data() : nullptr),
                  &ImageOffsets::split_rest);
            }
          }
          if (op.tensor_core.tile_rows > 0) {
            const Step& after = p.steps[op.last_step];
            const bool has_tail = op.row_tail_input >= 0;
            const std::vector<uint32_t> image = build_tensor_core_mlp_image(
                op.tensor_core, weights, biases,
                has_tail && after.weight >= 0 ? constant(after.weight).data() : nullptr,
                has_tail && after.bias >= 0 ? constant(after.bias).data() : nullptr);
            add_image(image);
          }
        } else {
          op.kind = OpKind::CublasLtLinear;
          op.load_reason =
              step.out_features > kFusedMlpMaxWidth
                  ? "a lone Linear layer " + std::to_string(step.in_features) + "->" +
                        std::to_string(step.out_features) + ", wider than the fused MLP's " +
                        std::to_string(kFusedMlpMaxWidth) + " outputs: cuBLASLt"
                  : "no fused-MLP tile holds Linear " + std::to_string(step.in_features) + "->" +
                        std::to_string(step.out_features) + " in shared memory: cuBLASLt";
          as_int32(step.in_features, step, "in_features");
          as_int32(step.out_features, step, "out_features");
          if (step.weight < 0)
            fail(FDNN_STATUS_INTERNAL_ERROR, "Linear step '", step.label, "' has no weight");
          // W as PyTorch stores it, [out][in], and the bias, each on 256 bytes (cuBLASLt's
          // preferred alignment; the fallback GEMM reads the same layout).
          const auto alignment = static_cast<size_t>(kSlotAlignment);
          ref.weight = blob.add(constant(step.weight), alignment);
          if (step.bias >= 0) ref.bias = blob.add(constant(step.bias), alignment);
          if (lt_half_operands) {
            ref.half_weight = add_half(half_blob, constant(step.weight), half_format_);
            // For writing the model output in 16 bits where cuBLASLt takes no fp32 bias then.
            if (step.bias >= 0 && p.values[step.output].storage == Storage::ModelOutput) {
              ref.half_bias = add_half(half_blob, constant(step.bias), half_format_);
            }
          }
          ref.lt_activation = cublaslt_activation(step.epilogue);
          op.epilogue =
              split_cublaslt_epilogue(step.epilogue, cublaslt_fused_ops(ref.lt_activation));
          if (lt_half_operands) {
            op.load_reason += std::string(" reading W and x in ") +
                              (half_format_ == HalfFormat::Binary16 ? "fp16" : "bf16") +
                              " (x narrowed into the workspace first, or a model input of that "
                              "type read as it is)";
          }
          if (precision_ == Precision::FP32) {
            plan_small_batch_linear(as_int32(step.in_features, step, "in_features"),
                                    as_int32(step.out_features, step, "out_features"), device_,
                                    small_batch_mode, &op.small_batch);
            op.load_reason += op.small_batch.planned()
                                  ? "; the small-batch kernel for 1 to " +
                                        std::to_string(kSmallBatchLinearMaxRows) +
                                        " rows, where its estimate beats cuBLASLt for this shape"
                                  : std::string(
                                        "; no small-batch kernel (it needs compute capability 9.0, "
                                        "and its estimate must beat cuBLASLt for this shape)");
          }
          // With 16-bit operands cuBLASLt reads the narrowed copy, and the narrowing kernel
          // reads the model input.
          const bool lt_reads_input =
              !lt_half_operands && p.values[step.inputs.front()].storage == Storage::ModelInput;
          if (lt_reads_input || p.values[step.output].storage == Storage::ModelOutput) {
            device_graphs_repointable_ = false;
            host_mapped_io_ = false;
          }
        }
        break;
      }
      case StepKind::Conv2d: {
        // The implicit GEMM's plan, made ready (its module loaded) only where it may run.
        const Conv2dArgs geometry = conv2d_geometry(step.window);
        ConvGemmPlan gemm;
        auto ready_gemm = [&] {
          return conv_runs_as_gemm(geometry, precision_, overrides) &&
                 plan_conv_gemm(geometry, tensor_core_math(precision_), device_, &gemm) &&
                 prepare_conv2d_implicit_gemm(gemm, device_);
        };
        const bool prefer_gemm = reduced_precision_prefers_gemm(geometry, precision_, overrides);
        bool gemm_ready = prefer_gemm && ready_gemm();
        if (fused_conv && !gemm_ready && lower_conv_pool(p, s, consumers, device_, &op)) {
          op.load_reason = op.last_step > static_cast<int>(s)
                               ? "the fused conv + pool kernel takes the layer and the pooling "
                                 "after it (its only reader, windows equal to the stride, 1 or 2)"
                               : "the fused conv kernel takes the layer (no pooling after it that "
                                 "it can take)";
          if (precision_ != Precision::FP32) {
            op.load_reason +=
                "; in fp32: fewer than 32 output channels a group or dot products "
                "shorter than 64 would not fill tensor-core tiles";
          }
          ref.weight = blob.add(build_conv_pool_weights(op.conv_pool, constant(step.weight)));
          if (step.bias >= 0) ref.bias = blob.add(constant(step.bias));
          break;
        }
        op.kind = OpKind::Conv2d;
        if (step.bias >= 0) ref.bias = blob.add(constant(step.bias));
        if (!prefer_gemm) gemm_ready = ready_gemm();
        if (gemm_ready) {
          op.load_reason =
              prefer_gemm ? "reduced precision, at least 32 output channels a group and dot "
                            "products of at least 64: an implicit GEMM on tensor cores"
              : precision_ != Precision::FP32
                  ? "reduced precision: an implicit GEMM on tensor cores"
                  : "too large for the direct kernel's shared-memory staging: an implicit GEMM "
                    "in 3xTF32 on tensor cores";
          op.conv_gemm = gemm;
          if (precision_ != Precision::FP32) effective_precision_ = precision_;
          add_image(build_conv_gemm_image(op.conv_gemm, geometry, constant(step.weight).data()));
          break;
        }
        ref.weight = blob.add(constant(step.weight));
        op.load_reason = fused_conv ? "the direct kernel (conv2d.cu): the fused conv kernel does "
                                      "not take this geometry"
                                    : "the direct kernel (conv2d.cu): the fused conv kernel is off "
                                      "(override fused_conv=0)";
        break;
      }
      case StepKind::MaxPool2d: op.kind = OpKind::MaxPool2d; break;
      case StepKind::AvgPool2d: op.kind = OpKind::AvgPool2d; break;
      case StepKind::Elementwise: op.kind = OpKind::Elementwise; break;
      case StepKind::ChannelAffine:
        op.kind = OpKind::ChannelAffine;
        ref.weight = blob.add(constant(step.weight));
        ref.bias = blob.add(constant(step.bias));
        break;
      case StepKind::LayerNorm:
        op.kind = OpKind::LayerNorm;
        if (step.weight >= 0) ref.weight = blob.add(constant(step.weight));
        if (step.bias >= 0) ref.bias = blob.add(constant(step.bias));
        break;
      case StepKind::Softmax: op.kind = OpKind::Softmax; break;
      case StepKind::Add: op.kind = OpKind::Add; break;
      case StepKind::Concat: op.kind = OpKind::Concat; break;
      case StepKind::Copy: op.kind = OpKind::Copy; break;
    }
    launches_per_run_ += launches_for(op, step);
    ops_.push_back(std::move(op));
    refs.push_back(std::move(ref));
    s = static_cast<size_t>(ops_.back().last_step) + 1;
  }

  FDNN_LOAD_STAMP("backend: ops planned, images built");
  bool uses_cublaslt = false;
  for (const Op& op : ops_) uses_cublaslt = uses_cublaslt || op.kind == OpKind::CublasLtLinear;
  // Without a loadable cuBLASLt those steps run on the tiled GEMM (the reason is kept for
  // cublaslt_unavailable_reason()).
  if (uses_cublaslt && !use_cublaslt) {
    cublaslt_unavailable_reason_ = "cuBLASLt is off for fp32 models (override cublaslt=0)";
  } else if (uses_cublaslt && cublaslt_library(&cublaslt_unavailable_reason_) != nullptr) {
    cublaslt_ = std::make_unique<CublasLtHandle>();  // on the model's device, current here
    cublaslt_workspace_bytes_ = recommended_cublaslt_workspace_bytes(device_);
  }

  FDNN_LOAD_STAMP("backend: cuBLASLt handle");
  // One allocation and one copy for every weight; then the ops get their pointers.
  std::vector<float>& floats = blob.floats();
  weights_ = DeviceArray<float>(floats.size());
  if (!floats.empty()) {
    FDNN_CUDA_CHECK(cudaMemcpy(weights_.data(), floats.data(), floats.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  }
  if (cublaslt_ && !half_blob.empty()) {
    half_weights_ = DeviceArray<uint16_t>(half_blob.size());
    FDNN_CUDA_CHECK(cudaMemcpy(half_weights_.data(), half_blob.data(),
                               half_blob.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
  tensor_core_images_ = DeviceArray<uint32_t>(tensor_core_blob.size());
  if (!tensor_core_blob.empty()) {
    FDNN_CUDA_CHECK(cudaMemcpy(tensor_core_images_.data(), tensor_core_blob.data(),
                               tensor_core_blob.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
  }
  FDNN_LOAD_STAMP("backend: weights uploaded");
  for (size_t i = 0; i < image_offsets.size(); ++i) {
    auto image_at = [&](size_t offset) -> const uint32_t* {
      return offset == kNone ? nullptr : tensor_core_images_.data() + offset;
    };
    const ImageOffsets& at = image_offsets[i];
    if (ops_[i].kind == OpKind::Conv2d) {
      ops_[i].conv_gemm.image = image_at(at.main);
    } else {
      ops_[i].tensor_core.image = image_at(at.main);
    }
    ops_[i].split.first.image = image_at(at.split_first);
    ops_[i].split.rest.image = image_at(at.split_rest);
  }
  const float* base = weights_.data();
  auto pointer = [&](size_t offset) -> const float* {
    return offset == kNone ? nullptr : base + offset;
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    op.weight = pointer(refs[i].weight);
    op.bias = pointer(refs[i].bias);
    op.mlp.block_image = pointer(refs[i].block_image);
    op.mlp.cluster_image = pointer(refs[i].cluster_image);
    for (size_t l = 0; l < op.mlp.layers.size() && l < refs[i].layer_weight.size(); ++l) {
      op.mlp.layers[l].weight_t = pointer(refs[i].layer_weight[l]);
      op.mlp.layers[l].bias = pointer(refs[i].layer_bias[l]);
    }
    if (op.kind == OpKind::CublasLtLinear && cublaslt_) {
      const Step& step = p.steps[op.first_step];
      if (refs[i].half_weight != kNone) {
        op.half_weight = half_weights_.data() + refs[i].half_weight;
        ++launches_per_run_;  // the narrowing of a float32 x (cublaslt_input_narrowings_)
      }
      const cublasComputeType_t compute = op.half_weight != nullptr
                                              ? CUBLAS_COMPUTE_32F
                                              : cublaslt_compute_type(precision_, device_);
      const cudaDataType_t operands = op.half_weight == nullptr              ? CUDA_R_32F
                                      : half_format_ == HalfFormat::Binary16 ? CUDA_R_16F
                                                                             : CUDA_R_16BF;
      const void* half_bias =
          refs[i].half_bias != kNone ? half_weights_.data() + refs[i].half_bias : nullptr;
      op.lt = std::make_unique<CublasLtLinear>(
          cublaslt_->get(), static_cast<int32_t>(step.in_features),
          static_cast<int32_t>(step.out_features), refs[i].lt_activation,
          op.half_weight != nullptr ? op.half_weight : op.weight, op.bias,
          cublaslt_workspace_bytes_, compute, operands, half_bias);
      if (compute != CUBLAS_COMPUTE_32F || op.half_weight != nullptr) {
        effective_precision_ = precision_;
      }
    }
    if (op.kind == OpKind::CublasLtLinear) prepare_small_batch_linear_kernel(op.small_batch);
  }
  FDNN_LOAD_STAMP("backend: cuBLASLt descriptors, small-batch Linear kernels");
  if (fused_conv) plan_single_launch();
  FDNN_LOAD_STAMP("backend: single launch planned");
  // The per-layer kernels batches outside the single launch reach. Readying a kernel loads it,
  // and a first model in a process waits for each one it loads (bench/cuda/cold_start.cpp).
  if (!single_launch_.takes(1) || !single_launch_.takes(max_batch_)) {
    for (const Op& op : ops_) {
      const int64_t rows = max_batch_ * p.steps[op.first_step].rows_per_sample;
      if (op.kind == OpKind::FusedMlp) prepare_fused_mlp_kernels(op.mlp, rows, device_);
      if (op.kind == OpKind::ConvPool &&
          !prepare_conv_pool_kernels(op.conv_pool, max_batch_, device_)) {
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
    if (op.split.usable()) {
      const int64_t rows_per_sample = p.steps[op.first_step].rows_per_sample;
      const int64_t min_batch = (op.split.min_rows + rows_per_sample - 1) / rows_per_sample;
      split_min_batches_.push_back(min_batch);
      // With a folded tail, two launches either way: the chain's kernel and the row kernel
      // below the split's rows, the split's two from there (launches_for counts two).
      if (op.row_tail_input < 0) split_launch_min_batches_.push_back(min_batch);
    }
    bool workspace = op.kind == OpKind::CublasLtLinear;
    std::vector<int> values = p.steps[op.first_step].inputs;
    values.push_back(p.steps[op.last_step].output);
    values.push_back(op.row_tail_input);
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
    const bool half_cublaslt =
        op.kind == OpKind::CublasLtLinear && op.lt != nullptr && op.half_weight != nullptr &&
        p.values[p.steps[op.first_step].inputs.front()].storage == Storage::ModelInput;
    op.takes_16_bit_io = half_cublaslt || (op.kind == OpKind::FusedMlp &&
                                           tensor_core_mlp_takes_16_bit_io(op.tensor_core));
    cublaslt_reads_16_bit_input_ = cublaslt_reads_16_bit_input_ || half_cublaslt;
    if (half_cublaslt) ++cublaslt_input_narrowings_;
    // cuBLASLt's epilogue is the last thing done to its output: no pass may run in place after.
    op.writes_16_bit_output = op.kind == OpKind::CublasLtLinear && op.lt != nullptr &&
                              op.half_weight != nullptr && op.writes_model_output &&
                              op.epilogue.size() <= 1;
    cublaslt_writes_16_bit_output_ = cublaslt_writes_16_bit_output_ || op.writes_16_bit_output;
    if (op.writes_16_bit_output) {
      op.load_reason += "; a model output of that type on 256 bytes is cuBLASLt's D as it is";
    }
  }
}

bool CudaBackend::op_takes_16_bit_io(const Op& op, int64_t batch) const {
  if (!op.takes_16_bit_io || op.kind != OpKind::FusedMlp) return false;
  const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
  return mlp_route(op, rows) == MlpRoute::TensorCore;
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
  if (op.kind != OpKind::CublasLtLinear) return op_takes_16_bit_io(op, batch);
  if (!op.takes_16_bit_io) return false;
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
  return op.lt->choose(rows, data, y, cublaslt_type(y_type)).usable;
}

bool CudaBackend::op_writes_16_bit(const Op& op, int64_t batch, ElementType output,
                                   const void* data) const {
  const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
  if (op.kind != OpKind::CublasLtLinear) {
    // In-place passes after the kernel (epilogue pieces past the first) run on float32.
    return op.epilogue.size() <= 1 && op_takes_16_bit_io(op, batch) &&
           tensor_core_mlp_writes(op.tensor_core, output, rows);
  }
  if (!op.writes_16_bit_output) return false;
  // cuBLASLt's D in its operands' type, on 256 bytes. Its x is then on 256 bytes too, whichever
  // it reads: a 16-bit model input it takes as it is (op_reads_16_bit() asks for 256), or the
  // staging.
  const ElementType own =
      half_format_ == HalfFormat::Binary16 ? ElementType::Float16 : ElementType::Bfloat16;
  if (output != own || reinterpret_cast<uintptr_t>(data) % 256 != 0) return false;
  const auto* aligned = reinterpret_cast<const void*>(uintptr_t{256});
  return op.lt->choose(rows, aligned, data, cublaslt_type(output)).usable;
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
    if (!op.reads_model_input || op.kind != OpKind::FusedMlp) continue;
    const int64_t rows = batch * plan_->steps[op.first_step].rows_per_sample;
    if (mlp_route(op, rows) == MlpRoute::TensorCore &&
        tensor_core_mlp_launch_form(op.tensor_core, aligned, rows) ==
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
    if (op.kind == OpKind::ConvPool && head.empty()) {
      stages.push_back({&op.conv_pool, op.weight, op.bias});
    } else if (op.kind == OpKind::FusedMlp && i + 1 == ops_.size() && !stages.empty() &&
               op.row_tail_input < 0 && first.rows_per_sample == 1) {
      head = op.mlp.layers;
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
    if (op.lt) op.lt->refuse_for_testing();
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
    for (const int output : {p.steps[op.last_step].output, op.row_tail_input}) {
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
    if (op.half_weight == nullptr) continue;
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
    if (!op.split.usable()) continue;
    const Step& step = p.steps[op.first_step];
    middle_floats = std::max(middle_floats,
                             times_batch(checked_multiply(
                                 step.rows_per_sample, int64_t{op.split.first_shape.out_channels},
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

MlpRoute CudaBackend::mlp_route(const Op& op, int64_t rows) {
  if (op.tensor_core.tile_rows > 0 && rows >= op.tensor_core_min_rows) return MlpRoute::TensorCore;
  if (op.split.usable() && rows >= op.split.min_rows) return MlpRoute::Split;
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
        const bool tail = op.row_tail_input >= 0;
        const std::string tail_name =
            tail ? step_kind_name(p.steps[op.last_step].kind) : std::string();
        switch (mlp_route(op, rows)) {
          case MlpRoute::TensorCore: {
            const TensorCoreLaunchForm form =
                tensor_core_mlp_launch_form(op.tensor_core, aligned, rows);
            const char* name = form == TensorCoreLaunchForm::Warpgroup       ? "Warpgroup (wgmma)"
                               : form == TensorCoreLaunchForm::WarpRegisters ? "WarpRegisters"
                                                                             : "SharedTiles";
            choice.form = std::string("fused MLP on tensor cores, ") + name + ", " +
                          tensor_core_math_name(op.tensor_core.math) +
                          (tail ? " + folded " + tail_name : "");
            now = std::to_string(rows) + " rows, from " + std::to_string(op.tensor_core_min_rows) +
                  " on tensor cores";
            if (op.tensor_core.warpgroup.layer_count > 0) {
              now += form == TensorCoreLaunchForm::Warpgroup
                         ? ", from " + std::to_string(op.tensor_core.warpgroup.min_rows) +
                               " the Warpgroup form"
                         : ", below the Warpgroup form's " +
                               std::to_string(op.tensor_core.warpgroup.min_rows);
            }
            choice.launches = 1 + std::max(passes, 0);
            break;
          }
          case MlpRoute::Split:
            choice.form = std::string("split MLP: implicit GEMM, then WarpRegisters, ") +
                          tensor_core_math_name(op.split.rest.math) +
                          (tail ? " + folded " + tail_name : "");
            now = std::to_string(rows) + " rows, from the split form's " +
                  std::to_string(op.split.min_rows);
            choice.launches = 2 + std::max(passes, 0);
            break;
          case MlpRoute::Fused: {
            const FusedMlpForm form = fused_mlp_form(op.mlp, rows, device_);
            choice.form = std::string("fused MLP (fp32 FMA), ") + fused_mlp_form_name(form) +
                          (tail ? ", then the " + tail_name + " row kernel" : "");
            now = fused_mlp_form_reason(op.mlp, form, rows);
            if (op.tensor_core.tile_rows > 0) {
              now += "; below the tensor-core form's " + std::to_string(op.tensor_core_min_rows);
            } else if (op.split.usable()) {
              now += "; below the split form's " + std::to_string(op.split.min_rows);
            }
            choice.launches = (tail ? 2 : 1) + std::max(passes, 0);
            break;
          }
        }
        break;
      }
      case OpKind::CublasLtLinear: {
        const char* epilogue = "bias";
        if (op.lt) {
          epilogue = op.lt->activation() == CublasLtActivation::ReLU       ? "bias + ReLU"
                     : op.lt->activation() == CublasLtActivation::GeluTanh ? "bias + GELU(tanh)"
                                                                           : "bias";
        }
        if (small_batch_linear_takes(op.small_batch, rows, aligned)) {
          choice.form =
              std::string("small-batch Linear (3xTF32 tensor cores") +
              (op.small_batch.cluster ? ", pairs of blocks sharing x where the rows allow" : "") +
              ")";
          now = std::to_string(rows) + " rows, at most " + std::to_string(kSmallBatchLinearMaxRows);
        } else if (op.lt) {
          const CublasLtLinear::Choice& lt_choice = op.lt->choose(rows, aligned, aligned);
          if (lt_choice.usable) {
            choice.form =
                std::string("cuBLASLt, ") +
                (op.half_weight == nullptr ? precision_name(precision_) + std::string(" compute")
                 : half_format_ == HalfFormat::Binary16 ? std::string("fp16 operands")
                                                        : std::string("bf16 operands")) +
                ", " + epilogue + " in its epilogue";
            now = "cuBLASLt has an algorithm for " + std::to_string(rows) + " rows";
            if (op.small_batch.planned()) {
              now += ", more than the small-batch kernel's " +
                     std::to_string(kSmallBatchLinearMaxRows);
            }
            if (op.half_weight != nullptr) {
              ++choice.launches;  // a float32 x narrowed into the 16-bit staging first
              const char* own = half_format_ == HalfFormat::Binary16 ? "float16" : "bfloat16";
              if (op.takes_16_bit_io) {
                now += std::string("; a ") + own +
                       " model input on 256 bytes is the operand as it is, one launch fewer";
              }
              if (op.writes_16_bit_output) {
                const ElementType type = half_format_ == HalfFormat::Binary16
                                             ? ElementType::Float16
                                             : ElementType::Bfloat16;
                const CublasLtLinear::Choice& written =
                    op.lt->choose(rows, aligned, aligned, cublaslt_type(type));
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
      case OpKind::Conv2d:
        choice.form = op.conv_gemm.usable ? std::string("implicit GEMM on tensor cores, ") +
                                                tensor_core_math_name(op.conv_gemm.math) +
                                                (op.conv_gemm.dense_rows ? ", dense rows" : "")
                                          : std::string("direct convolution (conv2d.cu)");
        break;
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

  // The LayerNorm or Softmax of `row_step` over `rows` rows (LayerNorm's gamma and beta in
  // op.weight and op.bias): its own op, or one folded after a fused chain.
  auto row_op = [&](const Op& op, const Step& row_step, const float* in, float* out, int64_t rows) {
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
    args.gamma = op.weight;
    args.beta = op.bias;
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
        const int64_t rows = batch * step.rows_per_sample;
        const MlpRoute route = mlp_route(op, rows);
        if (route == MlpRoute::TensorCore) {
          launch_tensor_core_mlp(op.tensor_core, typed_input(step.inputs.front()),
                                 typed_output(last.output), rows, device_, stream);
        } else if (route == MlpRoute::Split) {
          launch_split_mlp(op.split, x, op.mlp.layers.front().bias,
                           workspace + split_middle_offset_, y, rows, device_, stream);
        } else if (op.row_tail_input < 0) {
          launch_fused_mlp(op.mlp, x, y, rows, device_, stream);
        } else {
          float* middle = data(op.row_tail_input);
          launch_fused_mlp(op.mlp, x, middle, rows, device_, stream);
          row_op(op, last, middle, y, rows);
        }
        break;
      }
      case OpKind::CublasLtLinear: {
        const int64_t rows = batch * step.rows_per_sample;
        // The small-batch kernel and the tiled GEMM apply the bias and the ops cuBLASLt's
        // epilogue would have fused, so the passes after them stay the same.
        LinearArgs args;
        args.x = x;
        args.weight = op.weight;
        args.bias = op.bias;
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
        if (!direct && !direct_output && small_batch_linear_takes(op.small_batch, rows, x)) {
          launch_small_batch_linear(op.small_batch, args, stream);
          break;
        }
        if (op.lt) {
          void* staging = workspace + half_staging_offset_;
          const void* operand = direct                      ? typed_x.data
                                : op.half_weight != nullptr ? staging
                                                            : static_cast<const void*>(x);
          const CublasLtLinear::Choice& choice =
              op.lt->choose(rows, operand, typed_y.data, cublaslt_type(typed_y.type));
          if (choice.usable) {
            if (op.half_weight != nullptr && !direct) {
              launch_narrow(x, staging, half_format_, rows * step.in_features, device_, stream);
            }
            op.lt->run(choice, operand, typed_y.data, cublaslt_workspace, stream);
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
        Conv2dArgs args = conv2d_geometry(w);
        args.x = x;
        args.weight = op.weight;
        args.bias = op.bias;
        args.y = y;
        args.batch = batch;
        args.epilogue = op.epilogue.front();
        if (op.conv_gemm.usable) {
          launch_conv2d_implicit_gemm(op.conv_gemm, args, stream);
        } else {
          launch_conv2d(args, device_, stream);
        }
        break;
      }
      case OpKind::ConvPool:
        launch_conv_pool(op.conv_pool, x, op.weight, op.bias, y, batch, device_, stream);
        break;
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
        ChannelAffineArgs args;
        args.x = x;
        args.scale = op.weight;
        args.shift = op.bias;
        args.y = y;
        args.batch = batch;
        args.channels = step.in_features;
        args.spatial = step.out_features;
        args.epilogue = op.epilogue.front();
        launch_channel_affine(args, device_, stream);
        break;
      }
      case OpKind::LayerNorm:
      case OpKind::Softmax: row_op(op, step, x, y, batch * step.rows_per_sample); break;
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
