// SPDX-License-Identifier: Apache-2.0

#include "runtime/plan_explanation.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/error.hpp"
#include "planner/step_cost.hpp"

namespace fusednn {
namespace {

using nlohmann::ordered_json;

const char* elementwise_name(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::ReLU: return "ReLU";
    case ElementwiseKind::LeakyReLU: return "LeakyReLU";
    case ElementwiseKind::GeluErf: return "GELU";
    case ElementwiseKind::GeluTanh: return "GELU(tanh)";
    case ElementwiseKind::SiLU: return "SiLU";
    case ElementwiseKind::Sigmoid: return "Sigmoid";
    case ElementwiseKind::Tanh: return "Tanh";
    case ElementwiseKind::Scale: return "Scale";
  }
  return "?";
}

const char* storage_name(Storage storage) {
  switch (storage) {
    case Storage::ModelInput: return "input";
    case Storage::ModelOutput: return "output";
    case Storage::Workspace: return "workspace";
  }
  return "?";
}

const char* device_name(fdnn_device device) { return device == FDNN_DEVICE_CUDA ? "cuda" : "cpu"; }

ordered_json explanation_json(const PreparedModel& prepared, const std::string& model_name,
                              const ResolvedOptions& options, int64_t batch) {
  const Plan& plan = *prepared.plan;
  const Backend& backend = *prepared.backend;
  const BackendExplanation explained = backend.explain(batch);
  const auto samples = static_cast<double>(batch);

  ordered_json document;
  document["model"] = model_name;
  document["device"] = device_name(backend.device());
  document["precision_requested"] = precision_name(options.precision);
  document["precision"] = precision_name(backend.effective_precision());
  document["batch"] = batch;
  document["max_batch"] = prepared.max_batch;
  document["backend"] = explained.summary;
  document["weight_bytes"] = backend.weight_bytes();
  document["context_bytes"] = backend.context_bytes();
  document["workspace_bytes_per_sample"] =
      plan.workspace_floats_per_sample * static_cast<int64_t>(sizeof(float));

  // Workspace slots numbered in offset order, as the planner laid them out.
  std::vector<int64_t> slot_offsets;
  for (const Value& value : plan.values) {
    if (value.storage == Storage::Workspace) slot_offsets.push_back(value.workspace_offset);
  }
  std::sort(slot_offsets.begin(), slot_offsets.end());
  slot_offsets.erase(std::unique(slot_offsets.begin(), slot_offsets.end()), slot_offsets.end());
  document["workspace_slots"] = slot_offsets.size();

  double total_flops = 0;
  int64_t total_activation_bytes = 0, total_weight_bytes = 0;
  int total_launches = 0;
  ordered_json steps = ordered_json::array();
  for (size_t k = 0; k < explained.kernels.size(); ++k) {
    const KernelChoice& choice = explained.kernels[k];
    ordered_json entry;
    entry["index"] = k;
    entry["plan_steps"] = {choice.first_step, choice.last_step};
    ordered_json layers = ordered_json::array(), kinds = ordered_json::array();
    ordered_json epilogue = ordered_json::array();
    double flops = 0;
    for (int s = choice.first_step; s <= choice.last_step; ++s) {
      const Step& step = plan.steps[static_cast<size_t>(s)];
      layers.push_back(step.label);
      kinds.push_back(step_kind_name(step.kind));
      for (const ElementwiseOp& op : step.epilogue) epilogue.push_back(elementwise_name(op.kind));
      flops += step_flops_per_sample(plan, step);
    }
    entry["layers"] = layers;
    entry["kinds"] = kinds;
    entry["fused_activations"] = epilogue;
    entry["form"] = choice.form;
    entry["reason"] = choice.reason;
    entry["launches"] = choice.launches;
    const Value& output = plan.values[plan.steps[static_cast<size_t>(choice.last_step)].output];
    ordered_json where;
    where["storage"] = storage_name(output.storage);
    where["bytes_per_sample"] = output.elements * static_cast<int64_t>(sizeof(float));
    if (output.storage == Storage::Workspace) {
      where["slot"] =
          std::lower_bound(slot_offsets.begin(), slot_offsets.end(), output.workspace_offset) -
          slot_offsets.begin();
      where["slot_offset_floats_per_sample"] = output.workspace_offset;
      where["slot_bytes_per_sample"] = output.slot_floats * static_cast<int64_t>(sizeof(float));
      where["slot_bytes"] =
          output.slot_floats * static_cast<int64_t>(sizeof(float)) * prepared.max_batch;
    }
    entry["output"] = where;
    const RangeTraffic traffic = range_traffic(plan, choice.first_step, choice.last_step);
    entry["flops_per_sample"] = flops;
    entry["flops"] = flops * samples;
    entry["activation_bytes_per_sample"] = traffic.activation_bytes_per_sample;
    entry["weight_bytes"] = traffic.weight_bytes;
    entry["bytes"] = traffic.activation_bytes_per_sample * batch + traffic.weight_bytes;
    total_flops += flops;
    total_activation_bytes += traffic.activation_bytes_per_sample;
    total_weight_bytes += traffic.weight_bytes;
    total_launches += choice.launches;
    steps.push_back(std::move(entry));
  }
  document["steps"] = std::move(steps);
  ordered_json totals;
  totals["flops_per_sample"] = total_flops;
  totals["flops"] = total_flops * samples;
  totals["activation_bytes_per_sample"] = total_activation_bytes;
  totals["weight_bytes"] = total_weight_bytes;
  totals["bytes"] = total_activation_bytes * batch + total_weight_bytes;
  totals["launches"] = total_launches;
  document["totals"] = std::move(totals);
  return document;
}

std::string format(const char* pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// scaled(1234567, "B") -> "1.23 MB"; whole numbers below a thousand.
std::string scaled(double value, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  size_t prefix = 0;
  while (value >= 999.5 && prefix + 1 < sizeof prefixes / sizeof prefixes[0]) {
    value /= 1000.0;
    ++prefix;
  }
  return format(prefix == 0 ? "%.0f" : "%.3g", value) + " " + prefixes[prefix] + unit;
}

std::string joined(const ordered_json& names, const char* separator) {
  std::string text;
  for (const auto& name : names) {
    if (!text.empty()) text += separator;
    text += name.get<std::string>();
  }
  return text;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string text_table(const ordered_json& document) {
  std::string out;
  out += "model " + document["model"].get<std::string>() + "  device " +
         document["device"].get<std::string>() + "  precision " +
         document["precision"].get<std::string>() + " (" +
         document["precision_requested"].get<std::string>() + " allowed)  batch " +
         std::to_string(document["batch"].get<int64_t>()) + " (max " +
         std::to_string(document["max_batch"].get<int64_t>()) + ")\n";
  out += document["backend"].get<std::string>() + "\n\n";
  // The figures in columns; the layers, form and reason, whose lengths vary, on lines of their own.
  out += padded("#", 4) + padded("per sample", 13) + padded("at batch", 13) + padded("bytes", 11) +
         "output\n";
  for (const auto& step : document["steps"]) {
    const auto& output = step["output"];
    std::string where = output["storage"].get<std::string>();
    if (output.contains("slot")) {
      where += " slot " + std::to_string(output["slot"].get<int64_t>()) + ", " +
               scaled(double(output["slot_bytes_per_sample"].get<int64_t>()), "B") + "/sample";
    }
    out += padded(std::to_string(step["index"].get<size_t>()), 4) +
           padded(scaled(step["flops_per_sample"].get<double>(), "FLOP"), 13) +
           padded(scaled(step["flops"].get<double>(), "FLOP"), 13) +
           padded(scaled(double(step["bytes"].get<int64_t>()), "B"), 11) + where + "\n";
    out += "      layers: " + joined(step["layers"], ", ") + "\n";
    out += "      form: " + step["form"].get<std::string>() + "\n";
    if (!step["fused_activations"].empty()) {
      out += "      fused: " + joined(step["fused_activations"], ", ") + "\n";
    }
    out += "      why: " + step["reason"].get<std::string>() + "\n";
  }
  const auto& totals = document["totals"];
  out += "\ntotal: " + scaled(totals["flops_per_sample"].get<double>(), "FLOP") + "/sample, " +
         scaled(totals["flops"].get<double>(), "FLOP") + " and " +
         scaled(double(totals["bytes"].get<int64_t>()), "B") + " moved at this batch (" +
         scaled(double(totals["activation_bytes_per_sample"].get<int64_t>()), "B") +
         "/sample of activations, " + scaled(double(totals["weight_bytes"].get<int64_t>()), "B") +
         " of weights), " + std::to_string(totals["launches"].get<int>()) +
         " kernel launch(es) or call(s)\n";
  out +=
      "workspace: " + scaled(double(document["workspace_bytes_per_sample"].get<int64_t>()), "B") +
      "/sample in the plan's " + std::to_string(document["workspace_slots"].get<size_t>()) +
      " slot(s); " + scaled(double(document["context_bytes"].get<size_t>()), "B") +
      " per context, " + scaled(double(document["weight_bytes"].get<size_t>()), "B") +
      " of weights\n";
  return out;
}

}  // namespace

std::string explain_plan(const PreparedModel& prepared, const std::string& model_name,
                         const ResolvedOptions& options, int64_t batch, ExplanationFormat format) {
  if (batch < 1 || batch > prepared.max_batch) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "batch is ", batch, "; it must be 1 to max_batch (",
         prepared.max_batch, ", set in fdnn_model_options)");
  }
  const ordered_json document = explanation_json(prepared, model_name, options, batch);
  if (format == ExplanationFormat::Text) return text_table(document);
  return document.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace fusednn
