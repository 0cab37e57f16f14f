#include "runtime/model.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "common/caller_dtype.hpp"
#include "common/checked_math.hpp"
#include "common/error.hpp"
#include "common/load_timeline.hpp"
#include "common/raw_enum.hpp"
#include "graph/little_endian.hpp"
#include "graph/safetensors_file.hpp"
#include "graph/weight_directory.hpp"
#include "planner/plan_cost.hpp"
#include "planner/planner.hpp"
#include "runtime/plan_explanation.hpp"

namespace fusednn {

static_assert(static_cast<int32_t>(Precision::FP32) == FDNN_PRECISION_FP32 &&
                  static_cast<int32_t>(Precision::TF32) == FDNN_PRECISION_TF32 &&
                  static_cast<int32_t>(Precision::FP16) == FDNN_PRECISION_FP16 &&
                  static_cast<int32_t>(Precision::BF16) == FDNN_PRECISION_BF16,
              "fusednn::Precision mirrors fdnn_precision value for value");

namespace {

fdnn_model_options given_defaults() {
  fdnn_model_options defaults;
  fdnn_model_options_init(&defaults, sizeof defaults);
  return defaults;
}

}  // namespace

ResolvedOptions resolve_options(const fdnn_model_options* options) {
  ResolvedOptions resolved;
  if (options == nullptr) return resolved;
  // A caller built against an older header passes a shorter struct: read only what it has.
  fdnn_model_options given = given_defaults();
  if (options->struct_size < offsetof(fdnn_model_options, max_batch)) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.struct_size is ", options->struct_size,
         "; call fdnn_model_options_init(&options, sizeof options) before setting fields");
  }
  std::memcpy(&given, options, std::min(options->struct_size, sizeof given));
  // A size that ends inside a field added later holds none of it: that field keeps its default.
  const fdnn_model_options defaults = given_defaults();
  const auto holds = [&](size_t offset, size_t size) {
    return options->struct_size >= offset + size;
  };
  if (!holds(offsetof(fdnn_model_options, precision), sizeof given.precision)) {
    given.precision = defaults.precision;
  }
  if (!holds(offsetof(fdnn_model_options, max_workspace_bytes), sizeof given.max_workspace_bytes)) {
    given.max_workspace_bytes = defaults.max_workspace_bytes;
  }
  if (!holds(offsetof(fdnn_model_options, max_weight_bytes), sizeof given.max_weight_bytes)) {
    given.max_weight_bytes = defaults.max_weight_bytes;
  }
  if (given.max_batch < 1 || given.max_batch > FDNN_MAX_BATCH_LIMIT) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.max_batch is ", given.max_batch,
         "; it must be 1 to FDNN_MAX_BATCH_LIMIT (", FDNN_MAX_BATCH_LIMIT, ")");
  }
  if (given.cpu_threads < 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.cpu_threads is ", given.cpu_threads,
         "; use 0 for one per hardware thread or a positive count");
  }
  if (given.device_id < 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.device_id is ", given.device_id);
  }
  switch (raw_enum_value(given.device)) {
    case FDNN_DEVICE_CPU: resolved.device = FDNN_DEVICE_CPU; break;
    case FDNN_DEVICE_AUTO:  // the GPU when this build has the CUDA backend and it sees one
      resolved.device =
          cuda_unavailable_reason(given.device_id).empty() ? FDNN_DEVICE_CUDA : FDNN_DEVICE_CPU;
      break;
    case FDNN_DEVICE_CUDA: {
      const std::string reason = cuda_unavailable_reason(given.device_id);
      if (!reason.empty()) {
        fail(FDNN_STATUS_UNSUPPORTED, "options.device is FDNN_DEVICE_CUDA but ", reason,
             "; use FDNN_DEVICE_CPU or FDNN_DEVICE_AUTO");
      }
      resolved.device = FDNN_DEVICE_CUDA;
      break;
    }
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, "options.device has unknown value ",
           raw_enum_value(given.device));
  }
  resolved.max_batch = given.max_batch;
  resolved.max_workspace_bytes = given.max_workspace_bytes;
  resolved.max_weight_bytes = given.max_weight_bytes;
  resolved.device_id = given.device_id;
  resolved.cpu_threads = given.cpu_threads;
  if (given.cuda_graphs != 0 && given.cuda_graphs != 1) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "options.cuda_graphs is ", given.cuda_graphs,
         "; use 1 (capture CUDA graphs) or 0 (launch directly)");
  }
  resolved.cuda_graphs = given.cuda_graphs == 1;
  const int32_t precision = raw_enum_value(given.precision);
  switch (precision) {
    case FDNN_PRECISION_FP32:
    case FDNN_PRECISION_TF32:
    case FDNN_PRECISION_FP16:
    case FDNN_PRECISION_BF16: resolved.precision = static_cast<Precision>(precision); break;
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, "options.precision has unknown value ", precision,
           "; use FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16 or "
           "FDNN_PRECISION_BF16");
  }
  return resolved;
}

WeightFileLimit weight_file_limit(const ResolvedOptions& options) {
  constexpr uint64_t kHeaderBytes = uint64_t{100} << 20;
  WeightFileLimit limit;
  if (options.max_weight_bytes == 0) return limit;
  const uint64_t most = std::numeric_limits<uint64_t>::max();
  limit.bytes = options.max_weight_bytes > most - kHeaderBytes
                    ? most
                    : options.max_weight_bytes + kHeaderBytes;
  limit.text = "options.max_weight_bytes (" + std::to_string(options.max_weight_bytes) +
               ") and 100 MiB of header; raise the limit to load it";
  return limit;
}

void check_run_arguments(const PreparedModel& prepared, int64_t batch, const void* input,
                         size_t input_count, const void* output, size_t output_capacity,
                         const char* unit) {
  if (input == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "input is NULL");
  if (output == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "output is NULL");
  if (batch < 1 || batch > prepared.max_batch) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "batch is ", batch, "; it must be 1 to max_batch (",
         prepared.max_batch, ", set in fdnn_model_options)");
  }
  const Plan& plan = *prepared.plan;
  const auto needed_input = static_cast<size_t>(checked_multiply(
      batch, element_count(plan.input_shape), FDNN_STATUS_INVALID_ARGUMENT, "the input count"));
  if (input_count != needed_input) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "input_count is ", input_count, " but batch ", batch,
         " x input shape ", to_string(plan.input_shape), " needs ", needed_input, " ", unit);
  }
  const auto needed_output = static_cast<size_t>(checked_multiply(
      batch, element_count(plan.output_shape), FDNN_STATUS_INVALID_ARGUMENT, "the output count"));
  if (output_capacity < needed_output) {
    fail(FDNN_STATUS_BUFFER_TOO_SMALL, "output_capacity is ", output_capacity, " but batch ", batch,
         " x output shape ", to_string(plan.output_shape), " needs ", needed_output, " ", unit);
  }
}

namespace {

// The GPU reads a device buffer in whole elements: one not aligned to its element's size would
// fault inside a kernel (and leave the CUDA context unusable), so it is refused here.
void check_device_alignment(const void* buffer, fdnn_dtype dtype, const char* name) {
  const size_t bytes = dtype_bytes(dtype);
  const auto address = reinterpret_cast<uintptr_t>(buffer);
  if (address % bytes != 0) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, name, " (", buffer, ") is not aligned to the ", bytes,
         " bytes of its ", dtype_name(dtype), " elements");
  }
}

}  // namespace

Context::Context(std::shared_ptr<const PreparedModel> prepared)
    : prepared_(std::move(prepared)), execution_(prepared_->backend->create_context()) {}

void Context::run(int64_t batch, const float* input, size_t input_count, float* output,
                  size_t output_capacity) {
  check_run_arguments(*prepared_, batch, input, input_count, output, output_capacity);
  execution_->run_host(batch, input, output);
}

void Context::run_device(int64_t batch, const float* input, size_t input_count, float* output,
                         size_t output_capacity, void* stream) {
  check_run_arguments(*prepared_, batch, input, input_count, output, output_capacity);
  check_device_alignment(input, FDNN_DTYPE_FLOAT32, "device_input");
  check_device_alignment(output, FDNN_DTYPE_FLOAT32, "device_output");
  execution_->run_device(batch, input, output, stream);
}

void Context::check_typed(const TypedRun& run) const {
  if (run.input == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "input is NULL");
  if (run.output == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "output is NULL");
  check_run_arguments(*prepared_, run.batch, run.input, run.input_count, run.output,
                      run.output_capacity, "elements");
}

void Context::run_typed(const TypedRun& run) {
  check_typed(run);
  if (run.input_dtype == FDNN_DTYPE_FLOAT32 && run.output_dtype == FDNN_DTYPE_FLOAT32) {
    execution_->run_host(run.batch, static_cast<const float*>(run.input),
                         static_cast<float*>(run.output));
    return;
  }
  if (execution_->run_host_typed(run.batch, run.input, run.input_dtype, run.output,
                                 run.output_dtype)) {
    return;
  }
  // The backend runs on the caller's memory (the CPU): convert around its float32 run, in
  // buffers sized for max_batch once, so that later runs allocate nothing.
  const Plan& plan = *prepared_->plan;
  // check_typed has checked that these products fit.
  const auto input_count = static_cast<size_t>(run.batch * element_count(plan.input_shape));
  const auto output_count = static_cast<size_t>(run.batch * element_count(plan.output_shape));
  const auto for_max_batch = [&](const Shape& shape) {
    return static_cast<size_t>(checked_multiply(prepared_->max_batch, element_count(shape),
                                                FDNN_STATUS_OUT_OF_MEMORY,
                                                "the conversion buffer for options.max_batch"));
  };
  const float* input = static_cast<const float*>(run.input);
  if (run.input_dtype != FDNN_DTYPE_FLOAT32) {
    if (typed_input_.empty()) {
      typed_input_.resize(for_max_batch(plan.input_shape));
    }
    widen_to_float(run.input, run.input_dtype, typed_input_.data(), input_count);
    input = typed_input_.data();
  }
  float* output = static_cast<float*>(run.output);
  if (run.output_dtype != FDNN_DTYPE_FLOAT32) {
    if (typed_output_.empty()) {
      typed_output_.resize(for_max_batch(plan.output_shape));
    }
    output = typed_output_.data();
  }
  execution_->run_host(run.batch, input, output);
  if (run.output_dtype != FDNN_DTYPE_FLOAT32) {
    narrow_from_float(output, run.output, run.output_dtype, output_count);
  }
}

void Context::run_device_typed(const TypedRun& run, void* stream) {
  check_typed(run);
  check_device_alignment(run.input, run.input_dtype, "device_input");
  check_device_alignment(run.output, run.output_dtype, "device_output");
  if (run.input_dtype == FDNN_DTYPE_FLOAT32 && run.output_dtype == FDNN_DTYPE_FLOAT32) {
    execution_->run_device(run.batch, static_cast<const float*>(run.input),
                           static_cast<float*>(run.output), stream);
    return;
  }
  execution_->run_device_typed(run.batch, run.input, run.input_dtype, run.output, run.output_dtype,
                               stream);
}

Model::Model(ModelFile file, const ResolvedOptions& options)
    : Model(std::move(file.graph), options) {
  if (file.bundled_weights) accept_weights(std::move(*file.bundled_weights));
}

Model::Model(Graph graph, const ResolvedOptions& options)
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

void Model::check_limits(const Backend& backend) const {
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

void Model::require_mutable() const {
  if (prepared_) {
    fail(FDNN_STATUS_INVALID_STATE, "the weights of model '", graph_.name,
         "' are frozen: it has run or has a context; create a new model to change them");
  }
}

void Model::load_weights(const std::string& path) {
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

void Model::accept_weights(std::vector<NamedTensor> tensors) {
  require_mutable();
  weights_.accept(std::move(tensors));
}

void Model::set_weight(const std::string& name, int32_t dtype, const void* data,
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

void Model::validate() const {
  weights_.require_complete();
  weights_.require_finite();
}

std::shared_ptr<const PreparedModel> Model::make_prepared(const WeightStore& weights) const {
  FDNN_LOAD_STAMP("prepare: start");
  auto prepared = std::make_shared<PreparedModel>();
  prepared->plan = std::make_shared<const Plan>(build_plan(graph_, weights));
  FDNN_LOAD_STAMP("prepare: plan built");
  prepared->max_batch = options_.max_batch;
  if (options_.device == FDNN_DEVICE_CUDA) {
    prepared->backend = make_cuda_backend(prepared->plan, options_.max_batch, options_.device_id,
                                          options_.cuda_graphs, options_.precision);
  } else {
    prepared->backend = make_cpu_backend(prepared->plan, options_.max_batch, options_.cpu_threads);
  }
  FDNN_LOAD_STAMP("prepare: backend built");
  return prepared;
}

Model::BackendFacts Model::backend_facts() const {
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

std::string Model::explain(int64_t batch, ExplanationFormat format) const {
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

std::shared_ptr<const PreparedModel> Model::prepare() {
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
void Model::with_pooled_context(Body&& body) {
  std::unique_ptr<Context> context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_contexts_.empty()) {
      context = std::move(idle_contexts_.back());
      idle_contexts_.pop_back();
    }
  }
  if (!context) context = std::make_unique<Context>(prepare());
  // The context goes back to the pool whether or not the run succeeds.
  struct ReturnToPool {
    Model& model;
    std::unique_ptr<Context>& context;
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

void Model::run(int64_t batch, const float* input, size_t input_count, float* output,
                size_t output_capacity) {
  with_pooled_context(
      [&](Context& context) { context.run(batch, input, input_count, output, output_capacity); });
}

void Model::run_typed(const TypedRun& run) {
  with_pooled_context([&](Context& context) { context.run_typed(run); });
}

}  // namespace fusednn
