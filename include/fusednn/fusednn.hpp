// SPDX-License-Identifier: Apache-2.0

/**
 * @file fusednn.hpp
 * @brief Header-only C++17 RAII wrapper over the fusednn C API.
 *
 * Every failing call throws fusednn::Error carrying the ::fdnn_status and the library's message.
 * Objects are move-only and release their handle in the destructor. The thread-safety rules are
 * those of the C API (fusednn.h).
 */
#ifndef FUSEDNN_FUSEDNN_HPP
#define FUSEDNN_FUSEDNN_HPP

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"

/** @brief The C++ wrapper's namespace. */
namespace fusednn {

/** @brief A failed fusednn call: the status and the message the library gave. */
class Error : public std::runtime_error {
 public:
  /**
   * @param[in] status The failing call's status.
   * @param[in] message The library's message for it.
   */
  Error(fdnn_status status, const std::string& message)
      : std::runtime_error(std::string(fdnn_status_string(status)) + ": " + message),
        status_(status) {}
  /** @return The status the failing call returned. */
  fdnn_status status() const noexcept { return status_; }

 private:
  fdnn_status status_;
};

/**
 * @brief Throws fusednn::Error with this thread's last message when status is not OK.
 * @param[in] status A status returned by a fusednn C call.
 */
inline void check(fdnn_status status) {
  if (status != FDNN_STATUS_OK) throw Error(status, fdnn_last_error_message());
}

/** @brief A per-sample shape as a vector of extents (batch not included). */
using Shape = std::vector<int64_t>;

/** @brief Options for Model; a thin builder over ::fdnn_model_options. */
class ModelOptions {
 public:
  /** Defaults from fdnn_model_options_init(). */
  ModelOptions() { fdnn_model_options_init(&options_, sizeof options_); }
  /** @param[in] max_batch Largest batch a run may use. @return *this. */
  ModelOptions& max_batch(int64_t max_batch) {
    options_.max_batch = max_batch;
    return *this;
  }
  /** @param[in] device Where to run. @param[in] device_id GPU ordinal. @return *this. */
  ModelOptions& device(fdnn_device device, int32_t device_id = 0) {
    options_.device = device;
    options_.device_id = device_id;
    return *this;
  }
  /** @param[in] threads Threads one CPU run may use (0 = hardware threads). @return *this. */
  ModelOptions& cpu_threads(int32_t threads) {
    options_.cpu_threads = threads;
    return *this;
  }
  /**
   * @param[in] precision The least precise arithmetic the model may use (see ::fdnn_precision
   *            for the accuracy contract; the CPU always runs in fp32). @return *this.
   */
  ModelOptions& precision(fdnn_precision precision) {
    options_.precision = precision;
    return *this;
  }
  /**
   * @param[in] bytes The most scratch memory one execution context may take
   *            (fdnn_model_options::max_workspace_bytes; 0: no limit). @return *this.
   */
  ModelOptions& max_workspace_bytes(uint64_t bytes) {
    options_.max_workspace_bytes = bytes;
    return *this;
  }
  /**
   * @param[in] bytes The most memory the model's weights may take
   *            (fdnn_model_options::max_weight_bytes; 0: no limit). @return *this.
   */
  ModelOptions& max_weight_bytes(uint64_t bytes) {
    options_.max_weight_bytes = bytes;
    return *this;
  }
  /**
   * @param[in] host_io How a GPU model's host-buffer runs move the input and output
   *            (fdnn_model_options::host_io, see ::fdnn_host_io). @return *this.
   */
  ModelOptions& host_io(fdnn_host_io host_io) {
    options_.host_io = host_io;
    return *this;
  }
  /** @return The C struct, for fdnn_model_create_*(). */
  const fdnn_model_options* get() const { return &options_; }

 private:
  fdnn_model_options options_;
};

/** @brief An execution context: one thread's scratch memory for runs (see ::fdnn_context). */
class Context {
 public:
  /**
   * @brief Wraps a handle from fdnn_context_create() and takes ownership of it.
   * @param[in] handle The context to own.
   */
  explicit Context(fdnn_context* handle) : handle_(handle) {}

  /**
   * @brief Runs on host buffers (fdnn_context_run()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape floats.
   * @return batch x output-shape floats.
   */
  std::vector<float> run(int64_t batch, const std::vector<float>& input) {
    std::vector<float> output(output_floats_per_sample_ *
                              static_cast<size_t>(batch > 0 ? batch : 0));
    run(batch, input.data(), input.size(), output.data(), output.size());
    return output;
  }

  /**
   * @brief Runs into a caller's buffer (fdnn_context_run()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape floats.
   * @param[in] input_count Number of floats in input.
   * @param[out] output Receives batch x output-shape floats.
   * @param[in] output_capacity Number of floats output can hold.
   */
  void run(int64_t batch, const float* input, size_t input_count, float* output,
           size_t output_capacity) {
    check(fdnn_context_run(handle_.get(), batch, input, input_count, output, output_capacity));
  }

  /**
   * @brief Runs on 16-bit host buffers (fdnn_context_run_typed()); the output has the input's
   *        dtype.
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape elements of `dtype`, as their bits.
   * @param[in] dtype ::FDNN_DTYPE_FLOAT16 or ::FDNN_DTYPE_BFLOAT16.
   * @return batch x output-shape elements of `dtype`, as their bits.
   */
  std::vector<uint16_t> run(int64_t batch, const std::vector<uint16_t>& input, fdnn_dtype dtype) {
    std::vector<uint16_t> output(output_floats_per_sample_ *
                                 static_cast<size_t>(batch > 0 ? batch : 0));
    run(batch, input.data(), dtype, input.size(), output.data(), dtype, output.size());
    return output;
  }

  /**
   * @brief Runs on host buffers in any dtypes (fdnn_context_run_typed()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape elements of input_dtype.
   * @param[in] input_dtype The element type of input.
   * @param[in] input_count Number of elements in input.
   * @param[out] output Receives batch x output-shape elements of output_dtype.
   * @param[in] output_dtype The element type of output.
   * @param[in] output_capacity Number of elements output can hold.
   */
  void run(int64_t batch, const void* input, fdnn_dtype input_dtype, size_t input_count,
           void* output, fdnn_dtype output_dtype, size_t output_capacity) {
    check(fdnn_context_run_typed(handle_.get(), batch, input, input_dtype, input_count, output,
                                 output_dtype, output_capacity));
  }

  /**
   * @return How this context's host-buffer runs move the data: ::FDNN_HOST_IO_STAGED or
   *         ::FDNN_HOST_IO_MAPPED (fdnn_context_host_io(); throws for a model on the CPU).
   */
  fdnn_host_io host_io() const {
    fdnn_host_io value = FDNN_HOST_IO_STAGED;
    check(fdnn_context_host_io(handle_.get(), &value));
    return value;
  }

  /** @return The C handle, still owned by this object. */
  fdnn_context* get() const { return handle_.get(); }

 private:
  friend class Model;
  struct Destroy {
    void operator()(fdnn_context* context) const { fdnn_context_destroy(context); }
  };
  std::unique_ptr<fdnn_context, Destroy> handle_;
  size_t output_floats_per_sample_ = 0;
};

/** @brief A model (see ::fdnn_model). */
class Model {
 public:
  /**
   * @brief Creates a model from a JSON spec or a bundle (fdnn_model_create_from_file()).
   * @param[in] path The file.
   * @param[in] options Options; defaults when omitted.
   * @return The model.
   */
  static Model from_file(const std::string& path, const ModelOptions& options = ModelOptions()) {
    fdnn_model* handle = nullptr;
    check(fdnn_model_create_from_file(path.c_str(), options.get(), &handle));
    return Model(handle);
  }

  /**
   * @brief Creates a model from a bundle's (or spec's) bytes in memory
   * (fdnn_model_create_from_memory()); the bytes are copied, so they may be freed afterwards.
   * @param[in] data The file's bytes.
   * @param[in] size Their length in bytes.
   * @param[in] options Options; defaults when omitted.
   * @return The model.
   */
  static Model from_memory(const void* data, size_t size,
                           const ModelOptions& options = ModelOptions()) {
    fdnn_model* handle = nullptr;
    check(fdnn_model_create_from_memory(data, size, options.get(), &handle));
    return Model(handle);
  }

  /**
   * @brief Creates a model from a spec in memory (fdnn_model_create_from_spec()).
   * @param[in] spec_json The spec text.
   * @param[in] options Options; defaults when omitted.
   * @return The model.
   */
  static Model from_spec(const std::string& spec_json,
                         const ModelOptions& options = ModelOptions()) {
    fdnn_model* handle = nullptr;
    check(fdnn_model_create_from_spec(spec_json.data(), spec_json.size(), options.get(), &handle));
    return Model(handle);
  }

  /**
   * @brief Loads weights from a file or directory (fdnn_model_load_weights()).
   * @param[in] path A .safetensors file or a directory of .bin / .txt files.
   */
  void load_weights(const std::string& path) {
    check(fdnn_model_load_weights(handle_.get(), path.c_str()));
  }

  /**
   * @brief Sets one float32 tensor from caller memory (fdnn_model_set_weight()).
   * @param[in] name The tensor's state_dict name.
   * @param[in] values Its elements in C order.
   * @param[in] shape Its extents.
   */
  void set_weight(const std::string& name, const std::vector<float>& values, const Shape& shape) {
    check(fdnn_model_set_weight(handle_.get(), name.c_str(), FDNN_DTYPE_FLOAT32, values.data(),
                                shape.data(), static_cast<int32_t>(shape.size())));
  }

  /** @brief Checks all weights are present and finite (fdnn_model_validate()). */
  void validate() const { check(fdnn_model_validate(handle_.get())); }

  /** @return The per-sample input shape. */
  Shape input_shape() const { return query_shape(&fdnn_model_input_shape); }
  /** @return The per-sample output shape. */
  Shape output_shape() const { return query_shape(&fdnn_model_output_shape); }

  /** @return The largest batch a run accepts. */
  int64_t max_batch() const {
    int64_t value = 0;
    check(fdnn_model_max_batch(handle_.get(), &value));
    return value;
  }

  /** @return The device the model runs on. */
  fdnn_device device() const {
    fdnn_device value = FDNN_DEVICE_CPU;
    check(fdnn_model_device(handle_.get(), &value));
    return value;
  }

  /** @return The precision the model runs in (fp32 on the CPU, whatever was asked). */
  fdnn_precision precision() const {
    fdnn_precision value = FDNN_PRECISION_FP32;
    check(fdnn_model_precision(handle_.get(), &value));
    return value;
  }

  /** @return Parameter count and memory figures. */
  fdnn_memory_info memory_info() const {
    fdnn_memory_info info{};
    info.struct_size = sizeof info;
    check(fdnn_model_memory_info(handle_.get(), &info));
    return info;
  }

  /**
   * @brief How a run of `batch` samples would go, step by step (fdnn_model_explain()).
   * @param batch The batch size to explain, 1 to max_batch().
   * @param format ::FDNN_EXPLAIN_FORMAT_JSON (a JSON document) or ::FDNN_EXPLAIN_FORMAT_TEXT
   *        (a table).
   * @return The document, without its terminating NUL.
   */
  std::string explain(int64_t batch, fdnn_explain_format format = FDNN_EXPLAIN_FORMAT_JSON) const {
    size_t size = 0;
    check(fdnn_model_explain(handle_.get(), batch, format, nullptr, 0, &size));
    std::string document(size, '\0');
    check(
        fdnn_model_explain(handle_.get(), batch, format, document.data(), document.size(), &size));
    document.resize(size - 1);
    return document;
  }

  /** @return One entry per layer of the spec. */
  std::vector<fdnn_layer_info> layers() const {
    int32_t count = 0;
    check(fdnn_model_layer_count(handle_.get(), &count));
    std::vector<fdnn_layer_info> result(static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) {
      result[i].struct_size = sizeof(fdnn_layer_info);
      check(fdnn_model_layer_info(handle_.get(), i, &result[i]));
    }
    return result;
  }

  /**
   * @brief Runs on host buffers; thread-safe (fdnn_model_run()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape floats.
   * @return batch x output-shape floats.
   */
  std::vector<float> run(int64_t batch, const std::vector<float>& input) {
    std::vector<float> output(output_floats_per_sample() *
                              static_cast<size_t>(batch > 0 ? batch : 0));
    run(batch, input.data(), input.size(), output.data(), output.size());
    return output;
  }

  /**
   * @brief Runs into a caller's buffer; thread-safe (fdnn_model_run()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape floats.
   * @param[in] input_count Number of floats in input.
   * @param[out] output Receives batch x output-shape floats.
   * @param[in] output_capacity Number of floats output can hold.
   */
  void run(int64_t batch, const float* input, size_t input_count, float* output,
           size_t output_capacity) {
    check(fdnn_model_run(handle_.get(), batch, input, input_count, output, output_capacity));
  }

  /**
   * @brief Runs on 16-bit host buffers; thread-safe (fdnn_model_run_typed()). The output has the
   *        input's dtype.
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape elements of `dtype`, as their bits.
   * @param[in] dtype ::FDNN_DTYPE_FLOAT16 or ::FDNN_DTYPE_BFLOAT16.
   * @return batch x output-shape elements of `dtype`, as their bits.
   */
  std::vector<uint16_t> run(int64_t batch, const std::vector<uint16_t>& input, fdnn_dtype dtype) {
    std::vector<uint16_t> output(output_floats_per_sample() *
                                 static_cast<size_t>(batch > 0 ? batch : 0));
    run(batch, input.data(), dtype, input.size(), output.data(), dtype, output.size());
    return output;
  }

  /**
   * @brief Runs on host buffers in any dtypes; thread-safe (fdnn_model_run_typed()).
   * @param[in] batch Number of samples.
   * @param[in] input batch x input-shape elements of input_dtype.
   * @param[in] input_dtype The element type of input.
   * @param[in] input_count Number of elements in input.
   * @param[out] output Receives batch x output-shape elements of output_dtype.
   * @param[in] output_dtype The element type of output.
   * @param[in] output_capacity Number of elements output can hold.
   */
  void run(int64_t batch, const void* input, fdnn_dtype input_dtype, size_t input_count,
           void* output, fdnn_dtype output_dtype, size_t output_capacity) {
    check(fdnn_model_run_typed(handle_.get(), batch, input, input_dtype, input_count, output,
                               output_dtype, output_capacity));
  }

  /** @return A new execution context for one thread (fdnn_context_create()). */
  Context create_context() {
    fdnn_context* handle = nullptr;
    check(fdnn_context_create(handle_.get(), &handle));
    Context context(handle);
    context.output_floats_per_sample_ = output_floats_per_sample();
    return context;
  }

  /** @return The C handle, still owned by this object. */
  fdnn_model* get() const { return handle_.get(); }

 private:
  explicit Model(fdnn_model* handle) : handle_(handle) {}

  Shape query_shape(fdnn_status (*query)(const fdnn_model*, fdnn_shape*)) const {
    fdnn_shape shape{};
    check(query(handle_.get(), &shape));
    Shape result;
    result.reserve(static_cast<size_t>(shape.rank));
    for (int32_t i = 0; i < shape.rank; ++i) result.push_back(shape.dims[i]);
    return result;
  }

  size_t output_floats_per_sample() const {
    size_t count = 1;
    for (int64_t extent : output_shape()) count *= static_cast<size_t>(extent);
    return count;
  }

  struct Destroy {
    void operator()(fdnn_model* model) const { fdnn_model_destroy(model); }
  };
  std::unique_ptr<fdnn_model, Destroy> handle_;
};

}  // namespace fusednn

#endif  // FUSEDNN_FUSEDNN_HPP
