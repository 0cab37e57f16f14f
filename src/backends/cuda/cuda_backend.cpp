// The CUDA backend: lowers a plan to ops (chains of Linear steps become one fused MLP launch),
// uploads every weight once in one allocation, in the layout its kernel reads, and queues a run
// as a sequence of launches on one stream.
#include "backends/cuda/cuda_backend.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <string>

#include "backends/cuda/channel_affine.hpp"
#include "backends/cuda/concat.hpp"
#include "backends/cuda/conv2d.hpp"
#include "backends/cuda/cuda_context.hpp"
#include "backends/cuda/cuda_executor.hpp"
#include "backends/cuda/elementwise.hpp"
#include "backends/cuda/layer_norm.hpp"
#include "backends/cuda/linear.hpp"
#include "backends/cuda/pool2d.hpp"
#include "backends/cuda/softmax.hpp"
#include "common/elementwise_op.hpp"
#include "common/error.hpp"

namespace fusednn {
namespace cuda {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);
constexpr int64_t kSlotAlignment = 64;  // floats: every workspace slot starts on 256 bytes

// The host image of the device weights; every tensor starts on a 16-byte boundary.
class WeightBlob {
 public:
  size_t reserve(size_t count) {
    floats_.resize((floats_.size() + 3) / 4 * 4, 0.0f);
    const size_t offset = floats_.size();
    floats_.resize(offset + count, 0.0f);
    return offset;
  }
  size_t add(const std::vector<float>& values) {
    const size_t offset = reserve(values.size());
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

int launches_for(const Op& op, const Step& step) {
  const int passes = static_cast<int>(op.epilogue.size()) - 1;
  switch (op.kind) {
    case OpKind::Add: {
      const int n = static_cast<int>(step.inputs.size());
      const int extra = n > kMaxAddInputs ? (n - kMaxAddInputs + kMaxAddInputs - 2) / (kMaxAddInputs - 1) : 0;
      return 1 + extra + passes;
    }
    case OpKind::Concat:
      return static_cast<int>(step.inputs.size());
    default:
      return 1 + std::max(passes, 0);
  }
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const Plan> plan, int64_t max_batch, int device_ordinal,
                         bool cuda_graphs, Precision precision)
    : plan_(std::move(plan)), max_batch_(max_batch), cuda_graphs_(cuda_graphs),
      precision_(precision) {
  const std::string reason = cuda_unavailable_reason(device_ordinal);
  if (!reason.empty()) fail(FDNN_STATUS_UNSUPPORTED, "cannot create the CUDA backend: ", reason);
  DeviceScope scope(device_ordinal);
  device_.ordinal = device_ordinal;
  int value = 0;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, device_ordinal));
  device_.major = value;
  FDNN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device_ordinal));
  device_.sm_count = std::max(1, value);
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_ordinal));
  device_.shared_per_block_optin = static_cast<size_t>(value);
  FDNN_CUDA_CHECK(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device_ordinal));
  device_.shared_per_sm = static_cast<size_t>(value);
  prepare_fused_mlp_kernels(device_);

  WeightBlob blob;
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
              candidate.epilogue.size() > static_cast<size_t>(kMaxEpilogueOps) ||
              last.weight < 0 || candidate.weight < 0) {
            break;
          }
          chain.push_back(next);
        }
        // The fused kernel if some prefix of the chain fits on chip, else the tiled GEMM.
        bool fused = false;
        while (!chain.empty() && step.weight >= 0) {
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
          if (plan_fused_mlp(layers, device_, &op.mlp)) {
            fused = true;
            break;
          }
          chain.pop_back();
        }
        if (fused) {
          op.kind = OpKind::FusedMlp;
          op.last_step = static_cast<int>(chain.back());
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
        } else {
          op.kind = OpKind::Linear;
          as_int32(step.in_features, step, "in_features");
          as_int32(step.out_features, step, "out_features");
          if (step.weight < 0) fail(FDNN_STATUS_INTERNAL_ERROR, "Linear step '", step.label, "' has no weight");
          ref.weight = add_transposed(blob, constant(step.weight), step.in_features,
                                      step.out_features, step.out_features);
          if (step.bias >= 0) ref.bias = blob.add(constant(step.bias));
        }
        break;
      }
      case StepKind::Conv2d:
        op.kind = OpKind::Conv2d;
        ref.weight = blob.add(constant(step.weight));
        if (step.bias >= 0) ref.bias = blob.add(constant(step.bias));
        break;
      case StepKind::MaxPool2d:
        op.kind = OpKind::MaxPool2d;
        break;
      case StepKind::AvgPool2d:
        op.kind = OpKind::AvgPool2d;
        break;
      case StepKind::Elementwise:
        op.kind = OpKind::Elementwise;
        break;
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
      case StepKind::Softmax:
        op.kind = OpKind::Softmax;
        break;
      case StepKind::Add:
        op.kind = OpKind::Add;
        break;
      case StepKind::Concat:
        op.kind = OpKind::Concat;
        break;
      case StepKind::Copy:
        op.kind = OpKind::Copy;
        break;
    }
    launches_per_run_ += launches_for(op, step);
    ops_.push_back(std::move(op));
    refs.push_back(std::move(ref));
    s = static_cast<size_t>(ops_.back().last_step) + 1;
  }

  // One allocation and one copy for every weight; then the ops get their pointers.
  std::vector<float>& floats = blob.floats();
  weights_ = DeviceArray<float>(floats.size());
  if (!floats.empty()) {
    FDNN_CUDA_CHECK(cudaMemcpy(weights_.data(), floats.data(), floats.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  }
  const float* base = weights_.data();
  auto pointer = [&](size_t offset) -> const float* {
    return offset == kNone ? nullptr : base + offset;
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    op.weight = pointer(refs[i].weight);
    op.bias = pointer(refs[i].bias);
    for (size_t l = 0; l < op.mlp.layers.size() && l < refs[i].layer_weight.size(); ++l) {
      op.mlp.layers[l].weight_t = pointer(refs[i].layer_weight[l]);
      op.mlp.layers[l].bias = pointer(refs[i].layer_bias[l]);
    }
  }
  assign_workspace();
}

CudaBackend::~CudaBackend() {
  int previous = 0;
  if (cudaGetDevice(&previous) == cudaSuccess && previous != device_.ordinal) {
    if (cudaSetDevice(device_.ordinal) == cudaSuccess) {
      weights_ = DeviceArray<float>();  // freed while the model's device is current
      cudaSetDevice(previous);
    }
  }
}

// Workspace slots as the planner assigned them (values sharing an offset share a slot), each
// starting on a 256-byte boundary so that vector loads apply.
void CudaBackend::assign_workspace() {
  const Plan& p = *plan_;
  std::map<int64_t, int64_t> slot_elements;  // plan offset -> most elements stored there
  for (const Value& value : p.values) {
    if (value.storage != Storage::Workspace) continue;
    int64_t& elements = slot_elements[value.workspace_offset];
    elements = std::max(elements, value.elements);
  }
  std::map<int64_t, int64_t> slot_start;
  int64_t end = 0;
  for (const auto& [offset, elements] : slot_elements) {
    const int64_t start = (end + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
    slot_start[offset] = start;
    end = start + elements * max_batch_;
  }
  workspace_floats_ = end;
  value_offset_.assign(p.values.size(), 0);
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (p.values[v].storage == Storage::Workspace) {
      value_offset_[v] = slot_start[p.values[v].workspace_offset];
    }
  }
}

size_t CudaBackend::context_bytes() const {
  // Device workspace and the host path's device buffers, plus as much pinned host staging.
  const size_t floats = static_cast<size_t>(workspace_floats_ + 2 * (input_floats() + output_floats()));
  return floats * sizeof(float);
}

std::unique_ptr<ExecutionContext> CudaBackend::create_context() const {
  return std::make_unique<CudaContext>(*this);
}

void CudaBackend::enqueue(int64_t batch, const float* input, float* output, float* workspace,
                          cudaStream_t stream) const {
  const Plan& p = *plan_;
  auto data = [&](int value_id) -> float* {
    switch (p.values[value_id].storage) {
      case Storage::ModelInput:
        return const_cast<float*>(input);  // only ever read
      case Storage::ModelOutput:
        return output;
      case Storage::Workspace:
        break;
    }
    return workspace + value_offset_[value_id];
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

  for (const Op& op : ops_) {
    const Step& step = p.steps[op.first_step];
    const Step& last = p.steps[op.last_step];
    const float* x = data(step.inputs.front());
    float* y = data(last.output);
    const int64_t count = batch * p.values[last.output].elements;
    const WindowGeometry& w = step.window;
    switch (op.kind) {
      case OpKind::FusedMlp:
        launch_fused_mlp(op.mlp, x, y, batch * step.rows_per_sample, device_, stream);
        break;
      case OpKind::Linear: {
        LinearArgs args;
        args.x = x;
        args.weight_t = op.weight;
        args.bias = op.bias;
        args.y = y;
        args.rows = batch * step.rows_per_sample;
        args.in = static_cast<int32_t>(step.in_features);
        args.out = static_cast<int32_t>(step.out_features);
        args.epilogue = op.epilogue.front();
        launch_linear(args, device_, stream);
        break;
      }
      case OpKind::Conv2d: {
        Conv2dArgs args;
        args.x = x;
        args.weight = op.weight;
        args.bias = op.bias;
        args.y = y;
        args.batch = batch;
        args.in_channels = static_cast<int32_t>(w.in_channels);
        args.in_height = static_cast<int32_t>(w.in_height);
        args.in_width = static_cast<int32_t>(w.in_width);
        args.out_channels = static_cast<int32_t>(w.out_channels);
        args.out_height = static_cast<int32_t>(w.out_height);
        args.out_width = static_cast<int32_t>(w.out_width);
        args.kernel_height = static_cast<int32_t>(w.kernel[0]);
        args.kernel_width = static_cast<int32_t>(w.kernel[1]);
        args.stride_height = static_cast<int32_t>(w.stride[0]);
        args.stride_width = static_cast<int32_t>(w.stride[1]);
        args.padding_height = static_cast<int32_t>(w.padding[0]);
        args.padding_width = static_cast<int32_t>(w.padding[1]);
        args.dilation_height = static_cast<int32_t>(w.dilation[0]);
        args.dilation_width = static_cast<int32_t>(w.dilation[1]);
        args.groups = static_cast<int32_t>(w.groups);
        args.epilogue = op.epilogue.front();
        launch_conv2d(args, device_, stream);
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
      case OpKind::LayerNorm: {
        LayerNormArgs args;
        args.x = x;
        args.gamma = op.weight;
        args.beta = op.bias;
        args.y = y;
        args.rows = batch * step.rows_per_sample;
        args.row_size = step.in_features;
        args.eps = step.eps;
        args.epilogue = op.epilogue.front();
        launch_layer_norm(args, device_, stream);
        break;
      }
      case OpKind::Softmax: {
        SoftmaxArgs args;
        args.x = x;
        args.y = y;
        args.rows = batch * step.rows_per_sample;
        args.row_size = step.in_features;
        launch_softmax(args, device_, stream);
        break;
      }
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
      return "options.device_id is " + std::to_string(device_id) + " but " +
             std::to_string(count) + " CUDA device(s) are visible";
    }
    return "";
  } catch (...) {
    return "out of host memory";
  }
}

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Plan> plan, int64_t max_batch,
                                           int device_id, bool cuda_graphs, Precision precision) {
  return std::make_unique<cuda::CudaBackend>(std::move(plan), max_batch, device_id, cuda_graphs,
                                             precision);
}

}  // namespace fusednn
