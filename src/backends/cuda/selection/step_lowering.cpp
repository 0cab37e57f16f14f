// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/selection/step_lowering.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "backends/cuda/conv/conv_pool.hpp"
#include "backends/cuda/elementwise/layer_norm.hpp"
#include "backends/cuda/linear/small_batch_linear.hpp"
#include "backends/cuda/mlp/fused_mlp_row_image.hpp"
#include "backends/cuda/selection/form_selection.hpp"
#include "common/elementwise_op.hpp"
#include "common/error.hpp"
#include "common/half_float.hpp"
#include "common/load_timeline.hpp"

namespace fusednn::cuda {
namespace {

static_assert(kOpReLU == static_cast<int>(ElementwiseKind::ReLU) &&
                  kOpLeakyReLU == static_cast<int>(ElementwiseKind::LeakyReLU) &&
                  kOpGeluErf == static_cast<int>(ElementwiseKind::GeluErf) &&
                  kOpGeluTanh == static_cast<int>(ElementwiseKind::GeluTanh) &&
                  kOpSiLU == static_cast<int>(ElementwiseKind::SiLU) &&
                  kOpSigmoid == static_cast<int>(ElementwiseKind::Sigmoid) &&
                  kOpTanh == static_cast<int>(ElementwiseKind::Tanh) &&
                  kOpScale == static_cast<int>(ElementwiseKind::Scale),
              "device op codes must equal ElementwiseKind's values");

// `count` floats appended to the image on `alignment` floats (16 bytes unless asked), zeroed.
size_t reserve_floats(std::vector<float>& floats, size_t count, size_t alignment = 4) {
  floats.resize((floats.size() + alignment - 1) / alignment * alignment, 0.0f);
  const size_t offset = floats.size();
  floats.resize(offset + count, 0.0f);
  return offset;
}

size_t add_floats(std::vector<float>& floats, const std::vector<float>& values,
                  size_t alignment = 4) {
  const size_t offset = reserve_floats(floats, values.size(), alignment);
  std::copy(values.begin(), values.end(), floats.begin() + static_cast<std::ptrdiff_t>(offset));
  return offset;
}

// An image appended to the tensor-core images on 16 bytes; its offset.
size_t add_image(std::vector<uint32_t>& images, const std::vector<uint32_t>& image) {
  images.resize((images.size() + 3) / 4 * 4, 0u);
  const size_t offset = images.size();
  images.insert(images.end(), image.begin(), image.end());
  return offset;
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
size_t add_transposed(std::vector<float>& floats, const std::vector<float>& weight, int64_t in,
                      int64_t out, int64_t row_stride) {
  const size_t offset = reserve_floats(floats, static_cast<size_t>(in * row_stride));
  float* destination = floats.data() + offset;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < in; ++k) destination[k * row_stride + o] = weight[o * in + k];
  }
  return offset;
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
// epilogue and ConvPoolOp payload (its kernels are readied once the backend knows which batches
// reach them); false when the layer does not fit.
bool plan_fused_conv(const Plan& p, size_t s, const std::vector<int>& consumers,
                     const DeviceInfo& device, Op* op) {
  ConvPoolOp fused;
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
      if (plan_conv_pool(pooled, device, &fused.conv_pool)) {
        op->kind = OpKind::ConvPool;
        op->payload = std::move(fused);
        op->last_step = static_cast<int>(s + 1);
        op->epilogue = split_epilogue(pool.epilogue);
        return true;
      }
    }
  }
  if (!plan_conv_pool(desc, device, &fused.conv_pool)) return false;
  op->kind = OpKind::ConvPool;
  op->payload = std::move(fused);
  op->epilogue = pieces;  // pieces past the first run in place after the kernel, as for Conv2d
  return true;
}

// The selection table's view of an unfused Conv2d.
ConvProblem conv_problem(const Conv2dArgs& geometry, Precision precision) {
  ConvProblem problem;
  problem.in_channels = geometry.in_channels;
  problem.out_channels = geometry.out_channels;
  problem.groups = geometry.groups;
  problem.kernel_height = geometry.kernel_height;
  problem.kernel_width = geometry.kernel_width;
  problem.fits_direct_staging = conv2d_fits_staged(geometry);
  problem.precision = precision;
  return problem;
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

// ---- Linear steps ----

// The longest run of Linear steps from step s, each feeding only the next, widths on chip.
std::vector<size_t> linear_chain(const Plan& p, size_t s, const std::vector<int>& consumers) {
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
  return chain;
}

// The chain's layers as the fused MLP planners take them (no pointers yet).
std::vector<FusedMlpLayerDesc> chain_layers(const Plan& p, const std::vector<size_t>& chain) {
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
  return layers;
}

const char* tensor_core_form_name(TensorCoreForm form) {
  return form == TensorCoreForm::WarpRegisters ? "WarpRegisters" : "SharedTiles";
}

// A chain of Linear steps (or a lone one the table keeps on the fused kernel) as one fused MLP
// op: the FMA kernels' plan (`mlp`, already planned), and the tensor-core and split forms where
// the table's rules and the device allow; a Softmax or LayerNorm after it folded in where it can.
void lower_fused_chain(const LoweringInput& in, const std::vector<size_t>& chain,
                       const LoneLinearChoice& lone, FusedMlpPlan mlp, HostImages* images,
                       LoweredOp* lowered) {
  const Plan& p = *in.plan;
  const DeviceInfo& device = in.device;
  Op& op = lowered->op;
  OpRefs& ref = lowered->refs;
  MlpChainOp& fused = op.payload.emplace<MlpChainOp>();
  fused.mlp = std::move(mlp);
  MlpChainRefs& fused_ref = ref.of_kind.emplace<MlpChainRefs>();
  const Step& step = p.steps[chain.front()];
  const int64_t rows = in.max_batch * step.rows_per_sample;
  auto constant = [&](int index) -> const std::vector<float>& { return p.constants.at(index); };
  op.kind = OpKind::FusedMlp;
  op.last_step = static_cast<int>(chain.back());
  if (chain.size() > 1) {
    op.load_reason =
        std::to_string(chain.size()) + " Linear layers, each read only by the next and at most " +
        std::to_string(kFusedMlpMaxWidth) + " wide: one fused MLP launch, activations kept on chip";
  } else {
    op.load_reason = lone.reason + rejected_text(lone.rejected);
  }
  op.epilogue = split_epilogue(p.steps[chain.back()].epilogue);
  for (size_t index : chain) {
    const Step& layer_step = p.steps[index];
    const int64_t padded = (layer_step.out_features + 3) / 4 * 4;
    fused_ref.layer_weight.push_back(add_transposed(images->floats, constant(layer_step.weight),
                                                    layer_step.in_features, layer_step.out_features,
                                                    padded));
    fused_ref.layer_bias.push_back(
        layer_step.bias >= 0 ? add_floats(images->floats, constant(layer_step.bias)) : kNoOffset);
  }
  FDNN_LOAD_STAMP("backend: chain transposed");
  // The chain's W ([out][in]) and biases on the host, for the kernels' own images.
  std::vector<const float*> weights, biases;
  for (size_t index : chain) {
    const Step& layer_step = p.steps[index];
    weights.push_back(constant(layer_step.weight).data());
    biases.push_back(layer_step.bias >= 0 ? constant(layer_step.bias).data() : nullptr);
  }
  if (fused.mlp.block_shared_bytes > 0) {
    fused_ref.block_image =
        add_floats(images->floats, build_fused_mlp_row_image(fused.mlp.layers, weights, biases));
  }
  if (fused.mlp.cluster_shared_bytes > 0) {
    fused_ref.cluster_image = add_floats(
        images->floats, build_fused_mlp_cluster_image(fused.mlp.layers, weights, biases));
  }
  FDNN_LOAD_STAMP("backend: chain images built");

  ChainProblem problem;
  for (const FusedMlpLayerDesc& layer : fused.mlp.layers)
    problem.layers.push_back({layer.in, layer.out});
  problem.precision = in.precision;
  problem.max_rows = rows;
  const ChainFormRules rules = choose_chain_forms(problem, device);
  const TensorCoreMath math = tensor_core_math(in.precision);
  // The same chain on tensor cores where the table's rules and the device allow.
  bool tensor_core_unused = false;  // planned, but the table runs its form at no batch
  if (rules.plan_tensor_cores &&
      plan_tensor_core_mlp(fused.mlp.layers, math, device, &fused.tensor_core)) {
    fused.tensor_core_min_rows = fused.tensor_core.form == TensorCoreForm::WarpRegisters
                                     ? rules.warp_registers_min_rows
                                     : rules.shared_tiles_min_rows;
    if (fused.tensor_core_min_rows < 0) {
      tensor_core_unused = true;
      op.load_reason += std::string("; no tensor-core form: only ") +
                        tensor_core_form_name(fused.tensor_core.form) + " fits, which " +
                        precision_name(in.precision) + " chains do not take";
      fused.tensor_core = TensorCoreMlpPlan();
    }
  }
  if (fused.tensor_core.tile_rows > 0) {
    lowered->runs_reduced_precision = in.precision != Precision::FP32;
    op.load_reason +=
        std::string("; tensor cores (") + tensor_core_form_name(fused.tensor_core.form) + ", " +
        tensor_core_math_name(fused.tensor_core.math) + ") from " +
        std::to_string(fused.tensor_core_min_rows) + " rows (" + rules.tensor_core_reason + ")";
    if (fused.tensor_core.warpgroup.layer_count > 0) {
      op.load_reason += "; the Warpgroup (wgmma) form from " +
                        std::to_string(fused.tensor_core.warpgroup.min_rows) +
                        " rows where x is on 16 bytes";
    }
  } else if (!rules.plan_tensor_cores) {
    op.load_reason += "; no tensor-core form: " + rules.tensor_core_reason;
  } else if (!tensor_core_unused) {
    op.load_reason +=
        "; no tensor-core form: " +
        (rules.size_refusal.empty() ? std::string("the chain's weights do not fit in shared memory")
                                    : rules.size_refusal);
  }
  // A Softmax or LayerNorm after the chain, folded into the tensor-core kernel that ends it
  // where one does (below its rows the chain's kernel and the row kernel run).
  const Step* tail = rules.fold_row_tail && op.epilogue.size() == 1
                         ? foldable_row_tail(p, chain.back(), in.consumers)
                         : nullptr;
  TensorCoreRowTail row_tail;
  if (tail != nullptr) {
    row_tail.kind = tail->kind == StepKind::Softmax ? RowTailKind::Softmax : RowTailKind::LayerNorm;
    row_tail.eps = tail->eps;
    row_tail.gamma = tail->weight >= 0;
    row_tail.beta = tail->bias >= 0;
  }
  auto fold_tail = [&] {
    fused.row_tail_input = p.steps[chain.back()].output;
    op.last_step = static_cast<int>(chain.back() + 1);
    // The kernel ends with the normalised rows; an activation after them runs as in-place
    // passes.
    op.epilogue = {DeviceEpilogue()};
    if (!tail->epilogue.empty()) {
      for (const DeviceEpilogue& piece : split_epilogue(tail->epilogue)) {
        op.epilogue.push_back(piece);
      }
    }
    if (tail->weight >= 0) ref.weight = add_floats(images->floats, constant(tail->weight));
    if (tail->bias >= 0) ref.bias = add_floats(images->floats, constant(tail->bias));
    op.load_reason += std::string("; the ") + step_kind_name(tail->kind) +
                      " after the chain folded into its tensor-core kernel";
  };
  if (tail != nullptr && fused.tensor_core.form == TensorCoreForm::WarpRegisters &&
      fused.tensor_core.tile_rows > 0) {
    TensorCoreMlpPlan folded;
    if (plan_tensor_core_mlp(fused.mlp.layers, math, device, &folded, row_tail)) {
      fused.tensor_core = folded;
      fold_tail();
    }
  }
  // The split form where no tensor-core form runs the chain (a first layer too wide for them),
  // or beside SharedTiles in fp16 and bf16, where the batch can reach its rows. The tail folds
  // into its second kernel where it fits there and SharedTiles does not run below those rows
  // (SharedTiles takes no tail).
  const bool over_shared_tiles = fused.tensor_core.tile_rows > 0 &&
                                 fused.tensor_core.form == TensorCoreForm::SharedTiles &&
                                 rules.split_replaces_shared_tiles;
  if ((fused.tensor_core.tile_rows == 0 || over_shared_tiles) && rules.plan_split) {
    const bool split_folds = tail != nullptr && !over_shared_tiles &&
                             plan_split_mlp(fused.mlp.layers, math, device, &fused.split, row_tail);
    if (split_folds || plan_split_mlp(fused.mlp.layers, math, device, &fused.split)) {
      if (split_folds) fold_tail();
      if (rules.split_at_every_batch) fused.split.min_rows = rules.split_forced_min_rows;
      if (in.precision != Precision::FP32) lowered->runs_reduced_precision = true;
      op.load_reason += "; the split form from " + std::to_string(fused.split.min_rows) +
                        " rows (the first layer, " + std::to_string(step.in_features) +
                        " inputs, too wide for the WarpRegisters form: it runs as an implicit "
                        "GEMM, the rest as WarpRegisters; " +
                        rules.split_reason + ")";
      fused_ref.split_first_image =
          add_image(images->tensor_core, build_split_mlp_first_image(fused.split, weights.front()));
      fused_ref.split_rest_image =
          add_image(images->tensor_core,
                    build_split_mlp_rest_image(
                        fused.split, weights, biases,
                        split_folds && tail->weight >= 0 ? constant(tail->weight).data() : nullptr,
                        split_folds && tail->bias >= 0 ? constant(tail->bias).data() : nullptr));
    }
  }
  if (fused.tensor_core.tile_rows > 0) {
    const Step& after = p.steps[op.last_step];
    const bool has_tail = fused.row_tail_input >= 0;
    fused_ref.tensor_core_image =
        add_image(images->tensor_core,
                  build_tensor_core_mlp_image(
                      fused.tensor_core, weights, biases,
                      has_tail && after.weight >= 0 ? constant(after.weight).data() : nullptr,
                      has_tail && after.bias >= 0 ? constant(after.bias).data() : nullptr));
  }
}

// A lone Linear step on cuBLASLt (its bias and a ReLU or GELU(tanh) in cuBLASLt's epilogue, W
// in PyTorch's [out][in] layout; in fp16 and bf16 models a 16-bit copy of W); the tiled GEMM
// of linear.cu stands in where cuBLASLt has no algorithm or is not loaded, and in fp32 models
// the small-batch kernel takes runs of a few rows where its plan says it is faster.
void lower_cublaslt_linear(const LoweringInput& in, size_t s, const LoneLinearChoice& lone,
                           bool preferred, HostImages* images, LoweredOp* lowered) {
  const Plan& p = *in.plan;
  const Step& step = p.steps[s];
  Op& op = lowered->op;
  OpRefs& ref = lowered->refs;
  op.kind = OpKind::CublasLtLinear;
  LinearOp& linear = op.payload.emplace<LinearOp>();
  LinearRefs& linear_ref = ref.of_kind.emplace<LinearRefs>();
  op.load_reason =
      preferred ? lone.reason + rejected_text(lone.rejected)
                : "no fused-MLP tile holds Linear " + std::to_string(step.in_features) + "->" +
                      std::to_string(step.out_features) + " in shared memory: cuBLASLt";
  as_int32(step.in_features, step, "in_features");
  as_int32(step.out_features, step, "out_features");
  if (step.weight < 0) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "Linear step '", step.label, "' has no weight");
  }
  const std::vector<float>& weight = p.constants.at(step.weight);
  // W as PyTorch stores it, [out][in], and the bias, each on 256 bytes (cuBLASLt's preferred
  // alignment; the fallback GEMM reads the same layout).
  const auto alignment = static_cast<size_t>(kSlotAlignment);
  ref.weight = add_floats(images->floats, weight, alignment);
  if (step.bias >= 0) ref.bias = add_floats(images->floats, p.constants.at(step.bias), alignment);
  if (in.cublaslt_half_operands) {
    linear_ref.half_weight = add_half(images->half, weight, in.half_format);
    // For writing the model output in 16 bits where cuBLASLt takes no fp32 bias then.
    if (step.bias >= 0 && p.values[step.output].storage == Storage::ModelOutput) {
      linear_ref.half_bias = add_half(images->half, p.constants.at(step.bias), in.half_format);
    }
  }
  linear_ref.activation = cublaslt_activation(step.epilogue);
  op.epilogue = split_cublaslt_epilogue(step.epilogue, cublaslt_fused_ops(linear_ref.activation));
  if (in.cublaslt_half_operands) {
    op.load_reason += std::string(" reading W and x in ") +
                      (in.half_format == HalfFormat::Binary16 ? "fp16" : "bf16") +
                      " (x narrowed into the workspace first, or a model input of that type "
                      "read as it is)";
  }
  if (in.precision == Precision::FP32) {
    plan_small_batch_linear(as_int32(step.in_features, step, "in_features"),
                            as_int32(step.out_features, step, "out_features"), in.device,
                            in.device.overrides.small_batch_linear, &linear.small_batch);
    op.load_reason += linear.small_batch.planned()
                          ? "; the small-batch kernel for 1 to " +
                                std::to_string(kSmallBatchLinearMaxRows) +
                                " rows, where its estimate beats cuBLASLt for this shape"
                          : std::string(
                                "; no small-batch kernel (it needs compute capability 9.0, and "
                                "its estimate must beat cuBLASLt for this shape)");
  }
  // With 16-bit operands cuBLASLt reads the narrowed copy, and the narrowing kernel reads the
  // model input.
  const bool lt_reads_input =
      !in.cublaslt_half_operands && p.values[step.inputs.front()].storage == Storage::ModelInput;
  lowered->cublaslt_touches_model_io =
      lt_reads_input || p.values[step.output].storage == Storage::ModelOutput;
}

// The selection table's view of the lone Linear step s.
LoneLinearProblem lone_linear_problem(const LoweringInput& in, size_t s) {
  const Plan& p = *in.plan;
  const Step& step = p.steps[s];
  LoneLinearProblem problem;
  problem.in = step.in_features;
  problem.out = step.out_features;
  problem.precision = in.precision;
  if (s > 0 && s + 1 == p.steps.size() && step.rows_per_sample == 1 && step.inputs.size() == 1) {
    const Step& before = p.steps[s - 1];
    const bool windowed = before.kind == StepKind::Conv2d || before.kind == StepKind::MaxPool2d ||
                          before.kind == StepKind::AvgPool2d;
    problem.heads_conv_stack = windowed && before.output == step.inputs.front();
  }
  return problem;
}

// Linear steps: the longest chain from step s that the fused MLP kernel holds (a lone layer only
// where the selection table prefers the fused kernel for it), else a lone layer on cuBLASLt.
void lower_linear(const LoweringInput& in, size_t s, HostImages* images, LoweredOp* lowered) {
  const Plan& p = *in.plan;
  const Step& step = p.steps[s];
  std::vector<size_t> chain = linear_chain(p, s, in.consumers);
  LoneLinearChoice lone;
  FusedMlpPlan mlp;
  bool fused = false;
  while (!chain.empty() && step.weight >= 0) {
    if (chain.size() == 1) {
      lone = choose_lone_linear_form(lone_linear_problem(in, s), in.device);
      if (lone.form == LoneLinearForm::CublasLt) break;
    }
    if (plan_fused_mlp(chain_layers(p, chain), in.max_batch * step.rows_per_sample, in.device,
                       &mlp)) {
      fused = true;
      break;
    }
    chain.pop_back();
  }
  FDNN_LOAD_STAMP("backend: fused MLP planned");
  if (fused) {
    lower_fused_chain(in, chain, lone, std::move(mlp), images, lowered);
  } else {
    lower_cublaslt_linear(in, s, lone, lone.form == LoneLinearForm::CublasLt, images, lowered);
  }
}

// ---- Conv2d ----

// A Conv2d step (with the pooling after it where the fused kernel takes both): the fused conv
// kernel, an implicit GEMM on tensor cores or the direct kernel, as the table's rules say.
void lower_conv2d(const LoweringInput& in, size_t s, HostImages* images, LoweredOp* lowered) {
  const Plan& p = *in.plan;
  const Step& step = p.steps[s];
  Op& op = lowered->op;
  OpRefs& ref = lowered->refs;
  const std::vector<float>& weight = p.constants.at(step.weight);
  // The implicit GEMM's plan, made ready (its module loaded) only where it may run.
  const Conv2dArgs geometry = conv2d_geometry(step.window);
  const ConvFormRules rules = choose_conv_form(conv_problem(geometry, in.precision), in.device);
  ConvGemmPlan gemm;
  auto ready_gemm = [&] {
    return rules.implicit_gemm_allowed &&
           plan_conv_gemm(geometry, tensor_core_math(in.precision), in.device, &gemm) &&
           prepare_conv2d_implicit_gemm(gemm, in.device);
  };
  bool gemm_ready = rules.prefer_implicit_gemm && ready_gemm();
  if (rules.fused_conv_allowed && !gemm_ready &&
      plan_fused_conv(p, s, in.consumers, in.device, &op)) {
    op.load_reason = op.last_step > static_cast<int>(s)
                         ? "the fused conv + pool kernel takes the layer and the pooling after "
                           "it (its only reader, windows equal to the stride, 1 or 2)"
                         : "the fused conv kernel takes the layer (no pooling after it that it "
                           "can take)";
    if (in.precision != Precision::FP32) {
      op.load_reason += "; in fp32: fewer than " + std::to_string(kConvGemmMinGroupOutChannels) +
                        " output channels a group or dot products shorter than " +
                        std::to_string(kConvGemmMinDotLength) + " would not fill tensor-core tiles";
    }
    ref.weight =
        add_floats(images->floats, build_conv_pool_weights(op.as<ConvPoolOp>()->conv_pool, weight));
    if (step.bias >= 0) ref.bias = add_floats(images->floats, p.constants.at(step.bias));
    return;
  }
  op.kind = OpKind::Conv2d;
  Conv2dOp& conv = op.payload.emplace<Conv2dOp>();
  if (step.bias >= 0) ref.bias = add_floats(images->floats, p.constants.at(step.bias));
  if (!rules.prefer_implicit_gemm) gemm_ready = ready_gemm();
  if (gemm_ready) {
    op.load_reason = rules.reason;
    conv.conv_gemm = gemm;
    lowered->runs_reduced_precision = in.precision != Precision::FP32;
    ref.of_kind = ConvGemmRefs{add_image(
        images->tensor_core, build_conv_gemm_image(conv.conv_gemm, geometry, weight.data()))};
    return;
  }
  ref.weight = add_floats(images->floats, weight);
  op.load_reason = rules.fused_conv_allowed
                       ? "the direct kernel (conv2d.cu): the fused conv kernel does not take "
                         "this geometry"
                       : "the direct kernel (conv2d.cu): the fused conv kernel is off (override "
                         "fused_conv=0)";
}

// ---- The steps with one kernel each ----

void lower_pool(const Step& step, LoweredOp* lowered) {
  lowered->op.kind = step.kind == StepKind::MaxPool2d ? OpKind::MaxPool2d : OpKind::AvgPool2d;
}

void lower_elementwise(LoweredOp* lowered) { lowered->op.kind = OpKind::Elementwise; }

// ChannelAffine (an inference BatchNorm): its scale and shift in the weight image.
void lower_channel_affine(const Plan& p, const Step& step, HostImages* images, LoweredOp* lowered) {
  lowered->op.kind = OpKind::ChannelAffine;
  lowered->op.payload = ChannelAffineOp();
  lowered->refs.weight = add_floats(images->floats, p.constants.at(step.weight));
  lowered->refs.bias = add_floats(images->floats, p.constants.at(step.bias));
}

// LayerNorm: gamma and beta, where the step has them, in the weight image.
void lower_layer_norm(const Plan& p, const Step& step, HostImages* images, LoweredOp* lowered) {
  lowered->op.kind = OpKind::LayerNorm;
  lowered->op.payload = LayerNormOp();
  if (step.weight >= 0)
    lowered->refs.weight = add_floats(images->floats, p.constants.at(step.weight));
  if (step.bias >= 0) lowered->refs.bias = add_floats(images->floats, p.constants.at(step.bias));
}

void lower_softmax(LoweredOp* lowered) { lowered->op.kind = OpKind::Softmax; }
void lower_add(LoweredOp* lowered) { lowered->op.kind = OpKind::Add; }
void lower_concat(LoweredOp* lowered) { lowered->op.kind = OpKind::Concat; }
void lower_copy(LoweredOp* lowered) { lowered->op.kind = OpKind::Copy; }

}  // namespace

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

Conv2dArgs conv2d_geometry(const WindowGeometry& w) {
  Conv2dArgs args;
  set_conv_window(w, &args);
  args.out_height = static_cast<int32_t>(w.out_height);
  args.out_width = static_cast<int32_t>(w.out_width);
  return args;
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

LoweringInput make_lowering_input(const Plan& plan, const DeviceInfo& device, Precision precision,
                                  int64_t max_batch) {
  LoweringInput input;
  input.plan = &plan;
  input.consumers.assign(plan.values.size(), 0);
  for (const Step& step : plan.steps) {
    for (int value : step.inputs) ++input.consumers[value];
  }
  input.device = device;
  input.precision = precision;
  input.max_batch = max_batch;
  input.cublaslt_half_operands =
      cublaslt_allowed(device.overrides) && cublaslt_half_operands(precision, device);
  if (input.cublaslt_half_operands) {
    input.half_format = precision == Precision::FP16 ? HalfFormat::Binary16 : HalfFormat::Bfloat16;
  }
  return input;
}

LoweredOp lower_step(const LoweringInput& input, size_t s, HostImages* images) {
  const Plan& p = *input.plan;
  const Step& step = p.steps[s];
  LoweredOp lowered;
  lowered.op.first_step = lowered.op.last_step = static_cast<int>(s);
  lowered.op.epilogue = split_epilogue(step.epilogue);
  switch (step.kind) {
    case StepKind::Linear: lower_linear(input, s, images, &lowered); break;
    case StepKind::Conv2d: lower_conv2d(input, s, images, &lowered); break;
    case StepKind::MaxPool2d:
    case StepKind::AvgPool2d: lower_pool(step, &lowered); break;
    case StepKind::Elementwise: lower_elementwise(&lowered); break;
    case StepKind::ChannelAffine: lower_channel_affine(p, step, images, &lowered); break;
    case StepKind::LayerNorm: lower_layer_norm(p, step, images, &lowered); break;
    case StepKind::Softmax: lower_softmax(&lowered); break;
    case StepKind::Add: lower_add(&lowered); break;
    case StepKind::Concat: lower_concat(&lowered); break;
    case StepKind::Copy: lower_copy(&lowered); break;
  }
  if (!lowered.op.payload_fits_kind()) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "step '", step.label, "' was lowered to an op whose plan is ",
         "not its kind's");
  }
  return lowered;
}

}  // namespace fusednn::cuda
