// SPDX-License-Identifier: Apache-2.0

#include "planner/planner.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/checked_math.hpp"
#include "common/error.hpp"

namespace fusednn {

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::Linear: return "Linear";
    case StepKind::Conv2d: return "Conv2d";
    case StepKind::MaxPool2d: return "MaxPool2d";
    case StepKind::AvgPool2d: return "AvgPool2d";
    case StepKind::Elementwise: return "Elementwise";
    case StepKind::ChannelAffine: return "ChannelAffine";
    case StepKind::LayerNorm: return "LayerNorm";
    case StepKind::Softmax: return "Softmax";
    case StepKind::Add: return "Add";
    case StepKind::Concat: return "Concat";
    case StepKind::Copy: return "Copy";
  }
  return "?";
}

size_t Plan::constant_bytes() const {
  size_t bytes = 0;
  for (const auto& constant : constants) bytes += constant.size() * sizeof(float);
  return bytes;
}

namespace {

int64_t product(Shape::const_iterator begin, Shape::const_iterator end) {
  int64_t result = 1;
  for (auto it = begin; it != end; ++it) {
    result = checked_multiply(result, *it, FDNN_STATUS_INVALID_MODEL, "a shape's element count");
  }
  return result;
}

std::optional<ElementwiseOp> as_elementwise(const Layer& layer) {
  const LayerAttributes& a = layer.attributes;
  switch (layer.kind) {
    case LayerKind::ReLU: return ElementwiseOp{ElementwiseKind::ReLU};
    case LayerKind::LeakyReLU: return ElementwiseOp{ElementwiseKind::LeakyReLU, a.negative_slope};
    case LayerKind::GELU:
      return ElementwiseOp{a.gelu_tanh ? ElementwiseKind::GeluTanh : ElementwiseKind::GeluErf};
    case LayerKind::SiLU: return ElementwiseOp{ElementwiseKind::SiLU};
    case LayerKind::Sigmoid: return ElementwiseOp{ElementwiseKind::Sigmoid};
    case LayerKind::Tanh: return ElementwiseOp{ElementwiseKind::Tanh};
    case LayerKind::Scale: return ElementwiseOp{ElementwiseKind::Scale, a.alpha};
    default: return std::nullopt;
  }
}

bool accepts_epilogue(StepKind kind) {
  switch (kind) {
    case StepKind::Linear:
    case StepKind::Conv2d:
    case StepKind::Elementwise:
    case StepKind::ChannelAffine:
    case StepKind::LayerNorm:
    case StepKind::Add: return true;
    default: return false;
  }
}

class PlanBuilder {
 public:
  PlanBuilder(const Graph& graph, const WeightStore& weights) : graph_(graph), weights_(weights) {}

  Plan build() {
    plan_.input_shape = graph_.input_shape;
    plan_.output_shape = graph_.output_shape();
    plan_.values.push_back(Value{element_count(graph_.input_shape), Storage::ModelInput, 0});
    mark_live_layers();
    count_consumers();

    value_of_layer_.assign(graph_.layers.size(), -1);
    step_of_value_.assign(1, -1);
    for (size_t i = 0; i < graph_.layers.size(); ++i) {
      if (live_[i]) value_of_layer_[i] = lower(static_cast<int>(i));
    }
    bind_output();
    assign_workspace();
    return std::move(plan_);
  }

 private:
  // Layers that do not feed the output are dropped, so they cost neither time nor memory.
  void mark_live_layers() {
    live_.assign(graph_.layers.size(), false);
    std::vector<int> pending{graph_.output};
    while (!pending.empty()) {
      const int index = pending.back();
      pending.pop_back();
      if (index == kGraphInput || live_[index]) continue;
      live_[index] = true;
      for (int input : graph_.layers[index].inputs) pending.push_back(input);
    }
  }

  // Flatten is only a change of shape: its consumers are counted against the layer it reads.
  int data_source(int layer) const {
    while (layer != kGraphInput && graph_.layers[layer].kind == LayerKind::Flatten) {
      layer = graph_.layers[layer].inputs.front();
    }
    return layer;
  }

  void count_consumers() {
    consumers_.assign(graph_.layers.size(), 0);
    for (size_t i = 0; i < graph_.layers.size(); ++i) {
      if (!live_[i] || graph_.layers[i].kind == LayerKind::Flatten) continue;
      for (int input : graph_.layers[i].inputs) {
        const int source = data_source(input);
        if (source != kGraphInput) ++consumers_[source];
      }
    }
    const int output_source = data_source(graph_.output);
    if (output_source != kGraphInput) ++consumers_[output_source];
  }

  int input_value(const Layer& layer, size_t position = 0) const {
    const int producer = layer.inputs.at(position);
    return producer == kGraphInput ? 0 : value_of_layer_[producer];
  }

  int new_value(int64_t elements) {
    plan_.values.push_back(Value{elements, Storage::Workspace, 0});
    step_of_value_.push_back(-1);
    return static_cast<int>(plan_.values.size()) - 1;
  }

  int add_step(Step step, const Layer& layer) {
    step.label = layer.name;
    step.output = new_value(element_count(layer.output_shape));
    step_of_value_[step.output] = static_cast<int>(plan_.steps.size());
    plan_.steps.push_back(std::move(step));
    return plan_.steps.back().output;
  }

  // The named weight's values, zeros while it is not loaded, empty when the layer has none.
  std::vector<float> weight_values(const Layer& layer, const std::string& role) const {
    for (const WeightSlot& slot : layer.weights) {
      if (slot.role != role) continue;
      if (weights_.has(slot.tensor_name)) return weights_.values(slot.tensor_name);
      return std::vector<float>(element_count(slot.shape), 0.0f);
    }
    return {};
  }

  int add_constant(std::vector<float> values) {
    if (values.empty()) return -1;
    plan_.constants.push_back(std::move(values));
    return static_cast<int>(plan_.constants.size()) - 1;
  }

  int constant_for(const Layer& layer, const std::string& role) {
    return add_constant(weight_values(layer, role));
  }

  // The BatchNorm as y = x * scale + shift per channel.
  void batchnorm_affine(const Layer& layer, std::vector<float>& scale, std::vector<float>& shift) {
    const int64_t channels = layer.attributes.num_features;
    const std::vector<float> mean = weight_values(layer, "running_mean");
    const std::vector<float> var = weight_values(layer, "running_var");
    const std::vector<float> gamma = weight_values(layer, "weight");
    const std::vector<float> beta = weight_values(layer, "bias");
    scale.assign(channels, 1.0f);
    shift.assign(channels, 0.0f);
    for (int64_t c = 0; c < channels; ++c) {
      // Folded in double so that the folded weights are rounded once.
      const double inv_std = 1.0 / std::sqrt(double(var[c]) + double(layer.attributes.eps));
      const double g = gamma.empty() ? 1.0 : gamma[c];
      const double b = beta.empty() ? 0.0 : beta[c];
      scale[c] = float(g * inv_std);
      shift[c] = float(b - double(mean[c]) * g * inv_std);
    }
  }

  // BatchNorm directly after a Linear (1-D output) or Conv2d that nothing else reads folds into
  // that step's weights: w' = w * scale[o], b' = b * scale[o] + shift[o].
  bool try_fold_batchnorm(const Layer& layer, const std::vector<float>& scale,
                          const std::vector<float>& shift) {
    const int producer = layer.inputs.front();
    if (producer == kGraphInput || consumers_[producer] != 1) return false;
    const Layer& source = graph_.layers[producer];
    const bool linear_1d = source.kind == LayerKind::Linear && source.output_shape.size() == 1;
    if (!linear_1d && source.kind != LayerKind::Conv2d) return false;
    Step& step = plan_.steps[step_of_value_[value_of_layer_[producer]]];
    if (!step.epilogue.empty()) return false;

    const int64_t channels = static_cast<int64_t>(scale.size());
    std::vector<float>& weight = plan_.constants[step.weight];
    const int64_t per_channel = static_cast<int64_t>(weight.size()) / channels;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t k = 0; k < per_channel; ++k) weight[c * per_channel + k] *= scale[c];
    }
    if (step.bias < 0) {
      plan_.constants.emplace_back(channels, 0.0f);
      step.bias = static_cast<int>(plan_.constants.size()) - 1;
    }
    std::vector<float>& bias = plan_.constants[step.bias];
    for (int64_t c = 0; c < channels; ++c) bias[c] = bias[c] * scale[c] + shift[c];
    step.label += "+" + layer.name;
    return true;
  }

  // An activation or Scale whose input only it reads joins the producing step's epilogue.
  bool try_fuse_elementwise(const Layer& layer, const ElementwiseOp& op) {
    const int source = data_source(layer.inputs.front());
    if (source == kGraphInput || consumers_[source] != 1) return false;
    const int producer_step = step_of_value_[value_of_layer_[source]];
    if (producer_step < 0) return false;
    Step& step = plan_.steps[producer_step];
    if (!accepts_epilogue(step.kind)) return false;
    step.epilogue.push_back(op);
    step.label += "+" + layer.name;
    return true;
  }

  static WindowGeometry window_of(const Layer& layer, const Shape& in) {
    const LayerAttributes& a = layer.attributes;
    WindowGeometry g;
    g.in_channels = in[0];
    g.in_height = in[1];
    g.in_width = in[2];
    g.out_channels = layer.output_shape[0];
    g.out_height = layer.output_shape[1];
    g.out_width = layer.output_shape[2];
    for (int d = 0; d < 2; ++d) {
      g.kernel[d] = a.kernel_size[d];
      g.stride[d] = a.stride[d];
      g.padding[d] = a.padding[d];
      g.dilation[d] = a.dilation[d];
    }
    g.groups = a.groups;
    g.count_include_pad = a.count_include_pad;
    return g;
  }

  // Emits the step(s) for one live layer and returns the value holding its output.
  int lower(int index) {
    const Layer& layer = graph_.layers[index];
    const Shape& in = graph_.shape_of(layer.inputs.front());
    Step step;
    switch (layer.kind) {
      case LayerKind::Flatten: return input_value(layer);
      case LayerKind::Linear:
        step.kind = StepKind::Linear;
        step.rows_per_sample = product(in.begin(), in.end() - 1);
        step.in_features = layer.attributes.in_features;
        step.out_features = layer.attributes.out_features;
        step.weight = constant_for(layer, "weight");
        step.bias = constant_for(layer, "bias");
        break;
      case LayerKind::Conv2d:
        step.kind = StepKind::Conv2d;
        step.window = window_of(layer, in);
        step.weight = constant_for(layer, "weight");
        step.bias = constant_for(layer, "bias");
        break;
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
        step.kind = layer.kind == LayerKind::MaxPool2d ? StepKind::MaxPool2d : StepKind::AvgPool2d;
        step.window = window_of(layer, in);
        break;
      case LayerKind::BatchNorm: {
        std::vector<float> scale, shift;
        batchnorm_affine(layer, scale, shift);
        if (try_fold_batchnorm(layer, scale, shift)) {
          return value_of_layer_[layer.inputs.front()];
        }
        step.kind = StepKind::ChannelAffine;
        step.in_features = in[0];
        step.out_features = element_count(in) / in[0];
        step.weight = add_constant(std::move(scale));
        step.bias = add_constant(std::move(shift));
        break;
      }
      case LayerKind::LayerNorm: {
        const int64_t row = element_count(layer.attributes.normalized_shape);
        step.kind = StepKind::LayerNorm;
        step.in_features = row;
        step.rows_per_sample = element_count(in) / row;
        step.eps = layer.attributes.eps;
        step.weight = constant_for(layer, "weight");
        step.bias = constant_for(layer, "bias");
        break;
      }
      case LayerKind::Softmax:
        step.kind = StepKind::Softmax;
        step.in_features = in.back();
        step.rows_per_sample = element_count(in) / in.back();
        break;
      case LayerKind::Add: step.kind = StepKind::Add; break;
      case LayerKind::Concat: {
        const int64_t axis = layer.attributes.axis;
        step.kind = StepKind::Concat;
        step.rows_per_sample = product(in.begin(), in.begin() + axis);
        for (int producer : layer.inputs) {
          const Shape& shape = graph_.shape_of(producer);
          step.concat_inner.push_back(product(shape.begin() + axis, shape.end()));
        }
        break;
      }
      default: {
        const ElementwiseOp op = *as_elementwise(layer);
        if (try_fuse_elementwise(layer, op)) return value_of_layer_[data_source(layer.inputs[0])];
        step.kind = StepKind::Elementwise;
        step.epilogue.push_back(op);
        break;
      }
    }
    for (size_t position = 0; position < layer.inputs.size(); ++position) {
      step.inputs.push_back(input_value(layer, position));
    }
    return add_step(std::move(step), layer);
  }

  // The output value is written straight into the caller's buffer; a model whose output is its
  // input (only Flatten layers) gets one Copy step.
  void bind_output() {
    int output = value_of_layer_[graph_.output];
    if (data_source(graph_.output) == kGraphInput) output = 0;
    if (output == 0) {
      Step copy;
      copy.kind = StepKind::Copy;
      copy.label = "output";
      copy.inputs = {0};
      copy.output = new_value(plan_.values[0].elements);
      plan_.steps.push_back(std::move(copy));
      output = plan_.steps.back().output;
    }
    plan_.output_value = output;
    plan_.values[output].storage = Storage::ModelOutput;
  }

  // Greedy slot reuse: a value takes a free slot (growing it if needed) at the step that writes
  // it and gives it back after its last reader, so the workspace is the peak of live values.
  void assign_workspace() {
    std::vector<int> last_use(plan_.values.size(), -1);
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      for (int value : plan_.steps[s].inputs) last_use[value] = static_cast<int>(s);
    }
    std::vector<int64_t> slot_size;
    std::vector<int> slot_of(plan_.values.size(), -1);
    std::vector<int> free_slots;
    for (size_t s = 0; s < plan_.steps.size(); ++s) {
      const int output = plan_.steps[s].output;
      Value& value = plan_.values[output];
      if (value.storage == Storage::Workspace) {
        int slot;
        if (free_slots.empty()) {
          slot = static_cast<int>(slot_size.size());
          slot_size.push_back(0);
        } else {
          // Prefer the smallest free slot that fits, else the largest (which then grows).
          auto best = free_slots.end();
          for (auto it = free_slots.begin(); it != free_slots.end(); ++it) {
            const bool fits = slot_size[*it] >= value.elements;
            if (best == free_slots.end()) {
              best = it;
            } else if (fits &&
                       (slot_size[*best] < value.elements || slot_size[*it] < slot_size[*best])) {
              best = it;
            } else if (!fits && slot_size[*best] < value.elements &&
                       slot_size[*it] > slot_size[*best]) {
              best = it;
            }
          }
          slot = *best;
          free_slots.erase(best);
        }
        slot_size[slot] = std::max(slot_size[slot], value.elements);
        slot_of[output] = slot;
      }
      for (int input : plan_.steps[s].inputs) {
        if (last_use[input] == static_cast<int>(s) && slot_of[input] >= 0 &&
            std::find(free_slots.begin(), free_slots.end(), slot_of[input]) == free_slots.end()) {
          free_slots.push_back(slot_of[input]);
        }
      }
    }
    std::vector<int64_t> slot_offset(slot_size.size(), 0);
    int64_t total = 0;
    for (size_t slot = 0; slot < slot_size.size(); ++slot) {
      slot_offset[slot] = total;
      total = checked_add(total, slot_size[slot], FDNN_STATUS_INVALID_MODEL,
                          "the workspace floats per sample of model '", graph_.name, "'");
    }
    for (size_t value = 0; value < plan_.values.size(); ++value) {
      if (slot_of[value] < 0) continue;
      plan_.values[value].workspace_offset = slot_offset[slot_of[value]];
      plan_.values[value].slot_floats = slot_size[slot_of[value]];
    }
    plan_.workspace_floats_per_sample = total;
  }

  const Graph& graph_;
  const WeightStore& weights_;
  Plan plan_;
  std::vector<bool> live_;
  std::vector<int> consumers_;
  std::vector<int> value_of_layer_;
  std::vector<int> step_of_value_;
};

}  // namespace

Plan build_plan(const Graph& graph, const WeightStore& weights) {
  return PlanBuilder(graph, weights).build();
}

}  // namespace fusednn
