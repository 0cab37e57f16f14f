// SPDX-License-Identifier: Apache-2.0
// The planner alone: build_plan() on small hand-built graphs, with the expected plan spelled out
// (steps, labels, epilogues, value storage, workspace offsets) and every folded constant worked
// out by hand in the test.
#include "planner/planner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/spec_parser.hpp"
#include "graph/weight_store.hpp"

namespace fusednn {
namespace {

// A version-1 spec with the given per-sample input shape, layers and output layer.
Graph parse(const std::string& input_shape, const std::string& layers, const std::string& output) {
  const std::string text = R"({"fusednn": 1, "name": "planner_test", "input": {"shape": )" +
                           input_shape + R"(}, "layers": [)" + layers + R"(], "output": ")" +
                           output + R"("})";
  return parse_model_spec(text, "planner_test.json");
}

// A store holding `tensors` (name -> values, in the shape the graph declares for the name).
WeightStore store_with(const Graph& graph,
                       const std::map<std::string, std::vector<float>>& tensors) {
  WeightStore store(graph);
  std::vector<NamedTensor> batch;
  for (const auto& [name, values] : tensors) {
    NamedTensor tensor;
    tensor.name = name;
    tensor.dtype = "F32";
    tensor.shape = store.expected_shape(name);
    tensor.values = values;
    tensor.source = "planner_test";
    batch.push_back(std::move(tensor));
  }
  store.accept(std::move(batch));
  return store;
}

std::vector<ElementwiseKind> epilogue_kinds(const Step& step) {
  std::vector<ElementwiseKind> kinds;
  for (const ElementwiseOp& op : step.epilogue) kinds.push_back(op.kind);
  return kinds;
}

const std::vector<float>& constant(const Plan& plan, int index) {
  EXPECT_GE(index, 0);
  return plan.constants.at(static_cast<size_t>(index));
}

// What every plan must satisfy, whatever the graph: each step reads values written earlier,
// each workspace value fits its slot and the slot lies inside the workspace, and two values that
// are live at the same time never share floats.
void expect_consistent_workspace(const Plan& plan) {
  const size_t count = plan.values.size();
  std::vector<int> written(count, -1), last_read(count, -1);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    for (int input : plan.steps[s].inputs) {
      ASSERT_TRUE(input == 0 || written[input] >= 0)
          << "step " << s << " reads value " << input << " before it is written";
      last_read[input] = static_cast<int>(s);
    }
    written[plan.steps[s].output] = static_cast<int>(s);
  }
  for (size_t v = 0; v < count; ++v) {
    const Value& value = plan.values[v];
    if (value.storage != Storage::Workspace) continue;
    EXPECT_GE(value.slot_floats, value.elements) << "value " << v;
    EXPECT_LE(value.workspace_offset + value.slot_floats, plan.workspace_floats_per_sample)
        << "value " << v;
    for (size_t w = v + 1; w < count; ++w) {
      const Value& other = plan.values[w];
      if (other.storage != Storage::Workspace) continue;
      // Live from the step that writes it to its last reader (its writer when nothing reads it).
      const int v_end = std::max(written[v], last_read[v]);
      const int w_end = std::max(written[w], last_read[w]);
      const bool live_together = written[v] <= w_end && written[w] <= v_end;
      const bool share_floats =
          value.workspace_offset < other.workspace_offset + other.slot_floats &&
          other.workspace_offset < value.workspace_offset + value.slot_floats;
      EXPECT_FALSE(live_together && share_floats) << "values " << v << " and " << w;
    }
  }
}

// ---- BatchNorm folding ----------------------------------------------------------------------

// BatchNorm with eps 1 and running_var {3, 15}: 1 / sqrt(var + eps) = {1/2, 1/4}, exact in float.
// scale = gamma / sqrt(var + eps) = {2 * 1/2, 0.5 * 1/4} = {1, 0.125}
// shift = beta - mean * scale     = {1 - 1 * 1, 0 - 2 * 0.125} = {0, -0.25}
TEST(PlannerBatchNorm, FoldsIntoTheLinearBefore) {
  const Graph graph = parse("[2]", R"(
      {"type": "Linear", "name": "fc", "in_features": 2, "out_features": 2},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 2, "eps": 1.0})",
                            "bn");
  const WeightStore weights = store_with(graph, {{"fc.weight", {1, 2, 3, 4}},
                                                 {"fc.bias", {0.5f, -1}},
                                                 {"bn.weight", {2, 0.5f}},
                                                 {"bn.bias", {1, 0}},
                                                 {"bn.running_mean", {1, 2}},
                                                 {"bn.running_var", {3, 15}}});
  const Plan plan = build_plan(graph, weights);

  ASSERT_EQ(plan.steps.size(), 1u);
  const Step& step = plan.steps[0];
  EXPECT_EQ(step.kind, StepKind::Linear);
  EXPECT_EQ(step.label, "fc+bn");
  EXPECT_EQ(step.inputs, std::vector<int>({0}));
  EXPECT_EQ(step.in_features, 2);
  EXPECT_EQ(step.out_features, 2);
  EXPECT_TRUE(step.epilogue.empty());
  // w'[o][k] = w[o][k] * scale[o]; b'[o] = b[o] * scale[o] + shift[o].
  EXPECT_EQ(constant(plan, step.weight), std::vector<float>({1, 2, 0.375f, 0.5f}));
  EXPECT_EQ(constant(plan, step.bias), std::vector<float>({0.5f, -0.375f}));

  EXPECT_EQ(plan.output_value, step.output);
  EXPECT_EQ(plan.values[step.output].storage, Storage::ModelOutput);
  EXPECT_EQ(plan.workspace_floats_per_sample, 0);
}

// The same fold into a Conv2d that has no bias: the plan adds one, equal to the shift.
// var {0, 3} + eps 1 -> 1 / sqrt = {1, 1/2}; scale = {3 * 1, 2 * 1/2} = {3, 1};
// shift = {1 - 2 * 3, -1 - 4 * 1} = {-5, -5}; weight {2, -1} -> {6, -1}.
TEST(PlannerBatchNorm, FoldsIntoTheConvolutionBeforeAndGivesItABias) {
  const Graph graph = parse("[1, 2, 2]", R"(
      {"type": "Conv2d", "name": "conv", "in_channels": 1, "out_channels": 2, "kernel_size": 1,
       "bias": false},
      {"type": "BatchNorm2d", "name": "bn", "num_features": 2, "eps": 1.0})",
                            "bn");
  const WeightStore weights = store_with(graph, {{"conv.weight", {2, -1}},
                                                 {"bn.weight", {3, 2}},
                                                 {"bn.bias", {1, -1}},
                                                 {"bn.running_mean", {2, 4}},
                                                 {"bn.running_var", {0, 3}}});
  const Plan plan = build_plan(graph, weights);

  ASSERT_EQ(plan.steps.size(), 1u);
  const Step& step = plan.steps[0];
  EXPECT_EQ(step.kind, StepKind::Conv2d);
  EXPECT_EQ(step.label, "conv+bn");
  EXPECT_EQ(step.window.in_channels, 1);
  EXPECT_EQ(step.window.out_channels, 2);
  EXPECT_EQ(step.window.out_height, 2);
  EXPECT_EQ(step.window.out_width, 2);
  EXPECT_EQ(constant(plan, step.weight), std::vector<float>({6, -1}));
  ASSERT_GE(step.bias, 0);
  EXPECT_EQ(constant(plan, step.bias), std::vector<float>({-5, -5}));
  EXPECT_EQ(plan.values[step.output].elements, 8);
}

// A BatchNorm that cannot fold becomes a ChannelAffine step holding scale and shift: after an
// activation (the Linear's output is no longer what the BatchNorm reads), and after a Linear
// whose output is 2-D (BatchNorm1d's channels are then the rows, not the Linear's outputs).
TEST(PlannerBatchNorm, StaysAChannelAffineAfterAnActivation) {
  const Graph graph = parse("[2]", R"(
      {"type": "Linear", "name": "fc", "in_features": 2, "out_features": 2},
      {"type": "ReLU", "name": "act"},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 2, "eps": 1.0})",
                            "bn");
  const WeightStore weights = store_with(graph, {{"fc.weight", {1, 2, 3, 4}},
                                                 {"fc.bias", {0.5f, -1}},
                                                 {"bn.weight", {2, 0.5f}},
                                                 {"bn.bias", {1, 0}},
                                                 {"bn.running_mean", {1, 2}},
                                                 {"bn.running_var", {3, 15}}});
  const Plan plan = build_plan(graph, weights);

  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Linear);
  EXPECT_EQ(plan.steps[0].label, "fc+act");
  EXPECT_EQ(epilogue_kinds(plan.steps[0]), std::vector<ElementwiseKind>({ElementwiseKind::ReLU}));
  EXPECT_EQ(constant(plan, plan.steps[0].weight), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(constant(plan, plan.steps[0].bias), std::vector<float>({0.5f, -1}));

  const Step& affine = plan.steps[1];
  EXPECT_EQ(affine.kind, StepKind::ChannelAffine);
  EXPECT_EQ(affine.label, "bn");
  EXPECT_EQ(affine.inputs, std::vector<int>({plan.steps[0].output}));
  EXPECT_EQ(affine.in_features, 2);   // channels
  EXPECT_EQ(affine.out_features, 1);  // spatial size per channel
  EXPECT_EQ(constant(plan, affine.weight), std::vector<float>({1, 0.125f}));
  EXPECT_EQ(constant(plan, affine.bias), std::vector<float>({0, -0.25f}));
}

TEST(PlannerBatchNorm, StaysAChannelAffineAfterALinearWithRows) {
  // [3, 4] -> Linear 4 -> 2 gives [3, 2]; BatchNorm1d normalises the 3 rows (channels).
  const Graph graph = parse("[3, 4]", R"(
      {"type": "Linear", "name": "fc", "in_features": 4, "out_features": 2},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 3, "eps": 1.0})",
                            "bn");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Linear);
  EXPECT_EQ(plan.steps[0].label, "fc");
  EXPECT_EQ(plan.steps[0].rows_per_sample, 3);
  EXPECT_EQ(plan.steps[1].kind, StepKind::ChannelAffine);
  EXPECT_EQ(plan.steps[1].in_features, 3);
  EXPECT_EQ(plan.steps[1].out_features, 2);
  // Weights not loaded read as zeros of the declared size: the Linear's weight, and gamma, so
  // the scale is gamma / sqrt(0 + 1) = 0.
  EXPECT_EQ(constant(plan, plan.steps[0].weight), std::vector<float>(8, 0.0f));
  EXPECT_EQ(constant(plan, plan.steps[1].weight), std::vector<float>(3, 0.0f));
}

TEST(PlannerBatchNorm, DoesNotFoldIntoALinearThatAnotherLayerReads) {
  const Graph graph = parse("[2]", R"(
      {"type": "Linear", "name": "fc", "in_features": 2, "out_features": 2},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 2},
      {"type": "Add", "name": "sum", "inputs": ["fc", "bn"]})",
                            "sum");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].label, "fc");
  EXPECT_EQ(plan.steps[1].kind, StepKind::ChannelAffine);
  EXPECT_EQ(plan.steps[1].label, "bn");
  EXPECT_EQ(plan.steps[2].kind, StepKind::Add);
  EXPECT_EQ(plan.steps[2].inputs, std::vector<int>({plan.steps[0].output, plan.steps[1].output}));
}

// ---- Elementwise fusion -------------------------------------------------------------------------

TEST(PlannerFusion, ActivationsAfterALinearJoinItsEpilogueInOrder) {
  const Graph graph = parse("[3]", R"(
      {"type": "Linear", "name": "fc", "in_features": 3, "out_features": 2},
      {"type": "ReLU", "name": "r"},
      {"type": "Scale", "name": "s", "alpha": 2.5},
      {"type": "LeakyReLU", "name": "l", "negative_slope": 0.25},
      {"type": "Tanh", "name": "t"})",
                            "t");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 1u);
  const Step& step = plan.steps[0];
  EXPECT_EQ(step.label, "fc+r+s+l+t");
  EXPECT_EQ(epilogue_kinds(step),
            std::vector<ElementwiseKind>({ElementwiseKind::ReLU, ElementwiseKind::Scale,
                                          ElementwiseKind::LeakyReLU, ElementwiseKind::Tanh}));
  EXPECT_EQ(step.epilogue[1].parameter, 2.5f);
  EXPECT_EQ(step.epilogue[2].parameter, 0.25f);
  EXPECT_EQ(plan.values.size(), 2u);
  EXPECT_EQ(plan.values[1].storage, Storage::ModelOutput);
}

TEST(PlannerFusion, GeluKeepsItsForm) {
  const Graph graph = parse("[3]", R"(
      {"type": "Linear", "name": "fc", "in_features": 3, "out_features": 2},
      {"type": "GELU", "name": "g", "approximate": "tanh"},
      {"type": "Linear", "name": "fc2", "in_features": 2, "out_features": 2},
      {"type": "GELU", "name": "g2"})",
                            "g2");
  const Plan plan = build_plan(graph, WeightStore(graph));
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(epilogue_kinds(plan.steps[0]),
            std::vector<ElementwiseKind>({ElementwiseKind::GeluTanh}));
  EXPECT_EQ(epilogue_kinds(plan.steps[1]),
            std::vector<ElementwiseKind>({ElementwiseKind::GeluErf}));
}

TEST(PlannerFusion, AnActivationReachesAcrossFlatten) {
  const Graph graph = parse("[1, 2, 2]", R"(
      {"type": "Conv2d", "name": "conv", "in_channels": 1, "out_channels": 3, "kernel_size": 1},
      {"type": "Flatten", "name": "flat"},
      {"type": "SiLU", "name": "act"},
      {"type": "Linear", "name": "fc", "in_features": 12, "out_features": 2})",
                            "fc");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Conv2d);
  EXPECT_EQ(plan.steps[0].label, "conv+act");
  EXPECT_EQ(epilogue_kinds(plan.steps[0]), std::vector<ElementwiseKind>({ElementwiseKind::SiLU}));
  // Flatten is no step: the Linear reads the convolution's value directly.
  EXPECT_EQ(plan.steps[1].inputs, std::vector<int>({plan.steps[0].output}));
  EXPECT_EQ(plan.steps[1].in_features, 12);
}

TEST(PlannerFusion, AnActivationStaysAStepWhereItCannotFuse) {
  // On the model input; after a pooling step (which takes no epilogue); after a Linear that a
  // second layer also reads.
  const Graph graph = parse("[1, 4, 4]", R"(
      {"type": "Sigmoid", "name": "on_input"},
      {"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2},
      {"type": "ReLU", "name": "after_pool"},
      {"type": "Flatten", "name": "flat"},
      {"type": "Linear", "name": "fc", "in_features": 4, "out_features": 4},
      {"type": "Tanh", "name": "shared_tanh"},
      {"type": "Add", "name": "sum", "inputs": ["fc", "shared_tanh"]})",
                            "sum");
  const Plan plan = build_plan(graph, WeightStore(graph));

  std::vector<std::pair<StepKind, std::string>> steps;
  for (const Step& step : plan.steps) steps.emplace_back(step.kind, step.label);
  EXPECT_EQ(steps,
            (std::vector<std::pair<StepKind, std::string>>{{StepKind::Elementwise, "on_input"},
                                                           {StepKind::MaxPool2d, "pool"},
                                                           {StepKind::Elementwise, "after_pool"},
                                                           {StepKind::Linear, "fc"},
                                                           {StepKind::Elementwise, "shared_tanh"},
                                                           {StepKind::Add, "sum"}}));
  EXPECT_EQ(epilogue_kinds(plan.steps[0]),
            std::vector<ElementwiseKind>({ElementwiseKind::Sigmoid}));
  EXPECT_TRUE(plan.steps[3].epilogue.empty());
  EXPECT_EQ(plan.steps[0].inputs, std::vector<int>({0}));
  expect_consistent_workspace(plan);
}

TEST(PlannerFusion, AnActivationAfterAnAddOrAnElementwiseStepJoinsIt) {
  const Graph graph = parse("[4]", R"(
      {"type": "ReLU", "name": "a"},
      {"type": "Scale", "name": "b", "alpha": 3},
      {"type": "Add", "name": "sum", "inputs": ["b", "input"]},
      {"type": "Tanh", "name": "t"})",
                            "t");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Elementwise);
  EXPECT_EQ(plan.steps[0].label, "a+b");
  EXPECT_EQ(epilogue_kinds(plan.steps[0]),
            std::vector<ElementwiseKind>({ElementwiseKind::ReLU, ElementwiseKind::Scale}));
  EXPECT_EQ(plan.steps[1].kind, StepKind::Add);
  EXPECT_EQ(plan.steps[1].label, "sum+t");
  EXPECT_EQ(plan.steps[1].inputs, std::vector<int>({plan.steps[0].output, 0}));
  EXPECT_EQ(epilogue_kinds(plan.steps[1]), std::vector<ElementwiseKind>({ElementwiseKind::Tanh}));
}

// ---- Chains -------------------------------------------------------------------------------------

// The seed MLP becomes three Linear steps, each reading only the one before, which is the form
// the backends recognise as an MLP chain.
TEST(PlannerChain, TheSeedMlpIsAChainOfThreeLinearSteps) {
  const Graph graph = parse("[100]", R"(
      {"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 128},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc2", "in_features": 128, "out_features": 64},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc3", "in_features": 64, "out_features": 10})",
                            "fc3");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 3u);
  const char* labels[] = {"fc1+relu_1", "fc2+relu_3", "fc3"};
  const int64_t in[] = {100, 128, 64}, out[] = {128, 64, 10};
  for (size_t s = 0; s < 3; ++s) {
    const Step& step = plan.steps[s];
    EXPECT_EQ(step.kind, StepKind::Linear);
    EXPECT_EQ(step.label, labels[s]);
    EXPECT_EQ(step.in_features, in[s]);
    EXPECT_EQ(step.out_features, out[s]);
    EXPECT_EQ(step.rows_per_sample, 1);
    EXPECT_EQ(step.inputs, std::vector<int>({static_cast<int>(s)}));
    EXPECT_EQ(step.output, static_cast<int>(s) + 1);
    EXPECT_EQ(constant(plan, step.weight).size(), static_cast<size_t>(in[s] * out[s]));
    EXPECT_EQ(constant(plan, step.bias).size(), static_cast<size_t>(out[s]));
  }
  EXPECT_EQ(epilogue_kinds(plan.steps[2]), std::vector<ElementwiseKind>());
  EXPECT_EQ(plan.input_shape, Shape({100}));
  EXPECT_EQ(plan.output_shape, Shape({10}));

  // Values: the input, two workspace intermediates in slots of their own (both are live at
  // step 1), the output in the caller's buffer.
  ASSERT_EQ(plan.values.size(), 4u);
  EXPECT_EQ(plan.values[0].storage, Storage::ModelInput);
  EXPECT_EQ(plan.values[1].storage, Storage::Workspace);
  EXPECT_EQ(plan.values[1].workspace_offset, 0);
  EXPECT_EQ(plan.values[1].slot_floats, 128);
  EXPECT_EQ(plan.values[2].storage, Storage::Workspace);
  EXPECT_EQ(plan.values[2].workspace_offset, 128);
  EXPECT_EQ(plan.values[2].slot_floats, 64);
  EXPECT_EQ(plan.values[3].storage, Storage::ModelOutput);
  EXPECT_EQ(plan.output_value, 3);
  EXPECT_EQ(plan.workspace_floats_per_sample, 128 + 64);
  EXPECT_EQ(plan.constant_bytes(),
            (100 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10) * sizeof(float));
}

// ---- Workspace sizing and reuse -----------------------------------------------------------------

// 4 -> 8 -> 6 -> 10 -> 3: the 10-wide value takes the 8-wide value's slot once that is free and
// grows it; the workspace is two slots, 10 + 6.
TEST(PlannerWorkspace, AFreedSlotIsReusedAndGrown) {
  const Graph graph = parse("[4]", R"(
      {"type": "Linear", "name": "a", "in_features": 4, "out_features": 8},
      {"type": "Linear", "name": "b", "in_features": 8, "out_features": 6},
      {"type": "Linear", "name": "c", "in_features": 6, "out_features": 10},
      {"type": "Linear", "name": "d", "in_features": 10, "out_features": 3})",
                            "d");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.values.size(), 5u);
  // value: elements, storage, offset, slot size
  const Value& a = plan.values[1];
  const Value& b = plan.values[2];
  const Value& c = plan.values[3];
  EXPECT_EQ(a.elements, 8);
  EXPECT_EQ(a.workspace_offset, 0);
  EXPECT_EQ(a.slot_floats, 10);
  EXPECT_EQ(b.elements, 6);
  EXPECT_EQ(b.workspace_offset, 10);
  EXPECT_EQ(b.slot_floats, 6);
  EXPECT_EQ(c.elements, 10);
  EXPECT_EQ(c.workspace_offset, 0);
  EXPECT_EQ(c.slot_floats, 10);
  EXPECT_EQ(plan.values[4].storage, Storage::ModelOutput);
  EXPECT_EQ(plan.workspace_floats_per_sample, 16);
  expect_consistent_workspace(plan);
}

// Two slots (8 and 2 floats) come free at once after a Concat. A 2-float value takes the smaller
// slot that fits (2, not 8). Then the slots of 8 and 10 floats are free, and a 12-float value,
// which fits neither, takes the larger (10) and grows it to 12.
TEST(PlannerWorkspace, TheSmallestFittingSlotIsPreferredElseTheLargestGrows) {
  const Graph graph = parse("[4]", R"(
      {"type": "Linear", "name": "wide", "in_features": 4, "out_features": 8, "inputs": ["input"]},
      {"type": "Linear", "name": "narrow", "in_features": 4, "out_features": 2, "inputs": ["input"]},
      {"type": "Concat", "name": "joined", "dim": 1, "inputs": ["wide", "narrow"]},
      {"type": "Linear", "name": "small", "in_features": 10, "out_features": 2},
      {"type": "Linear", "name": "big", "in_features": 2, "out_features": 12},
      {"type": "Linear", "name": "out", "in_features": 12, "out_features": 3})",
                            "out");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 6u);
  const Step& concat = plan.steps[2];
  EXPECT_EQ(concat.kind, StepKind::Concat);
  EXPECT_EQ(concat.rows_per_sample, 1);
  EXPECT_EQ(concat.concat_inner, std::vector<int64_t>({8, 2}));
  EXPECT_EQ(concat.inputs, std::vector<int>({1, 2}));

  // Slots in order of creation: 0 (wide, 8), 1 (narrow, 2; then small), 2 (joined, 10; then
  // big, grown to 12). Offsets 0, 8, 10; total 8 + 2 + 12.
  const Value& wide = plan.values[1];
  const Value& narrow = plan.values[2];
  const Value& joined = plan.values[3];
  const Value& small = plan.values[4];
  const Value& big = plan.values[5];
  EXPECT_EQ(wide.workspace_offset, 0);
  EXPECT_EQ(wide.slot_floats, 8);
  EXPECT_EQ(narrow.workspace_offset, 8);
  EXPECT_EQ(small.workspace_offset, 8);
  EXPECT_EQ(small.slot_floats, 2);
  EXPECT_EQ(joined.workspace_offset, 10);
  EXPECT_EQ(joined.slot_floats, 12);
  EXPECT_EQ(big.workspace_offset, 10);
  EXPECT_EQ(big.slot_floats, 12);
  EXPECT_EQ(plan.values[6].storage, Storage::ModelOutput);
  EXPECT_EQ(plan.workspace_floats_per_sample, 22);
  expect_consistent_workspace(plan);
}

// A residual block: the skip connection keeps its value live across the branch, so the branch's
// values may not take its slot.
TEST(PlannerWorkspace, ASkipConnectionKeepsItsSlotUntilTheAdd) {
  const Graph graph = parse("[2, 4, 4]", R"(
      {"type": "Conv2d", "name": "stem", "in_channels": 2, "out_channels": 4, "kernel_size": 3,
       "padding": 1},
      {"type": "ReLU", "name": "stem_act"},
      {"type": "Conv2d", "name": "branch1", "in_channels": 4, "out_channels": 4, "kernel_size": 3,
       "padding": 1},
      {"type": "ReLU", "name": "branch1_act"},
      {"type": "Conv2d", "name": "branch2", "in_channels": 4, "out_channels": 4, "kernel_size": 3,
       "padding": 1},
      {"type": "Add", "name": "residual", "inputs": ["branch2", "stem_act"]},
      {"type": "ReLU", "name": "out_act"},
      {"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2},
      {"type": "Flatten"},
      {"type": "Linear", "name": "head", "in_features": 16, "out_features": 3})",
                            "head");
  const Plan plan = build_plan(graph, WeightStore(graph));

  std::vector<std::string> labels;
  for (const Step& step : plan.steps) labels.push_back(step.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"stem+stem_act", "branch1+branch1_act", "branch2",
                                              "residual+out_act", "pool", "head"}));
  // stem (64 floats) is live until the Add; branch1 and branch2 need two more slots; the Add's
  // output reuses a freed one, the pooled value another.
  const int stem = plan.steps[0].output, branch1 = plan.steps[1].output,
            branch2 = plan.steps[2].output, residual = plan.steps[3].output;
  EXPECT_NE(plan.values[stem].workspace_offset, plan.values[branch1].workspace_offset);
  EXPECT_NE(plan.values[stem].workspace_offset, plan.values[branch2].workspace_offset);
  EXPECT_NE(plan.values[branch1].workspace_offset, plan.values[branch2].workspace_offset);
  EXPECT_EQ(plan.values[residual].workspace_offset, plan.values[branch1].workspace_offset);
  EXPECT_EQ(plan.workspace_floats_per_sample, 3 * 64);
  expect_consistent_workspace(plan);
}

// ---- Dead layers --------------------------------------------------------------------------------

TEST(PlannerPruning, LayersThatDoNotFeedTheOutputAreDropped) {
  // `probe` reads fc1 but feeds nothing: it is dropped, it costs no constants, and fc1 still
  // counts as read once, so its ReLU fuses. `unused` reads the input and feeds nothing.
  const Graph graph = parse("[3]", R"(
      {"type": "Linear", "name": "unused", "in_features": 3, "out_features": 5},
      {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 4, "inputs": ["input"]},
      {"type": "Linear", "name": "probe", "in_features": 4, "out_features": 7},
      {"type": "ReLU", "name": "act", "inputs": ["fc1"]},
      {"type": "Linear", "name": "fc2", "in_features": 4, "out_features": 2})",
                            "fc2");
  const Plan plan = build_plan(graph, WeightStore(graph));

  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].label, "fc1+act");
  EXPECT_EQ(plan.steps[1].label, "fc2");
  ASSERT_EQ(plan.constants.size(), 4u);
  EXPECT_EQ(plan.constant_bytes(), (3 * 4 + 4 + 4 * 2 + 2) * sizeof(float));
  EXPECT_EQ(plan.values.size(), 3u);
  EXPECT_EQ(plan.workspace_floats_per_sample, 4);
}

TEST(PlannerPruning, AnOutputInTheMiddleDropsWhatFollows) {
  const Graph graph = parse("[3]", R"(
      {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 4},
      {"type": "Linear", "name": "fc2", "in_features": 4, "out_features": 2},
      {"type": "Softmax", "name": "soft"})",
                            "fc1");
  const Plan plan = build_plan(graph, WeightStore(graph));
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].label, "fc1");
  EXPECT_EQ(plan.output_shape, Shape({4}));
  EXPECT_EQ(plan.workspace_floats_per_sample, 0);
}

// ---- The output
// -----------------------------------------------------------------------------------

TEST(PlannerOutput, AModelWhoseOutputIsItsInputCopiesIt) {
  const Graph graph = parse("[2, 3]", R"({"type": "Flatten", "name": "flat"})", "flat");
  const Plan plan = build_plan(graph, WeightStore(graph));
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Copy);
  EXPECT_EQ(plan.steps[0].inputs, std::vector<int>({0}));
  EXPECT_EQ(plan.values[plan.output_value].storage, Storage::ModelOutput);
  EXPECT_EQ(plan.values[plan.output_value].elements, 6);
  EXPECT_EQ(plan.output_shape, Shape({6}));
  EXPECT_EQ(plan.workspace_floats_per_sample, 0);
}

TEST(PlannerOutput, RowOperationsKeepTheirRows) {
  const Graph graph = parse("[3, 4]", R"(
      {"type": "LayerNorm", "name": "norm", "normalized_shape": 4, "eps": 0.5},
      {"type": "Softmax", "name": "soft"})",
                            "soft");
  const Plan plan = build_plan(graph, WeightStore(graph));
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::LayerNorm);
  EXPECT_EQ(plan.steps[0].in_features, 4);
  EXPECT_EQ(plan.steps[0].rows_per_sample, 3);
  EXPECT_EQ(plan.steps[0].eps, 0.5f);
  EXPECT_EQ(plan.steps[1].kind, StepKind::Softmax);
  EXPECT_EQ(plan.steps[1].in_features, 4);
  EXPECT_EQ(plan.steps[1].rows_per_sample, 3);
  EXPECT_EQ(plan.workspace_floats_per_sample, 12);
}

}  // namespace
}  // namespace fusednn
