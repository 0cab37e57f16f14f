// SPDX-License-Identifier: Apache-2.0

#include "runtime/loaded_model.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "common/checked_math.hpp"
#include "common/error.hpp"
#include "common/half_float.hpp"
#include "common/load_timeline.hpp"
#include "graph/safetensors_file.hpp"
#include "graph/weight_directory.hpp"
#include "planner/plan_cost.hpp"
#include "planner/planner.hpp"
#include "runtime/plan_explanation.hpp"

namespace fusednn {

LoadedModel::LoadedModel(ModelFile file, const ResolvedOptions& options)
    : LoadedModel(std::move(file.graph), options) {
  if (file.bundled_weights) accept_weights(std::move(*file.bundled_weights));
}

LoadedModel::LoadedModel(Graph graph, const ResolvedOptions& options)
    : graph_(std::move(graph)), options_(options), weights_(graph_) {
  // Before any weight is read: the declared tensors as float32 must fit the caller's limit.
  const int64_t parameters = graph_.parameter_count();
  const size_t bytes = checked_bytes(parameters, sizeof(float), FDNN_STATUS_OUT_OF_MEMORY,
                                     "the weight bytes of model '", graph_.name, "'");
  if (options_.max_weight_bytes != 0 && bytes > options_.max_weight_bytes) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "model '", graph_.name, "' declares ", parameters, " weights (",
         bytes, " bytes as float32), more than options.max_weight_bytes (",
         options_.max_weight_bytes, "); raise the limit to load it");
  }
}

void LoadedModel::check_limits(const Backend& backend) const {
  const uint64_t workspace = backend.context_bytes();
  if (options_.max_workspace_bytes != 0 && workspace > options_.max_workspace_bytes) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "model '", graph_.name, "' needs ", workspace,
         " bytes of scratch memory per context for options.max_batch = ", options_.max_batch,
         ", more than options.max_workspace_bytes (", options_.max_workspace_bytes,
         "); lower max_batch or raise the limit");
  }
  const uint64_t weights = backend.weight_bytes();
  if (options_.max_weight_bytes != 0 && weights > options_.max_weight_bytes) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "model '", graph_.name, "' holds ", weights,
         " bytes of weights on its backend, more than options.max_weight_bytes (",
         options_.max_weight_bytes, "); raise the limit to run it");
  }
}

void LoadedModel::require_mutable() const {
  if (prepared_) {
    fail(FDNN_STATUS_INVALID_STATE, "the weights of model '", graph_.name,
         "' are frozen: it has run or has a context; create a new model to change them");
  }
}

void LoadedModel::load_weights(const std::string& path) {
  require_mutable();
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    accept_weights(read_weight_directory(path, weights_, options_.max_weight_bytes,
                                         "options.max_weight_bytes (" +
                                             std::to_string(options_.max_weight_bytes) +
                                             "); raise the limit to load it"));
  } else {
    const WeightFileLimit limit = weight_file_limit(options_);
    accept_weights(read_safetensors(path, limit.bytes, limit.text).tensors);
  }
}

void LoadedModel::accept_weights(std::vector<NamedTensor> tensors) {
  require_mutable();
  weights_.accept(std::move(tensors));
}

void LoadedModel::set_weight(const std::string& name, int32_t dtype, const void* data,
                             const Shape& shape) {
  require_mutable();
  const char* const source = "fdnn_model_set_weight";
  if (dtype != FDNN_DTYPE_FLOAT32 && dtype != FDNN_DTYPE_FLOAT16 && dtype != FDNN_DTYPE_BFLOAT16) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "dtype ", dtype, " of tensor '", name,
         "' is not an fdnn_dtype");
  }
  // The caller's shape says how much data there is: it must be the spec's before anything is read
  // or allocated by it, so that a wrong or huge shape never reads past the caller's buffer.
  if (!weights_.check_name_and_shape(name, shape, source)) return;
  NamedTensor tensor;
  tensor.name = name;
  tensor.shape = shape;
  tensor.source = source;
  const auto count = static_cast<size_t>(element_count(weights_.expected_shape(name)));
  tensor.values.resize(count);
  if (dtype == FDNN_DTYPE_FLOAT32) {
    tensor.dtype = "F32";
    std::memcpy(tensor.values.data(), data, count * sizeof(float));
  } else {
    tensor.dtype = dtype == FDNN_DTYPE_FLOAT16 ? "F16" : "BF16";
    const auto* bits = static_cast<const uint16_t*>(data);
    for (size_t i = 0; i < count; ++i) {
      tensor.values[i] =
          dtype == FDNN_DTYPE_FLOAT16 ? half_to_float(bits[i]) : bfloat16_to_float(bits[i]);
    }
  }
  weights_.accept({std::move(tensor)});
}

void LoadedModel::validate() const {
  weights_.require_complete();
  weights_.require_finite();
}

std::shared_ptr<const PreparedModel> LoadedModel::make_prepared(const WeightStore& weights) const {
  FDNN_LOAD_STAMP("prepare: start");
  auto prepared = std::make_shared<PreparedModel>();
  prepared->plan = std::make_shared<const Plan>(build_plan(graph_, weights));
  FDNN_LOAD_STAMP("prepare: plan built");
  prepared->max_batch = options_.max_batch;
  if (options_.device == FDNN_DEVICE_CUDA) {
    prepared->backend = make_cuda_backend(prepared->plan, options_.max_batch, options_.device_id,
                                          options_.cuda_graphs, options_.precision,
                                          options_.host_io, options_.cuda_selection_overrides);
  } else {
    prepared->backend = make_cpu_backend(prepared->plan, options_.max_batch, options_.cpu_threads);
  }
  FDNN_LOAD_STAMP("prepare: backend built");
  return prepared;
}

LayerSummary LoadedModel::layer_summary(size_t index) const {
  const Layer& layer = graph_.layers.at(index);
  LayerSummary summary;
  summary.name = layer.name.c_str();
  summary.type = layer.type_name.c_str();
  summary.output_shape = layer.output_shape;
  for (const WeightSlot& slot : layer.weights) summary.parameter_count += element_count(slot.shape);
  return summary;
}

LoadedModel::BackendFacts LoadedModel::backend_facts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!backend_facts_) {
    const std::shared_ptr<const PreparedModel> prepared =
        prepared_ ? prepared_ : make_prepared(weights_);
    const Backend& backend = *prepared->backend;
    const PlanCost cost = plan_cost(*prepared->plan);
    backend_facts_ =
        BackendFacts{backend.weight_bytes(), backend.context_bytes(), backend.effective_precision(),
                     cost.flops_per_sample, cost.bytes_per_sample};
  }
  return *backend_facts_;
}

std::string LoadedModel::explain(int64_t batch, ExplanationFormat format) const {
  if (batch < 1 || batch > options_.max_batch) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "batch is ", batch, "; it must be 1 to max_batch (",
         options_.max_batch, ", set in fdnn_model_options)");
  }
  std::shared_ptr<const PreparedModel> prepared;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    prepared = prepared_ ? prepared_ : make_prepared(weights_);
  }
  return explain_plan(*prepared, graph_.name, options_, batch, format);
}

std::shared_ptr<const PreparedModel> LoadedModel::prepare() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!prepared_) {
    try {
      weights_.require_complete();
    } catch (const StatusError& error) {
      fail(FDNN_STATUS_INVALID_STATE, "model '", graph_.name,
           "' cannot run before its weights are loaded: ", error.what());
    }
    std::shared_ptr<const PreparedModel> prepared = make_prepared(weights_);
    check_limits(*prepared->backend);
    prepared_ = std::move(prepared);
  }
  return prepared_;
}

template <typename Body>
void LoadedModel::with_pooled_context(Body&& body) {
  std::unique_ptr<RunContext> context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_contexts_.empty()) {
      context = std::move(idle_contexts_.back());
      idle_contexts_.pop_back();
    }
  }
  if (!context) context = std::make_unique<RunContext>(prepare());
  // The context goes back to the pool whether or not the run succeeds.
  struct ReturnToPool {
    LoadedModel& model;
    std::unique_ptr<RunContext>& context;
    ~ReturnToPool() {
      try {
        std::lock_guard<std::mutex> lock(model.mutex_);
        model.idle_contexts_.push_back(std::move(context));
      } catch (...) {
        // Out of memory growing the pool: the context is simply freed.
      }
    }
  } give_back{*this, context};
  body(*context);
}

void LoadedModel::run(int64_t batch, const float* input, size_t input_count, float* output,
                      size_t output_capacity) {
  with_pooled_context([&](RunContext& context) {
    context.run(batch, input, input_count, output, output_capacity);
  });
}

void LoadedModel::run_typed(const TypedRun& run) {
  with_pooled_context([&](RunContext& context) { context.run_typed(run); });
}

}  // namespace fusednn
