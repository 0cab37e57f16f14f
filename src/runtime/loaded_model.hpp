// SPDX-License-Identifier: Apache-2.0
// A model as the C API holds it (behind fdnn_model): its graph, options and weights, which
// accept changes until the first run or context; then frozen into a PreparedModel shared by
// every RunContext (contexts keep it alive after the model is gone), with a pool of contexts
// for fdnn_model_run.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/precision.hpp"
#include "common/shape.hpp"
#include "graph/graph.hpp"
#include "graph/model_file.hpp"
#include "graph/weight_store.hpp"
#include "runtime/prepared_model.hpp"
#include "runtime/resolved_options.hpp"
#include "runtime/run_context.hpp"

namespace fusednn {

enum class ExplanationFormat;  // plan_explanation.hpp

// One layer as fdnn_model_layer_info reports it; the strings live as long as the model.
struct LayerSummary {
  const char* name = nullptr;
  const char* type = nullptr;
  Shape output_shape;
  int64_t parameter_count = 0;
};

class LoadedModel {
 public:
  // Throws OUT_OF_MEMORY when the declared weights exceed options.max_weight_bytes.
  LoadedModel(Graph graph, const ResolvedOptions& options);
  // A parsed model file: its graph, and its weights when the file is a bundle.
  LoadedModel(ModelFile file, const ResolvedOptions& options);

  // A .safetensors file or a directory of .bin / .txt files.
  void load_weights(const std::string& path);
  void accept_weights(std::vector<NamedTensor> tensors);
  // dtype is an fdnn_dtype value as the caller passed it (checked here).
  void set_weight(const std::string& name, int32_t dtype, const void* data, const Shape& shape);
  void validate() const;

  const Shape& input_shape() const { return graph_.input_shape; }
  const Shape& output_shape() const { return graph_.output_shape(); }
  int64_t parameter_count() const { return graph_.parameter_count(); }
  size_t layer_count() const { return graph_.layers.size(); }
  // index is below layer_count() (checked by the caller).
  LayerSummary layer_summary(size_t index) const;
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
  // Runs body(RunContext&) on a context borrowed from the pool and returned to it afterwards.
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
  std::vector<std::unique_ptr<RunContext>> idle_contexts_;
  mutable std::optional<BackendFacts> backend_facts_;  // guarded by mutex_
};

}  // namespace fusednn
