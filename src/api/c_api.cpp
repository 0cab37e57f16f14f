// SPDX-License-Identifier: Apache-2.0
// The extern "C" surface: argument checks, handle plumbing and the exception firewall only; the
// work is in src/runtime.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "api/firewall.hpp"
#include "api/handles.hpp"
#include "common/caller_dtype.hpp"
#include "common/raw_enum.hpp"
#include "fusednn/fusednn.h"
#include "runtime/model_source.hpp"
#include "runtime/plan_explanation.hpp"
#include "runtime/resolved_options.hpp"

using fusednn::fail;
using fusednn::guarded;
using fusednn::require_non_null;

namespace {

void to_c_shape(const fusednn::Shape& shape, fdnn_shape* out) {
  fdnn_shape result{};
  result.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < FDNN_MAX_RANK; ++i) result.dims[i] = shape[i];
  *out = result;
}

// Writes a struct_size-versioned struct into the caller's, no further than the caller's size (a
// program built against an older header has a shorter struct). `needed` is the smallest size
// this version accepts.
template <typename T>
void copy_to_caller(const T& result, T* out, size_t caller_size, size_t needed, const char* what) {
  if (caller_size < needed) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, what, " struct_size is ", caller_size, "; set it to sizeof(",
         what, ")");
  }
  std::memcpy(out, &result, std::min(caller_size, sizeof(T)));
}

// The typed calls' arguments, their dtypes checked (read as integers: C may pass any value).
fusednn::TypedRun typed_run(int64_t batch, const void* input, const fdnn_dtype& input_dtype,
                            size_t input_count, void* output, const fdnn_dtype& output_dtype,
                            size_t output_capacity) {
  fusednn::TypedRun run;
  run.batch = batch;
  run.input = input;
  run.input_dtype = fusednn::checked_dtype(input_dtype, "input_dtype");
  run.input_count = input_count;
  run.output = output;
  run.output_dtype = fusednn::checked_dtype(output_dtype, "output_dtype");
  run.output_capacity = output_capacity;
  return run;
}

}  // namespace

extern "C" {

uint32_t fdnn_version(void) { return FDNN_VERSION_NUMBER; }

const char* fdnn_version_string(void) {
#define FDNN_STRINGIFY2(x) #x
#define FDNN_STRINGIFY(x) FDNN_STRINGIFY2(x)
  return FDNN_STRINGIFY(FDNN_VERSION_MAJOR) "." FDNN_STRINGIFY(
      FDNN_VERSION_MINOR) "." FDNN_STRINGIFY(FDNN_VERSION_PATCH);
}

const char* fdnn_status_string(fdnn_status status) {
  switch (fusednn::raw_enum_value(status)) {
    case FDNN_STATUS_OK: return "FDNN_STATUS_OK";
    case FDNN_STATUS_INVALID_ARGUMENT: return "FDNN_STATUS_INVALID_ARGUMENT";
    case FDNN_STATUS_IO_ERROR: return "FDNN_STATUS_IO_ERROR";
    case FDNN_STATUS_PARSE_ERROR: return "FDNN_STATUS_PARSE_ERROR";
    case FDNN_STATUS_INVALID_MODEL: return "FDNN_STATUS_INVALID_MODEL";
    case FDNN_STATUS_WEIGHT_MISMATCH: return "FDNN_STATUS_WEIGHT_MISMATCH";
    case FDNN_STATUS_INVALID_STATE: return "FDNN_STATUS_INVALID_STATE";
    case FDNN_STATUS_BUFFER_TOO_SMALL: return "FDNN_STATUS_BUFFER_TOO_SMALL";
    case FDNN_STATUS_OUT_OF_MEMORY: return "FDNN_STATUS_OUT_OF_MEMORY";
    case FDNN_STATUS_UNSUPPORTED: return "FDNN_STATUS_UNSUPPORTED";
    case FDNN_STATUS_NON_FINITE_WEIGHT: return "FDNN_STATUS_NON_FINITE_WEIGHT";
    case FDNN_STATUS_DEVICE_ERROR: return "FDNN_STATUS_DEVICE_ERROR";
    case FDNN_STATUS_INTERNAL_ERROR: return "FDNN_STATUS_INTERNAL_ERROR";
  }
  return "FDNN_STATUS_UNKNOWN";
}

const char* fdnn_last_error_message(void) { return fusednn::last_error_message(); }

fdnn_status fdnn_cuda_device_count(int32_t* count) {
  return guarded(__func__,
                 [&] { *require_non_null(count, "count") = fusednn::usable_cuda_device_count(); });
}

fdnn_status fdnn_model_options_init(fdnn_model_options* options, size_t struct_size) {
  return guarded(__func__, [&] {
    require_non_null(options, "options");
    fdnn_model_options defaults = fusednn::default_model_options();
    defaults.struct_size = std::min(struct_size, sizeof defaults);
    copy_to_caller(defaults, options, struct_size,
                   offsetof(fdnn_model_options, max_batch) + sizeof(int64_t), "fdnn_model_options");
  });
}

fdnn_status fdnn_model_create_from_file(const char* path, const fdnn_model_options* options,
                                        fdnn_model** model) {
  return guarded(__func__, [&] {
    require_non_null(path, "path");
    require_non_null(model, "model");
    const fusednn::ResolvedOptions resolved = fusednn::resolve_options(options);
    *model = new fdnn_model{fusednn::load_model_from_file(path, resolved)};
  });
}

fdnn_status fdnn_model_create_from_memory(const void* data, size_t size,
                                          const fdnn_model_options* options, fdnn_model** model) {
  return guarded(__func__, [&] {
    require_non_null(data, "data");
    require_non_null(model, "model");
    const fusednn::ResolvedOptions resolved = fusednn::resolve_options(options);
    const std::string bytes(static_cast<const char*>(data), size);
    *model = new fdnn_model{fusednn::load_model_from_bytes(bytes, resolved)};
  });
}

fdnn_status fdnn_model_create_from_spec(const char* spec_json, size_t spec_length,
                                        const fdnn_model_options* options, fdnn_model** model) {
  return guarded(__func__, [&] {
    require_non_null(spec_json, "spec_json");
    require_non_null(model, "model");
    const fusednn::ResolvedOptions resolved = fusednn::resolve_options(options);
    *model = new fdnn_model{
        fusednn::load_model_from_spec(std::string(spec_json, spec_length), resolved)};
  });
}

void fdnn_model_destroy(fdnn_model* model) { delete model; }

fdnn_status fdnn_model_load_weights(fdnn_model* model, const char* path) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(path, "path");
    model->model.load_weights(path);
  });
}

fdnn_status fdnn_model_set_weight(fdnn_model* model, const char* name, fdnn_dtype dtype,
                                  const void* data, const int64_t* shape, int32_t rank) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(name, "name");
    require_non_null(data, "data");
    if (rank < 0 || rank > FDNN_MAX_RANK) {
      fail(FDNN_STATUS_INVALID_ARGUMENT, "rank of tensor '", name, "' is ", rank,
           "; it must be 0 to ", FDNN_MAX_RANK);
    }
    if (rank > 0) require_non_null(shape, "shape");
    fusednn::Shape dims(shape, shape + rank);
    for (int64_t extent : dims) {
      if (extent < 0) {
        fail(FDNN_STATUS_INVALID_ARGUMENT, "shape ", fusednn::to_string(dims), " of tensor '", name,
             "' has a negative extent");
      }
    }
    model->model.set_weight(name, fusednn::raw_enum_value(dtype), data, dims);
  });
}

fdnn_status fdnn_model_validate(const fdnn_model* model) {
  return guarded(__func__, [&] { require_non_null(model, "model")->model.validate(); });
}

fdnn_status fdnn_model_input_shape(const fdnn_model* model, fdnn_shape* shape) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    to_c_shape(model->model.input_shape(), require_non_null(shape, "shape"));
  });
}

fdnn_status fdnn_model_output_shape(const fdnn_model* model, fdnn_shape* shape) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    to_c_shape(model->model.output_shape(), require_non_null(shape, "shape"));
  });
}

fdnn_status fdnn_model_max_batch(const fdnn_model* model, int64_t* max_batch) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    *require_non_null(max_batch, "max_batch") = model->model.options().max_batch;
  });
}

fdnn_status fdnn_model_device(const fdnn_model* model, fdnn_device* device) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    *require_non_null(device, "device") = model->model.options().device;
  });
}

fdnn_status fdnn_model_precision(const fdnn_model* model, fdnn_precision* precision) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(precision, "precision");
    *precision = static_cast<fdnn_precision>(model->model.backend_facts().precision);
  });
}

fdnn_status fdnn_model_memory_info(const fdnn_model* model, fdnn_memory_info* info) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(info, "info");
    fdnn_memory_info result{};
    result.struct_size = info->struct_size;
    result.parameter_count = model->model.parameter_count();
    const fusednn::LoadedModel::BackendFacts facts = model->model.backend_facts();
    result.weight_bytes = facts.weight_bytes;
    result.context_bytes = facts.context_bytes;
    result.flops_per_sample = facts.flops_per_sample;
    result.bytes_per_sample = facts.bytes_per_sample;
    copy_to_caller(result, info, info->struct_size,
                   offsetof(fdnn_memory_info, context_bytes) + sizeof(size_t), "fdnn_memory_info");
  });
}

fdnn_status fdnn_model_layer_count(const fdnn_model* model, int32_t* count) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    *require_non_null(count, "count") = static_cast<int32_t>(model->model.layer_count());
  });
}

fdnn_status fdnn_model_layer_info(const fdnn_model* model, int32_t index, fdnn_layer_info* info) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(info, "info");
    const size_t layer_count = model->model.layer_count();
    if (index < 0 || static_cast<size_t>(index) >= layer_count) {
      fail(FDNN_STATUS_INVALID_ARGUMENT, "index is ", index, "; the model has ", layer_count,
           " layers");
    }
    const fusednn::LayerSummary layer = model->model.layer_summary(static_cast<size_t>(index));
    fdnn_layer_info result{};
    result.struct_size = info->struct_size;
    result.name = layer.name;
    result.type = layer.type;
    to_c_shape(layer.output_shape, &result.output_shape);
    result.parameter_count = layer.parameter_count;
    copy_to_caller(result, info, info->struct_size,
                   offsetof(fdnn_layer_info, parameter_count) + sizeof(int64_t), "fdnn_layer_info");
  });
}

fdnn_status fdnn_model_explain(const fdnn_model* model, int64_t batch, fdnn_explain_format format,
                               char* buffer, size_t buffer_capacity, size_t* size) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(size, "size");
    if (buffer == nullptr && buffer_capacity != 0) {
      fail(FDNN_STATUS_INVALID_ARGUMENT, "buffer is NULL but buffer_capacity is ", buffer_capacity,
           "; pass a buffer, or 0 to ask for the size");
    }
    fusednn::ExplanationFormat chosen = fusednn::ExplanationFormat::Json;
    switch (fusednn::raw_enum_value(format)) {
      case FDNN_EXPLAIN_FORMAT_JSON: break;
      case FDNN_EXPLAIN_FORMAT_TEXT: chosen = fusednn::ExplanationFormat::Text; break;
      default:
        fail(FDNN_STATUS_INVALID_ARGUMENT, "format has unknown value ",
             fusednn::raw_enum_value(format),
             "; use FDNN_EXPLAIN_FORMAT_JSON or FDNN_EXPLAIN_FORMAT_TEXT");
    }
    const std::string document = model->model.explain(batch, chosen);
    const size_t needed = document.size() + 1;
    if (buffer == nullptr) {
      *size = needed;
      return;
    }
    if (buffer_capacity < needed) {
      *size = needed;
      fail(FDNN_STATUS_BUFFER_TOO_SMALL, "buffer_capacity is ", buffer_capacity,
           " but the explanation needs ", needed, " bytes (its NUL included)");
    }
    std::memcpy(buffer, document.c_str(), needed);
    *size = needed;
  });
}

fdnn_status fdnn_model_run(fdnn_model* model, int64_t batch, const float* input, size_t input_count,
                           float* output, size_t output_capacity) {
  return guarded(__func__, [&] {
    require_non_null(model, "model")->model.run(batch, input, input_count, output, output_capacity);
  });
}

fdnn_status fdnn_model_run_typed(fdnn_model* model, int64_t batch, const void* input,
                                 fdnn_dtype input_dtype, size_t input_count, void* output,
                                 fdnn_dtype output_dtype, size_t output_capacity) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    model->model.run_typed(
        typed_run(batch, input, input_dtype, input_count, output, output_dtype, output_capacity));
  });
}

fdnn_status fdnn_context_create(fdnn_model* model, fdnn_context** context) {
  return guarded(__func__, [&] {
    require_non_null(model, "model");
    require_non_null(context, "context");
    *context = new fdnn_context{fusednn::RunContext(model->model.prepare())};
  });
}

void fdnn_context_destroy(fdnn_context* context) { delete context; }

fdnn_status fdnn_context_run(fdnn_context* context, int64_t batch, const float* input,
                             size_t input_count, float* output, size_t output_capacity) {
  return guarded(__func__, [&] {
    require_non_null(context, "context")
        ->context.run(batch, input, input_count, output, output_capacity);
  });
}

fdnn_status fdnn_context_host_io(const fdnn_context* context, fdnn_host_io* host_io) {
  return guarded(__func__, [&] {
    require_non_null(context, "context");
    require_non_null(host_io, "host_io");
    *host_io = context->context.host_io();
  });
}

fdnn_status fdnn_context_run_device(fdnn_context* context, int64_t batch, const float* device_input,
                                    size_t input_count, float* device_output,
                                    size_t output_capacity, void* cuda_stream) {
  return guarded(__func__, [&] {
    require_non_null(context, "context")
        ->context.run_device(batch, device_input, input_count, device_output, output_capacity,
                             cuda_stream);
  });
}

fdnn_status fdnn_context_run_typed(fdnn_context* context, int64_t batch, const void* input,
                                   fdnn_dtype input_dtype, size_t input_count, void* output,
                                   fdnn_dtype output_dtype, size_t output_capacity) {
  return guarded(__func__, [&] {
    require_non_null(context, "context");
    context->context.run_typed(
        typed_run(batch, input, input_dtype, input_count, output, output_dtype, output_capacity));
  });
}

fdnn_status fdnn_context_run_device_typed(fdnn_context* context, int64_t batch,
                                          const void* device_input, fdnn_dtype input_dtype,
                                          size_t input_count, void* device_output,
                                          fdnn_dtype output_dtype, size_t output_capacity,
                                          void* cuda_stream) {
  return guarded(__func__, [&] {
    require_non_null(context, "context");
    context->context.run_device_typed(typed_run(batch, device_input, input_dtype, input_count,
                                                device_output, output_dtype, output_capacity),
                                      cuda_stream);
  });
}

}  // extern "C"
