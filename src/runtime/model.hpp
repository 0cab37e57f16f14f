// A model as the C API sees it: graph and weights until the first run, then a frozen plan on a
// backend, shared by every execution context (contexts keep it alive after the model is gone).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "common/precision.hpp"
#include "graph/graph.hpp"
#include "graph/model_file.hpp"
#include "graph/weight_store.hpp"
#include "planner/plan.hpp"

namespace fusednn {

enum class ExplanationFormat;  // plan_explanation.hpp

// Options with defaults applied and the device resolved.
struct ResolvedOptions {
  int64_t max_batch = 1024;
  fdnn_device device = FDNN_DEVICE_CPU;
  int32_t device_id = 0;
  int32_t cpu_threads = 0;
  bool cuda_graphs = true;
  Precision precision = Precision::FP32;  // as asked for: an upper bound on the error
  uint64_t max_workspace_bytes = FDNN_DEFAULT_MAX_WORKSPACE_BYTES;  // 0: no limit
  uint64_t max_weight_bytes = FDNN_DEFAULT_MAX_WEIGHT_BYTES;        // 0: no limit
};

// Reads the caller's struct up to its struct_size, checks every field, resolves AUTO.
ResolvedOptions resolve_options(const fdnn_model_options* options);

// The largest safetensors file (a bundle or weights) a load reads under max_weight_bytes: the
// limit plus the header's 100 MiB, which the safetensors format allows at most; 0 (no limit)
// without one. WeightFileLimit::text names the option for messages.
struct WeightFileLimit {
  uint64_t bytes = 0;
  std::string text;
};
WeightFileLimit weight_file_limit(const ResolvedOptions& options);

// What runs: the plan and the backend holding its weights. Immutable, so shared freely.
struct PreparedModel {
  std::shared_ptr<const Plan> plan;
  std::unique_ptr<Backend> backend;
  int64_t max_batch = 0;
};

// Checks a run's arguments against the plan; throws INVALID_ARGUMENT or BUFFER_TOO_SMALL.
// `unit` names what the counts count in messages ("floats" for the float32 calls).
void check_run_arguments(const PreparedModel& prepared, int64_t batch, const void* input,
                         size_t input_count, const void* output, size_t output_capacity,
                         const char* unit = "floats");

// The caller's run arguments in their dtypes (the typed calls); the C API has checked that the
// dtypes are fdnn_dtype values (checked_dtype), the runtime checks the rest.
struct TypedRun {
  int64_t batch = 0;
  const void* input = nullptr;
  fdnn_dtype input_dtype = FDNN_DTYPE_FLOAT32;
  size_t input_count = 0;
  void* output = nullptr;
  fdnn_dtype output_dtype = FDNN_DTYPE_FLOAT32;
  size_t output_capacity = 0;
};

class Context {
 public:
  explicit Context(std::shared_ptr<const PreparedModel> prepared);
  void run(int64_t batch, const float* input, size_t input_count, float* output,
           size_t output_capacity);
  void run_device(int64_t batch, const float* input, size_t input_count, float* output,
                  size_t output_capacity, void* stream);
  // FLOAT32 both ways is run() / run_device(); otherwise the input is widened to float32 and the
  // output narrowed from it (by the backend while staging, or here in typed_input_ /
  // typed_output_, allocated for max_batch by the first run that needs each).
  void run_typed(const TypedRun& run);
  void run_device_typed(const TypedRun& run, void* stream);

 private:
  void check_typed(const TypedRun& run) const;

  std::shared_ptr<const PreparedModel> prepared_;
  std::unique_ptr<ExecutionContext> execution_;
  std::vector<float> typed_input_;
  std::vector<float> typed_output_;
};

class Model {
 public:
  // Throws OUT_OF_MEMORY when the declared weights exceed options.max_weight_bytes.
  Model(Graph graph, const ResolvedOptions& options);
  // A parsed model file: its graph, and its weights when the file is a bundle.
  Model(ModelFile file, const ResolvedOptions& options);

  // A .safetensors file or a directory of .bin / .txt files.
  void load_weights(const std::string& path);
  void accept_weights(std::vector<NamedTensor> tensors);
  // dtype is an fdnn_dtype value as the caller passed it (checked here).
  void set_weight(const std::string& name, int32_t dtype, const void* data, const Shape& shape);
  void validate() const;

  const Graph& graph() const { return graph_; }
  const ResolvedOptions& options() const { return options_; }
  // What the backend reports of itself: its memory and the precision it actually runs in.
  struct BackendFacts {
    size_t weight_bytes = 0;
    size_t context_bytes = 0;
    Precision precision = Precision::FP32;
    double flops_per_sample = 0;  // plan_cost's
    double bytes_per_sample = 0;
  };
  // Known before the weights are loaded; they depend only on the graph and the options, so they
  // are worked out once (a GPU model would otherwise upload its weights on every query).
  BackendFacts backend_facts() const;

  // How a run of `batch` samples would go (plan_explanation.hpp). Before the first run (even
  // before the weights are loaded) it sets up a plan and backend of its own for the query, as
  // backend_facts() does, and freezes nothing. Throws INVALID_ARGUMENT for a batch outside
  // 1..max_batch.
  std::string explain(int64_t batch, ExplanationFormat format) const;

  // Freezes the weights on first use and returns the shared plan and backend.
  std::shared_ptr<const PreparedModel> prepare();
  // Thread-safe: borrows a context from the pool (creating one when all are busy).
  void run(int64_t batch, const float* input, size_t input_count, float* output,
           size_t output_capacity);
  void run_typed(const TypedRun& run);

 private:
  // Runs body(Context&) on a context borrowed from the pool and returned to it afterwards.
  template <typename Body>
  void with_pooled_context(Body&& body);
  void require_mutable() const;
  std::shared_ptr<const PreparedModel> make_prepared(const WeightStore& weights) const;
  // The caller's limits (options.max_workspace_bytes, max_weight_bytes) against what the backend
  // needs; checked before any context allocates its scratch. Throws OUT_OF_MEMORY naming them.
  void check_limits(const Backend& backend) const;

  Graph graph_;
  ResolvedOptions options_;
  WeightStore weights_;
  mutable std::mutex mutex_;  // guards prepared_ and idle_contexts_
  std::shared_ptr<const PreparedModel> prepared_;
  std::vector<std::unique_ptr<Context>> idle_contexts_;
  mutable std::optional<BackendFacts> backend_facts_;  // guarded by mutex_
};

}  // namespace fusednn
