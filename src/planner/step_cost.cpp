// SPDX-License-Identifier: Apache-2.0

#include "planner/step_cost.hpp"

#include <set>

namespace fusednn {

double step_flops_per_sample(const Plan& plan, const Step& step) {
  const WindowGeometry& w = step.window;
  const auto output_elements = static_cast<double>(plan.values[step.output].elements);
  const double epilogue = output_elements * static_cast<double>(step.epilogue.size());
  switch (step.kind) {
    case StepKind::Linear:
      return 2.0 * double(step.rows_per_sample) * double(step.in_features) *
                 double(step.out_features) +
             epilogue;
    case StepKind::Conv2d: {
      const double per_output = double(w.in_channels / (w.groups > 0 ? w.groups : 1)) *
                                double(w.kernel[0]) * double(w.kernel[1]);
      return 2.0 * output_elements * per_output + epilogue;
    }
    case StepKind::MaxPool2d:
    case StepKind::AvgPool2d:
      return output_elements * double(w.kernel[0]) * double(w.kernel[1]) + epilogue;
    case StepKind::Elementwise: return epilogue;
    case StepKind::ChannelAffine: return 2.0 * output_elements + epilogue;
    case StepKind::LayerNorm: return 5.0 * output_elements + epilogue;
    case StepKind::Softmax: return 4.0 * output_elements + epilogue;
    case StepKind::Add: {
      const double extra_inputs = step.inputs.empty() ? 0.0 : double(step.inputs.size() - 1);
      return extra_inputs * output_elements + epilogue;
    }
    case StepKind::Concat:
    case StepKind::Copy: return epilogue;
  }
  return 0.0;
}

RangeTraffic range_traffic(const Plan& plan, int first_step, int last_step) {
  RangeTraffic traffic;
  std::set<int> made_inside, read;
  for (int s = first_step; s <= last_step; ++s) {
    const Step& step = plan.steps[static_cast<size_t>(s)];
    for (int input : step.inputs) {
      if (made_inside.count(input) == 0) read.insert(input);
    }
    made_inside.insert(step.output);
    for (int constant : {step.weight, step.bias}) {
      if (constant >= 0) {
        traffic.weight_bytes += static_cast<int64_t>(
            plan.constants[static_cast<size_t>(constant)].size() * sizeof(float));
      }
    }
  }
  int64_t floats = plan.values[plan.steps[static_cast<size_t>(last_step)].output].elements;
  for (int value : read) floats += plan.values[static_cast<size_t>(value)].elements;
  traffic.activation_bytes_per_sample = floats * static_cast<int64_t>(sizeof(float));
  return traffic;
}

}  // namespace fusednn
