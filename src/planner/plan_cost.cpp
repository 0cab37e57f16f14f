#include "planner/plan_cost.hpp"

namespace fusednn {

// In double: the products of extents a file declares may pass int64_t, and an estimate needs no
// more than double's precision.
PlanCost plan_cost(const Plan& plan) {
  PlanCost cost;
  for (const Step& step : plan.steps) {
    const WindowGeometry& w = step.window;
    const double output_elements = static_cast<double>(plan.values[step.output].elements);
    switch (step.kind) {
      case StepKind::Linear:
        cost.flops_per_sample += 2.0 * static_cast<double>(step.rows_per_sample) *
                                 static_cast<double>(step.in_features) *
                                 static_cast<double>(step.out_features);
        break;
      case StepKind::Conv2d:
        cost.flops_per_sample += 2.0 * static_cast<double>(w.out_channels) *
                                 static_cast<double>(w.out_height) *
                                 static_cast<double>(w.out_width) *
                                 static_cast<double>(w.in_channels / w.groups) *
                                 static_cast<double>(w.kernel[0]) * static_cast<double>(w.kernel[1]);
        break;
      default:
        cost.flops_per_sample += 4.0 * output_elements;
        break;
    }
    double elements = output_elements;
    for (int input : step.inputs) elements += static_cast<double>(plan.values[input].elements);
    cost.bytes_per_sample += 4.0 * elements;
  }
  return cost;
}

}  // namespace fusednn
