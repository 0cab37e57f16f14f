// SPDX-License-Identifier: Apache-2.0
// The executable form of a graph: a list of steps over numbered values, with BatchNorm folded,
// activations fused into the step that produces their input, and every intermediate value given
// a slot in one workspace. Backends run plans; they never see the graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/elementwise_op.hpp"
#include "common/shape.hpp"

namespace fusednn {

enum class StepKind {
  Linear,  // rows x in -> rows x out; constants: weight [out, in], bias [out] or none
  Conv2d,  // NCHW; constants: weight [out, in/groups, kh, kw], bias [out] or none
  MaxPool2d,
  AvgPool2d,
  Elementwise,    // epilogue only, one input
  ChannelAffine,  // unfolded BatchNorm; constants: scale [C], shift [C]
  LayerNorm,      // constants: gamma, beta [row_size] or none
  Softmax,        // last dimension
  Add,            // n inputs of one shape
  Concat,         // along `axis` of the per-sample shape
  Copy,           // the model's output is its input (an identity or Flatten-only model)
};

const char* step_kind_name(StepKind kind);

// Where a value lives while the plan runs.
enum class Storage { ModelInput, ModelOutput, Workspace };

// A workspace slot holds max_batch x slot_floats floats; values of different sizes share it
// over time. A run on samples [b0, b1) owns the slot's floats from b0 * slot_floats on and keeps
// its value contiguous there: workspace + workspace_offset * max_batch + b0 * slot_floats. So
// runs on disjoint sample ranges (threads) never touch each other's floats.
struct Value {
  int64_t elements = 0;  // per sample
  Storage storage = Storage::Workspace;
  int64_t workspace_offset = 0;  // slot start, in floats per sample of max_batch
  int64_t slot_floats = 0;       // the slot's size per sample (>= elements)
};

// Geometry for Conv2d and pooling steps; index 0 is height, 1 is width.
struct WindowGeometry {
  int64_t in_channels = 0, in_height = 0, in_width = 0;
  int64_t out_channels = 0, out_height = 0, out_width = 0;
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  int64_t groups = 1;
  bool count_include_pad = true;
};

struct Step {
  StepKind kind;
  std::string label;        // the spec layers it implements, for messages: "fc1+relu_1"
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  // Per-sample sizes; a backend multiplies by the batch. rows is the number of independent rows
  // per sample for Linear / LayerNorm / Softmax, and the outer block count for Concat.
  int64_t rows_per_sample = 1;
  int64_t in_features = 0;   // Linear in, LayerNorm/Softmax row size, ChannelAffine channels
  int64_t out_features = 0;  // Linear out, ChannelAffine spatial size
  WindowGeometry window;     // Conv2d, pooling
  float eps = 0.0f;          // LayerNorm
  std::vector<int64_t> concat_inner;  // Concat: per-input inner block size
  int weight = -1;                    // index into Plan::constants, or -1
  int bias = -1;                      // index into Plan::constants, or -1
  Epilogue epilogue;
};

struct Plan {
  std::vector<std::vector<float>> constants;  // folded weights, owned here
  std::vector<Value> values;                  // value 0 is the model input
  std::vector<Step> steps;
  int output_value = 0;
  Shape input_shape;                        // per sample
  Shape output_shape;                       // per sample
  int64_t workspace_floats_per_sample = 0;  // sum of all workspace slots

  size_t constant_bytes() const;
};

}  // namespace fusednn
