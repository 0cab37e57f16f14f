// SPDX-License-Identifier: Apache-2.0

/**
 * @file fusednn.h
 * @brief The fusednn C API: load a small PyTorch-trained network and run it.
 *
 * Everything public is prefixed `fdnn_` / `FDNN_`. Objects are opaque handles created by
 * `fdnn_X_create*` and released by `fdnn_X_destroy`, which accepts NULL. Every fallible call
 * returns an ::fdnn_status; on failure, fdnn_last_error_message() gives a message for the calling
 * thread that names the file, tensor, layer or argument at fault, and output parameters are left
 * untouched.
 *
 * The typical lifecycle:
 * @code
 *   fdnn_model* model = NULL;
 *   if (fdnn_model_create_from_file("mlp.safetensors", NULL, &model) != FDNN_STATUS_OK) {
 *     fprintf(stderr, "%s\n", fdnn_last_error_message());
 *   }
 *   fdnn_model_run(model, batch, input, input_count, output, output_capacity);
 *   fdnn_model_destroy(model);
 * @endcode
 *
 * Threading: see fdnn_model_run() and ::fdnn_context. In short, a model whose weights are all
 * loaded may be run from any number of threads at once; loading weights must not overlap any
 * other call on the same model.
 *
 * This header is C99 and C++ clean. No exception, STL type or varargs crosses it.
 */
#ifndef FUSEDNN_FUSEDNN_H
#define FUSEDNN_FUSEDNN_H

#include <stddef.h>
#include <stdint.h>

/** @name Version
 *  The ABI major version is FDNN_VERSION_MAJOR; it is the shared library's SOVERSION. A library
 *  with the same major version and a minor version at least the header's runs a program built
 *  against this header.
 *  @{ */
#define FDNN_VERSION_MAJOR 0 /**< Incremented on an incompatible ABI change. */
#define FDNN_VERSION_MINOR 4 /**< Incremented when functions or struct fields are added. */
#define FDNN_VERSION_PATCH 0 /**< Incremented on fixes that change no interface. */
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define FDNN_VERSION_NUMBER \
  (FDNN_VERSION_MAJOR * 10000 + FDNN_VERSION_MINOR * 100 + FDNN_VERSION_PATCH)
/** @} */

/** The most dimensions a per-sample shape may have. */
#define FDNN_MAX_RANK 8

/**
 * The largest fdnn_model_options::max_batch accepted, 2^31 - 1: batch and row counts stay within
 * 32-bit launch-grid dimensions on the GPU. A larger value is ::FDNN_STATUS_INVALID_ARGUMENT; a
 * smaller one whose scratch memory would not fit in a size_t or in
 * fdnn_model_options::max_workspace_bytes is ::FDNN_STATUS_OUT_OF_MEMORY.
 */
#define FDNN_MAX_BATCH_LIMIT 2147483647

/** Default of fdnn_model_options::max_workspace_bytes: 64 GiB, more than a desktop has. */
#define FDNN_DEFAULT_MAX_WORKSPACE_BYTES (UINT64_C(1) << 36)

/** Default of fdnn_model_options::max_weight_bytes: 256 GiB, more than a desktop has. */
#define FDNN_DEFAULT_MAX_WEIGHT_BYTES (UINT64_C(1) << 38)

/**
 * @def FDNN_API
 * @brief Marks a function the shared library exports (all others are hidden).
 */
#if defined(_WIN32)
#if defined(FUSEDNN_BUILDING_LIBRARY)
#define FDNN_API __declspec(dllexport)
#else
#define FDNN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define FDNN_API __attribute__((visibility("default")))
#else
#define FDNN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Result of every fallible call. Values are pinned: they never change between versions.
 */
typedef enum fdnn_status {
  FDNN_STATUS_OK = 0,               /**< Success. */
  FDNN_STATUS_INVALID_ARGUMENT = 1, /**< A NULL pointer, a bad value or an out-of-range batch. */
  FDNN_STATUS_IO_ERROR = 2,         /**< A file or directory is missing or cannot be read. */
  FDNN_STATUS_PARSE_ERROR = 3,      /**< A file is malformed (JSON syntax, safetensors layout). */
  FDNN_STATUS_INVALID_MODEL = 4,   /**< The model spec is wrong: unknown layer, bad dims, shapes. */
  FDNN_STATUS_WEIGHT_MISMATCH = 5, /**< A weight is missing, extra, mis-shaped or mis-typed. */
  FDNN_STATUS_INVALID_STATE = 6,   /**< The call is not allowed now (run before weights load). */
  FDNN_STATUS_BUFFER_TOO_SMALL = 7,   /**< An output buffer cannot hold the result. */
  FDNN_STATUS_OUT_OF_MEMORY = 8,      /**< Host or device memory could not be allocated. */
  FDNN_STATUS_UNSUPPORTED = 9,        /**< The feature is not available in this build or device. */
  FDNN_STATUS_NON_FINITE_WEIGHT = 10, /**< fdnn_model_validate() found a NaN or Inf weight. */
  FDNN_STATUS_DEVICE_ERROR = 11,      /**< The GPU runtime reported an error. */
  FDNN_STATUS_INTERNAL_ERROR = 12     /**< A bug in fusednn; please report the message. */
} fdnn_status;

/**
 * @brief Element types of tensors passed in by the caller. Values are pinned.
 *
 * Used for weights (fdnn_model_set_weight()) and, since version 0.3, for the inputs and outputs
 * of the typed runs (fdnn_model_run_typed(), fdnn_context_run_typed(),
 * fdnn_context_run_device_typed()). 16-bit elements are passed as their bits (2 bytes each, in
 * the machine's byte order).
 */
typedef enum fdnn_dtype {
  FDNN_DTYPE_FLOAT32 = 0, /**< IEEE 754 binary32. */
  FDNN_DTYPE_FLOAT16 = 1, /**< IEEE 754 binary16. */
  FDNN_DTYPE_BFLOAT16 = 2 /**< bfloat16 (the upper half of a binary32). */
} fdnn_dtype;

/** @brief Where a model runs. Values are pinned. */
typedef enum fdnn_device {
  FDNN_DEVICE_CPU = 0,  /**< The portable CPU backend (exact fp32). */
  FDNN_DEVICE_CUDA = 1, /**< An NVIDIA GPU; FDNN_STATUS_UNSUPPORTED when none can be used. */
  FDNN_DEVICE_AUTO = 2  /**< The GPU when one can be used, else the CPU. */
} fdnn_device;

/**
 * @brief The numeric precision a model may run its matrix work in. Values are pinned.
 *
 * Set with fdnn_model_options::precision; fdnn_model_precision() reports what the model
 * actually runs in. Whatever the precision, inputs and outputs stay in the caller's dtype
 * (float32, or float16 / bfloat16 through the typed runs such as fdnn_model_run_typed()),
 * elementwise work stays fp32, and products are accumulated in fp32. The reduced
 * precisions store the weights in that type and run the matrix work on tensor cores.
 *
 * **Accuracy contract.** A precision is an upper bound on the error, never a promise of lower
 * accuracy. Measured against the CPU backend in fp32 on fresh random data, as the largest
 * absolute difference over the largest magnitude of the reference output, a model's error is
 * at most:
 *
 * | Precision | Relative error |
 * |---|---|
 * | ::FDNN_PRECISION_FP32 | 1e-5: fp32 arithmetic |
 * | ::FDNN_PRECISION_TF32 | 1e-3 |
 * | ::FDNN_PRECISION_FP16 | 1e-2 |
 * | ::FDNN_PRECISION_BF16 | 1e-2 |
 *
 * and never more than twice the error of PyTorch running the same model in the same
 * precision. The test suite checks this on the GPU (docs/precision.md).
 *
 * **Where each precision runs.** The CPU backend always computes in fp32, which meets every
 * bound: a model created with ::FDNN_DEVICE_CPU (or ::FDNN_DEVICE_AUTO without a GPU) and a
 * reduced precision runs in fp32, and fdnn_model_precision() reports ::FDNN_PRECISION_FP32.
 * On the GPU, layers that run in the requested precision do so on tensor cores; others stay in
 * fp32. fdnn_model_precision() reports the requested precision when some layer runs in it,
 * ::FDNN_PRECISION_FP32 otherwise. docs/precision.md says which layers and kernels run in which
 * precision, and which outputs (those squeezed by a Tanh or Sigmoid) can exceed the tf32 and
 * bf16 bounds.
 */
typedef enum fdnn_precision {
  FDNN_PRECISION_FP32 = 0, /**< IEEE 754 binary32 throughout (exact; the default). */
  FDNN_PRECISION_TF32 = 1, /**< fp32 storage; tensor-core products with a 10-bit mantissa. */
  FDNN_PRECISION_FP16 = 2, /**< Weights and products in IEEE 754 binary16, fp32 accumulation. */
  FDNN_PRECISION_BF16 = 3  /**< Weights and products in bfloat16, fp32 accumulation. */
} fdnn_precision;

/** @brief The form of fdnn_model_explain()'s document. Values are pinned. */
typedef enum fdnn_explain_format {
  /** A JSON object (its fields: docs/bindings.md, "Explaining the plan"). */
  FDNN_EXPLAIN_FORMAT_JSON = 0,
  /** A table for people, as `fusednn info MODEL --plan` prints it. */
  FDNN_EXPLAIN_FORMAT_TEXT = 1
} fdnn_explain_format;

/**
 * @brief How a GPU model's host-buffer runs (fdnn_context_run(), fdnn_model_run() and their
 * typed forms) move the caller's input and output. Values are pinned.
 *
 * Set with fdnn_model_options::host_io; fdnn_context_host_io() reports what a context does.
 * Every path gives the same bits. The CPU backend reads and writes the caller's buffers
 * directly and ignores the option.
 *
 * **Staged.** The input is copied into the context's pinned staging, from there to the GPU
 * (an asynchronous DMA copy), the model runs, and the output comes back the same way. The
 * fastest on a discrete GPU for all but small batches.
 *
 * **Mapped.** No DMA copy: the kernels read the caller's input and write its output through a
 * device mapping of host memory. For the duration of each run the caller's buffers are
 * page-locked with `cudaHostRegister` (read-only for the input where the device supports it)
 * and released afterwards; a buffer that is already page-locked (allocated with
 * `cudaHostAlloc` / `cudaMallocHost`, or registered by the caller) is used as it is and stays
 * so. Where a buffer cannot be registered (the device does not support it, or its pages
 * overlap memory registered differently) the kernels use the context's mapped pinned staging
 * for it instead, with a host memcpy in or out. On an integrated GPU (Jetson), whose host and
 * device memory are the same DRAM, this saves the copies' bandwidth; on a discrete GPU every
 * access crosses the bus, which only small batches afford.
 *
 * Where a step of the model reads or writes the model input or output with copy engines or
 * library kernels that may not reach host memory (a lone Linear on cuBLASLt, or the
 * small-batch Linear's bulk copies, both fp32 only), the model runs staged whatever the
 * option: fdnn_context_host_io() reports ::FDNN_HOST_IO_STAGED and fdnn_model_explain() says
 * why. Likewise the batches at which the input is read by bulk copies (the fp16 and bf16 MLP
 * kernels for large batches on compute capability 9.0) run staged on a mapped context;
 * fdnn_model_explain() at such a batch says so.
 * @since 0.4
 */
typedef enum fdnn_host_io {
  /**
   * Mapped on an integrated GPU, staged on a discrete one (where small batches still let the
   * kernels read and write the pinned staging in place, without copies). The default.
   */
  FDNN_HOST_IO_AUTO = 0,
  FDNN_HOST_IO_STAGED = 1, /**< Always staged copies, also on an integrated GPU. */
  FDNN_HOST_IO_MAPPED = 2  /**< Always mapped, also on a discrete GPU (for testing it there). */
} fdnn_host_io;

/**
 * @brief A network: its graph, its weights, and the backend it runs on.
 *
 * Create with fdnn_model_create_from_file(), fdnn_model_create_from_memory() or
 * fdnn_model_create_from_spec(); free with fdnn_model_destroy().
 */
typedef struct fdnn_model fdnn_model;

/**
 * @brief An execution context: the scratch memory (and, on a GPU, the stream and captured
 * graphs) that one run in flight needs.
 *
 * A context is used by one thread at a time; create one per thread for the lowest latency
 * (as with TensorRT's execution contexts), or let fdnn_model_run() take one from the model's
 * internal pool. A context keeps its model's weights alive: the model may be destroyed first.
 * Create with fdnn_context_create(); free with fdnn_context_destroy().
 */
typedef struct fdnn_context fdnn_context;

/**
 * @brief Options for creating a model. Initialise with
 * `fdnn_model_options_init(&options, sizeof options)` and then
 * change the fields you need; new fields are only ever appended.
 */
typedef struct fdnn_model_options {
  /** sizeof(fdnn_model_options) as the caller was compiled; set by fdnn_model_options_init(). */
  size_t struct_size;
  /**
   * Largest batch a run may use, 1 to ::FDNN_MAX_BATCH_LIMIT. Scratch memory is sized for it.
   * Default 1024.
   */
  int64_t max_batch;
  /** Where to run. Default ::FDNN_DEVICE_CPU in this version. */
  fdnn_device device;
  /** GPU ordinal when device is CUDA or AUTO. Default 0. */
  int32_t device_id;
  /**
   * Threads one CPU run may use: 0 picks the number of hardware threads (used only when the
   * batch is large enough to pay for them), 1 runs on the calling thread alone. Default 0.
   */
  int32_t cpu_threads;
  /**
   * GPU only: 1 captures each run into a CUDA graph per context and batch size and replays it
   * afterwards (the lowest launch overhead); 0 launches the kernels directly. Default 1.
   */
  int32_t cuda_graphs;
  /**
   * The least precise arithmetic the model may use (an upper bound on its error; see
   * ::fdnn_precision for the accuracy contract). The CPU backend always runs in fp32.
   * fdnn_model_precision() gives what the model runs in. Default ::FDNN_PRECISION_FP32; a
   * caller whose struct ends before this field gets the default.
   */
  fdnn_precision precision;
  /**
   * The most scratch memory, in bytes, one execution context may take
   * (fdnn_memory_info::context_bytes, sized for max_batch). A model that needs more is refused
   * with ::FDNN_STATUS_OUT_OF_MEMORY, naming this option and the size needed, when it is
   * prepared (fdnn_context_create(), or the first run), before any scratch is allocated.
   * 0 means no limit. Default ::FDNN_DEFAULT_MAX_WORKSPACE_BYTES; a caller whose struct ends
   * before this field gets the default. Lower it where memory is scarce, or where models come
   * from untrusted sources: a small file can ask for a large workspace.
   * @since 0.4
   */
  uint64_t max_workspace_bytes;
  /**
   * The most memory, in bytes, a model's weights may take: the tensors its spec declares, as
   * float32, checked when the model is created, before any weight is read; a safetensors file
   * (bundle or weights) larger than this limit plus 100 MiB of header, refused before it is
   * read; the files of a weight directory (fdnn_model_load_weights()) together, each refused by
   * its size before it is read; and the backend's copy of them (fdnn_memory_info::weight_bytes),
   * checked when it is prepared. A model or file over the limit is refused with
   * ::FDNN_STATUS_OUT_OF_MEMORY naming this option and the size needed. 0 means no limit. Default
   * ::FDNN_DEFAULT_MAX_WEIGHT_BYTES; a caller whose struct ends before this field gets the default.
   * @since 0.4
   */
  uint64_t max_weight_bytes;
  /**
   * GPU only: how host-buffer runs move the input and output (see ::fdnn_host_io). An unknown
   * value is ::FDNN_STATUS_INVALID_ARGUMENT naming "options.host_io", also on the CPU, which
   * otherwise ignores it. Default ::FDNN_HOST_IO_AUTO; a caller whose struct ends before this
   * field gets the default.
   * @since 0.4
   */
  fdnn_host_io host_io;
} fdnn_model_options;

/** @brief A per-sample shape (the batch dimension is not included). */
typedef struct fdnn_shape {
  int32_t rank;                /**< Number of valid entries in dims (0 to FDNN_MAX_RANK). */
  int64_t dims[FDNN_MAX_RANK]; /**< Extents, outermost first (C order). */
} fdnn_shape;

/** @brief Memory a model uses, from fdnn_model_memory_info(). */
typedef struct fdnn_memory_info {
  size_t struct_size; /**< Set by the caller to sizeof(fdnn_memory_info); only that many bytes are
                         written. */
  int64_t parameter_count; /**< Scalars in all weights as the spec declares them. */
  size_t weight_bytes;     /**< Bytes the backend holds for the (folded) weights. */
  size_t context_bytes;    /**< Scratch bytes each execution context allocates, at most
                                (fdnn_context_create() says when). */
  /**
   * Arithmetic per sample, in floating-point operations, counted as fdnn_model_explain() counts
   * them: a multiply-add of a Linear or Conv2d is 2, each fused activation 1 per output,
   * pooling 1 per window element, LayerNorm 5 and Softmax 4 per element. With
   * bytes_per_sample, lets a server refuse a model before running it. @since 0.4
   */
  double flops_per_sample;
  /**
   * Bytes of activations each sample moves: every layer's input and output as float32, weights
   * excluded (a run reads them once whatever its batch). @since 0.4
   */
  double bytes_per_sample;
} fdnn_memory_info;

/** @brief One layer of a model, from fdnn_model_layer_info(). */
typedef struct fdnn_layer_info {
  size_t struct_size; /**< Set by the caller to sizeof(fdnn_layer_info); only that many bytes are
                         written. */
  const char* name;   /**< The layer's name; owned by the model, valid until destroy. */
  const char* type;   /**< The layer type as in the spec ("Linear"); owned by the model. */
  fdnn_shape output_shape; /**< Per-sample shape of the layer's output. */
  int64_t parameter_count; /**< Scalars in this layer's weights. */
} fdnn_layer_info;

/* ---------------------------------------------------------------------------------------------
 * Library
 * ------------------------------------------------------------------------------------------- */

/**
 * @brief The library's version as major * 10000 + minor * 100 + patch.
 *
 * Compare with FDNN_VERSION_NUMBER to find a library older than the header.
 * Thread-safe.
 * @return The version number of the loaded library.
 */
FDNN_API uint32_t fdnn_version(void);

/**
 * @brief The library's version as text. Thread-safe.
 * @return "major.minor.patch", a static string.
 */
FDNN_API const char* fdnn_version_string(void);

/**
 * @brief The name of a status code ("FDNN_STATUS_OK"); "FDNN_STATUS_UNKNOWN" for other values.
 * @param[in] status Any value.
 * @return A static string. Thread-safe.
 */
FDNN_API const char* fdnn_status_string(fdnn_status status);

/**
 * @brief The message of the last failed call made by this thread.
 *
 * Thread-local: a failure on one thread never changes another thread's message. A successful
 * call does not clear it.
 * @return A string owned by the library, valid until this thread's next failing fdnn call;
 *         "" when this thread has had no failure.
 */
FDNN_API const char* fdnn_last_error_message(void);

/**
 * @brief Whether the library was built with the CUDA backend and can see a usable GPU.
 * @param[out] count Number of usable GPUs (0 in a CPU-only build). Must not be NULL.
 * @return ::FDNN_STATUS_OK, or ::FDNN_STATUS_INVALID_ARGUMENT for a NULL count.
 */
FDNN_API fdnn_status fdnn_cuda_device_count(int32_t* count);

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

/**
 * @brief Fill options with their defaults, struct_size included.
 *
 * Only the first struct_size bytes are written, so a program built against an older, shorter
 * struct is never written past its end; fields it does not know keep their defaults inside the
 * library.
 * @param[out] options Options to initialise. Must not be NULL.
 * @param[in] struct_size sizeof(fdnn_model_options) as the caller was compiled.
 * @return ::FDNN_STATUS_OK, or ::FDNN_STATUS_INVALID_ARGUMENT for a NULL options or a
 *         struct_size too small to hold max_batch.
 */
FDNN_API fdnn_status fdnn_model_options_init(fdnn_model_options* options, size_t struct_size);

/**
 * @brief Create a model from a file.
 *
 * The file is either a JSON model spec (docs/model-format.md), whose weights are then loaded
 * with fdnn_model_load_weights() or fdnn_model_set_weight(), or a bundle: a safetensors file whose
 * metadata carries the spec, in which case the weights are loaded as well.
 *
 * @param[in] path Path of the spec or bundle. Must not be NULL.
 * @param[in] options Options, or NULL for the defaults. A field with a value outside its range
 *            (an unknown ::fdnn_device or ::fdnn_precision, max_batch below 1 or above
 *            ::FDNN_MAX_BATCH_LIMIT) is refused with ::FDNN_STATUS_INVALID_ARGUMENT naming it
 *            ("options.precision"). Declared weights over fdnn_model_options::max_weight_bytes
 *            are ::FDNN_STATUS_OUT_OF_MEMORY naming that option.
 *            The file must be a regular file (a FIFO or a device is ::FDNN_STATUS_IO_ERROR,
 *            never read); a safetensors header that repeats a key or nests deeper than the
 *            format is ::FDNN_STATUS_PARSE_ERROR naming it (docs/model-format.md).
 * @param[out] model Receives the new model; free it with fdnn_model_destroy(). Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_IO_ERROR,
 *         ::FDNN_STATUS_PARSE_ERROR, ::FDNN_STATUS_INVALID_MODEL, ::FDNN_STATUS_WEIGHT_MISMATCH,
 *         ::FDNN_STATUS_UNSUPPORTED (device not available), ::FDNN_STATUS_OUT_OF_MEMORY.
 * Thread-safe (creates independent objects).
 */
FDNN_API fdnn_status fdnn_model_create_from_file(const char* path,
                                                 const fdnn_model_options* options,
                                                 fdnn_model** model);

/**
 * @brief Create a model from a model file's bytes held in memory: a bundle (the usual case, e.g.
 * one linked into the program) or a JSON spec.
 *
 * Takes the same content as fdnn_model_create_from_file() and goes through the same parser: a
 * bundle's weights are loaded as well; a spec's come later from fdnn_model_load_weights() or
 * fdnn_model_set_weight(). The library copies what it needs before returning, so the caller may
 * free or reuse data as soon as the call returns.
 *
 * @param[in] data The file's bytes. Must not be NULL.
 * @param[in] size Length of data in bytes; 0 is refused with ::FDNN_STATUS_PARSE_ERROR.
 * @param[in] options Options, or NULL for the defaults; checked as for
 *            fdnn_model_create_from_file().
 * @param[out] model Receives the new model; free it with fdnn_model_destroy(). Must not be NULL;
 *             untouched on failure.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT (a NULL data or model, a bad option),
 *         ::FDNN_STATUS_PARSE_ERROR (empty, truncated, neither a spec nor a safetensors file, a
 *         malformed header), ::FDNN_STATUS_INVALID_MODEL (a safetensors file without a spec, a bad
 *         spec), ::FDNN_STATUS_WEIGHT_MISMATCH, ::FDNN_STATUS_UNSUPPORTED,
 *         ::FDNN_STATUS_OUT_OF_MEMORY. Messages name the source as "<memory>".
 * Thread-safe (creates independent objects).
 * @since 0.4
 */
FDNN_API fdnn_status fdnn_model_create_from_memory(const void* data, size_t size,
                                                   const fdnn_model_options* options,
                                                   fdnn_model** model);

/**
 * @brief Create a model from a JSON spec held in memory.
 * @param[in] spec_json The spec's UTF-8 text; need not be NUL-terminated. Must not be NULL.
 * @param[in] spec_length Length of spec_json in bytes.
 * @param[in] options Options, or NULL for the defaults; checked as for
 *            fdnn_model_create_from_file().
 * @param[out] model Receives the new model; free it with fdnn_model_destroy(). Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_PARSE_ERROR,
 *         ::FDNN_STATUS_INVALID_MODEL, ::FDNN_STATUS_UNSUPPORTED, ::FDNN_STATUS_OUT_OF_MEMORY.
 * Thread-safe (creates independent objects).
 */
FDNN_API fdnn_status fdnn_model_create_from_spec(const char* spec_json, size_t spec_length,
                                                 const fdnn_model_options* options,
                                                 fdnn_model** model);

/**
 * @brief Destroy a model. Contexts created from it stay usable until they are destroyed.
 * @param[in] model The model, or NULL (ignored). Must not be in use by another thread.
 */
FDNN_API void fdnn_model_destroy(fdnn_model* model);

/**
 * @brief Load weights from a safetensors file or from a directory of `<name>.bin` / `<name>.txt`.
 *
 * Every tensor is checked against the spec: a tensor the spec does not name, a wrong shape or an
 * unsupported element type is an error naming the tensor (and both shapes); nothing is loaded
 * then. Tensors the file lacks may come from later calls. safetensors F32, F16 and BF16 are
 * converted to float32; `.bin` files are raw little-endian float32; `.txt` files hold one number
 * per line as written by numpy.savetxt.
 *
 * @param[in,out] model The model. Must not be NULL.
 * @param[in] path A `.safetensors` file or a directory. Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_IO_ERROR,
 *         ::FDNN_STATUS_PARSE_ERROR, ::FDNN_STATUS_WEIGHT_MISMATCH,
 *         ::FDNN_STATUS_INVALID_STATE (the model has already run: its weights are frozen).
 * Not thread-safe: no other call on this model may overlap it.
 */
FDNN_API fdnn_status fdnn_model_load_weights(fdnn_model* model, const char* path);

/**
 * @brief Set one weight tensor from the caller's memory (copied; the caller keeps ownership).
 * @param[in,out] model The model. Must not be NULL.
 * @param[in] name The tensor's state_dict name ("fc1.weight"). Must not be NULL.
 * @param[in] dtype Element type of data.
 * @param[in] data The elements in C order. Must not be NULL.
 * @param[in] shape The tensor's extents; must equal the spec's. Must not be NULL when rank > 0.
 *            The name and the shape are checked against the spec before data is read, so data
 *            need hold only what the spec's shape asks for: a wrong or huge shape, or an
 *            undeclared name, is ::FDNN_STATUS_WEIGHT_MISMATCH and nothing is read.
 * @param[in] rank Number of entries in shape (0 to FDNN_MAX_RANK).
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_WEIGHT_MISMATCH,
 *         ::FDNN_STATUS_INVALID_STATE (weights are frozen).
 * Not thread-safe: no other call on this model may overlap it.
 */
FDNN_API fdnn_status fdnn_model_set_weight(fdnn_model* model, const char* name, fdnn_dtype dtype,
                                           const void* data, const int64_t* shape, int32_t rank);

/**
 * @brief Check the weights: all present, all finite.
 *
 * NaN and Inf are accepted when loading (a user may want to inspect such a model) and reported
 * here.
 * @param[in] model The model. Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_WEIGHT_MISMATCH naming the missing tensors;
 *         ::FDNN_STATUS_NON_FINITE_WEIGHT naming each tensor with NaN or Inf and its first bad
 *         index; ::FDNN_STATUS_INVALID_ARGUMENT.
 * Thread-safe once weights are loaded.
 */
FDNN_API fdnn_status fdnn_model_validate(const fdnn_model* model);

/**
 * @brief The per-sample input shape (without the batch dimension).
 * @param[in] model The model. Must not be NULL.
 * @param[out] shape Receives the shape. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_input_shape(const fdnn_model* model, fdnn_shape* shape);

/**
 * @brief The per-sample output shape (without the batch dimension).
 * @param[in] model The model. Must not be NULL.
 * @param[out] shape Receives the shape. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_output_shape(const fdnn_model* model, fdnn_shape* shape);

/**
 * @brief The largest batch a run accepts (fdnn_model_options::max_batch).
 * @param[in] model The model. Must not be NULL.
 * @param[out] max_batch Receives the value. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_max_batch(const fdnn_model* model, int64_t* max_batch);

/**
 * @brief The device the model runs on (never ::FDNN_DEVICE_AUTO: the resolved choice).
 * @param[in] model The model. Must not be NULL.
 * @param[out] device Receives the device. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_device(const fdnn_model* model, fdnn_device* device);

/**
 * @brief The precision the model actually runs its matrix work in.
 *
 * Never less precise than fdnn_model_options::precision asked for, and possibly more: a model
 * on the CPU always reports ::FDNN_PRECISION_FP32 (see ::fdnn_precision). Known before the
 * weights are loaded. For a GPU model that has not run yet, the first query (like
 * fdnn_model_memory_info()) sets up the backend once, so it may fail as creating a context can.
 * @param[in] model The model. Must not be NULL.
 * @param[out] precision Receives the precision. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT; for a GPU model before its first
 *         run also ::FDNN_STATUS_OUT_OF_MEMORY or ::FDNN_STATUS_DEVICE_ERROR. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_precision(const fdnn_model* model, fdnn_precision* precision);

/**
 * @brief Parameter count and the memory the model and each context use.
 *
 * context_bytes is known before any run, so callers can budget memory up front.
 * @param[in] model The model. Must not be NULL.
 * @param[in,out] info Receives the figures; the caller sets info->struct_size first.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_memory_info(const fdnn_model* model, fdnn_memory_info* info);

/**
 * @brief Number of layers in the spec.
 * @param[in] model The model. Must not be NULL.
 * @param[out] count Receives the count. Must not be NULL.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_layer_count(const fdnn_model* model, int32_t* count);

/**
 * @brief Describe one layer (as written in the spec, before any folding).
 * @param[in] model The model. Must not be NULL.
 * @param[in] index 0 to fdnn_model_layer_count() - 1.
 * @param[in,out] info Receives the description; the caller sets info->struct_size first.
 * @return ::FDNN_STATUS_OK or ::FDNN_STATUS_INVALID_ARGUMENT. Thread-safe.
 */
FDNN_API fdnn_status fdnn_model_layer_info(const fdnn_model* model, int32_t index,
                                           fdnn_layer_info* info);

/**
 * @brief Explain how a run of `batch` samples would go: the plan's steps as the model's backend
 * runs them at that batch.
 *
 * For each lowered step (one kernel or fused kernel): the spec layers it covers, the
 * activations fused into it, the kernel form the backend picks at this batch and the reason (the
 * size, alignment, precision or device property that decided it), where its output lives (the
 * workspace slot and its bytes per sample), and its nominal FLOPs and bytes moved, per sample
 * and at this batch (float32 sizes; docs/bindings.md lists the conventions). Also the backend's
 * batch-wide choices (CPU threads, a GPU's single-launch network) and totals. The document is
 * UTF-8 text ending in a newline, NUL-terminated in the buffer.
 *
 * Two-phase: call with buffer NULL and buffer_capacity 0 to get the size in *size, then with a
 * buffer of that many bytes. Works before the first run and before the weights are loaded: the
 * query then sets up a plan and backend of its own for the answer (on a GPU this uploads the
 * weights once per call) and freezes nothing. Launches no kernel.
 *
 * @param[in] model The model. Must not be NULL.
 * @param[in] batch The batch size to explain, 1 to the model's max_batch.
 * @param[in] format ::FDNN_EXPLAIN_FORMAT_JSON or ::FDNN_EXPLAIN_FORMAT_TEXT.
 * @param[out] buffer Receives the document and a terminating NUL; may be NULL only when
 *             buffer_capacity is 0.
 * @param[in] buffer_capacity Bytes buffer can hold.
 * @param[out] size Receives the bytes the document needs, its terminating NUL included, on
 *             success and on ::FDNN_STATUS_BUFFER_TOO_SMALL. Must not be NULL.
 * @return ::FDNN_STATUS_OK (also for the size query: buffer NULL, buffer_capacity 0);
 *         ::FDNN_STATUS_BUFFER_TOO_SMALL when buffer_capacity is smaller than *size (then only
 *         *size is written); ::FDNN_STATUS_INVALID_ARGUMENT (a NULL model or size, a NULL buffer
 *         with a nonzero capacity, a batch out of range, an unknown format), nothing written;
 *         for a GPU model before its first run also ::FDNN_STATUS_OUT_OF_MEMORY or
 *         ::FDNN_STATUS_DEVICE_ERROR. Thread-safe.
 * @since 0.4
 */
FDNN_API fdnn_status fdnn_model_explain(const fdnn_model* model, int64_t batch,
                                        fdnn_explain_format format, char* buffer,
                                        size_t buffer_capacity, size_t* size);

/**
 * @brief Run the model on host buffers.
 *
 * Thread-safe once the weights are loaded: any number of threads may call it on one model at
 * once. Each call borrows an execution context from the model's pool (creating one when all are
 * busy), so concurrent callers never share scratch memory. The first run freezes the weights.
 *
 * @param[in] model The model. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] input batch x input-shape float32 values in C order. Must not be NULL.
 * @param[in] input_count Number of floats in input; must equal batch x input elements.
 * @param[out] output Receives batch x output-shape float32 values. Must not be NULL.
 * @param[in] output_capacity Number of floats output can hold; a smaller buffer than the
 *            result is refused with ::FDNN_STATUS_BUFFER_TOO_SMALL and nothing is written.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_BUFFER_TOO_SMALL,
 *         ::FDNN_STATUS_INVALID_STATE (weights missing), ::FDNN_STATUS_OUT_OF_MEMORY,
 *         ::FDNN_STATUS_DEVICE_ERROR.
 */
FDNN_API fdnn_status fdnn_model_run(fdnn_model* model, int64_t batch, const float* input,
                                    size_t input_count, float* output, size_t output_capacity);

/**
 * @brief Run the model on host buffers in the caller's element types.
 *
 * Like fdnn_model_run(), with the input and the output each in any ::fdnn_dtype, independently.
 * A 16-bit input is widened to float32 exactly (every float16 and bfloat16 value has an equal
 * float32), the model runs in its precision as fdnn_model_run() would, and a 16-bit output is
 * narrowed from the float32 result with round-to-nearest-even: values beyond the type's range
 * become infinities, NaN stays NaN. With ::FDNN_DTYPE_FLOAT32 for both this is exactly
 * fdnn_model_run(): same path, same bits.
 *
 * Each pooled context keeps float32 buffers for the conversions, sized for max_batch and
 * allocated by its first run that needs them (never afterwards); a GPU model converts straight
 * into and out of the context's pinned staging instead and allocates nothing.
 *
 * Thread-safe once the weights are loaded, as fdnn_model_run().
 *
 * @param[in] model The model. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] input batch x input-shape elements of input_dtype in C order. Must not be NULL.
 * @param[in] input_dtype The element type of input.
 * @param[in] input_count Number of elements (not bytes) in input; must equal batch x input
 *            elements.
 * @param[out] output Receives batch x output-shape elements of output_dtype. Must not be NULL.
 * @param[in] output_dtype The element type of output, independent of input_dtype.
 * @param[in] output_capacity Number of elements (not bytes) output can hold; a smaller buffer
 *            than the result is refused with ::FDNN_STATUS_BUFFER_TOO_SMALL and nothing is
 *            written.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT (also for a value of input_dtype or
 *         output_dtype that is not an ::fdnn_dtype, naming the argument),
 *         ::FDNN_STATUS_BUFFER_TOO_SMALL, ::FDNN_STATUS_INVALID_STATE (weights missing),
 *         ::FDNN_STATUS_OUT_OF_MEMORY, ::FDNN_STATUS_DEVICE_ERROR.
 * @since 0.3
 */
FDNN_API fdnn_status fdnn_model_run_typed(fdnn_model* model, int64_t batch, const void* input,
                                          fdnn_dtype input_dtype, size_t input_count, void* output,
                                          fdnn_dtype output_dtype, size_t output_capacity);

/* ---------------------------------------------------------------------------------------------
 * Execution contexts
 * ------------------------------------------------------------------------------------------- */

/**
 * @brief Create an execution context for a model whose weights are all loaded.
 *
 * Allocates the model's scratch memory for its max_batch now. On a GPU model, the staging of
 * the input and output for max_batch (device memory, and page-locked host memory for the
 * host-buffer path) is allocated by the context's first run that needs it, before that run's
 * work: a context used only on the device path with float32 buffers never holds it, which keeps
 * creating a context for a large max_batch fast. After its first run of each kind (host buffers,
 * device buffers of each dtype) a context allocates nothing. Freezes the model's weights.
 * @param[in] model The model. Must not be NULL.
 * @param[out] context Receives the context; free it with fdnn_context_destroy(). Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_INVALID_STATE
 *         (weights missing), ::FDNN_STATUS_OUT_OF_MEMORY, ::FDNN_STATUS_DEVICE_ERROR.
 * Thread-safe once the weights are loaded.
 */
FDNN_API fdnn_status fdnn_context_create(fdnn_model* model, fdnn_context** context);

/**
 * @brief Destroy a context.
 *
 * Waits for the work its runs queued, on its own stream and on a caller's: that work still uses
 * the context's memory. A caller's stream may already be destroyed: the wait is on an event
 * the run recorded on it. (Device-path runs that use only the caller's buffers and the weights
 * record none; the weights are freed, with the last model or context that holds them, only once
 * the device is idle.)
 * @param[in] context The context, or NULL (ignored). Must not be running.
 */
FDNN_API void fdnn_context_destroy(fdnn_context* context);

/**
 * @brief Run on host buffers with this context; same arguments and statuses as fdnn_model_run().
 *
 * Not thread-safe for one context: use one context per thread. Different contexts of the same
 * model may run at once.
 * @param[in,out] context The context. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] input batch x input-shape float32 values in C order. Must not be NULL.
 * @param[in] input_count Number of floats in input; must equal batch x input elements.
 * @param[out] output Receives batch x output-shape float32 values. Must not be NULL.
 * @param[in] output_capacity Number of floats output can hold.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_BUFFER_TOO_SMALL,
 *         ::FDNN_STATUS_DEVICE_ERROR.
 */
FDNN_API fdnn_status fdnn_context_run(fdnn_context* context, int64_t batch, const float* input,
                                      size_t input_count, float* output, size_t output_capacity);

/**
 * @brief How this context's host-buffer runs move the input and output.
 *
 * ::FDNN_HOST_IO_MAPPED when the kernels read and write host memory in place (the caller's
 * buffers, registered for each run, or the context's mapped staging), ::FDNN_HOST_IO_STAGED when
 * they are copied through the context's staging; never ::FDNN_HOST_IO_AUTO. It follows
 * fdnn_model_options::host_io and the device (mapped by default on an integrated GPU, staged on
 * a discrete one), and is staged where the model cannot run mapped: fdnn_model_explain() gives
 * the reason. Fixed for the context's lifetime; a mapped context still stages the runs at
 * batches whose input is read by bulk copies (see ::fdnn_host_io).
 *
 * @param[in] context The context. Must not be NULL.
 * @param[out] host_io Receives the path. Must not be NULL.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT (a NULL argument);
 *         ::FDNN_STATUS_UNSUPPORTED when the model runs on the CPU, which has no staging (its
 *         kernels read the caller's buffers directly). Thread-safe.
 * @since 0.4
 */
FDNN_API fdnn_status fdnn_context_host_io(const fdnn_context* context, fdnn_host_io* host_io);

/**
 * @brief Run on device buffers on the caller's CUDA stream (zero-copy).
 *
 * The model must run on ::FDNN_DEVICE_CUDA. Nothing is copied or allocated and the host does not
 * wait: the work is queued on `cuda_stream` and the results are ready when the stream reaches
 * that point. Not thread-safe for one context.
 *
 * On compute capability 9.0 and newer, the small-batch kernels and the fp16/bf16 MLP kernel for
 * large batches are programmatic dependent launches:
 * one may start while the kernel before it on the stream finishes, staging only weights until
 * that kernel is complete; it reads device_input and writes device_output only afterwards, so
 * stream order holds as for any launch (a profiler shows the overlap).
 *
 * @param[in,out] context The context. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] device_input batch x input-shape float32 values in device memory, 4-byte aligned
 *            (::FDNN_STATUS_INVALID_ARGUMENT otherwise). Must not be NULL.
 * @param[in] input_count Number of floats in device_input; must equal batch x input elements.
 * @param[out] device_output Receives batch x output-shape float32 values in device memory,
 *             4-byte aligned. Its batch x output-shape values must not share any byte with
 *             device_input's input_count (the kernels read the one while they write the other):
 *             overlapping buffers return ::FDNN_STATUS_INVALID_ARGUMENT naming both.
 * @param[in] output_capacity Number of floats device_output can hold.
 * @param[in] cuda_stream A `cudaStream_t` of the model's device, or NULL for the context's own
 *            stream (then the call waits for the results).
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT, ::FDNN_STATUS_BUFFER_TOO_SMALL,
 *         ::FDNN_STATUS_UNSUPPORTED (the model runs on the CPU), ::FDNN_STATUS_DEVICE_ERROR.
 */
FDNN_API fdnn_status fdnn_context_run_device(fdnn_context* context, int64_t batch,
                                             const float* device_input, size_t input_count,
                                             float* device_output, size_t output_capacity,
                                             void* cuda_stream);

/**
 * @brief Run on host buffers in the caller's element types with this context.
 *
 * Same arguments, conversions and statuses as fdnn_model_run_typed(); with
 * ::FDNN_DTYPE_FLOAT32 for both it is exactly fdnn_context_run(). The context's float32
 * conversion buffers, sized for max_batch, are allocated by its first run that needs them
 * (before that run's work; never afterwards), so a warmed-up context allocates nothing per run.
 * On a GPU model the conversions go straight into and out of the context's pinned staging (on
 * the mapped path, ::fdnn_host_io, kernels convert the caller's buffers in place) and nothing is
 * allocated at all.
 *
 * Not thread-safe for one context: use one context per thread.
 * @param[in,out] context The context. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] input batch x input-shape elements of input_dtype in C order. Must not be NULL.
 * @param[in] input_dtype The element type of input.
 * @param[in] input_count Number of elements in input; must equal batch x input elements.
 * @param[out] output Receives batch x output-shape elements of output_dtype. Must not be NULL.
 * @param[in] output_dtype The element type of output, independent of input_dtype.
 * @param[in] output_capacity Number of elements output can hold.
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT (also for an unknown input_dtype or
 *         output_dtype), ::FDNN_STATUS_BUFFER_TOO_SMALL, ::FDNN_STATUS_OUT_OF_MEMORY (the first
 *         run that needs the conversion buffers), ::FDNN_STATUS_DEVICE_ERROR.
 * @since 0.3
 */
FDNN_API fdnn_status fdnn_context_run_typed(fdnn_context* context, int64_t batch, const void* input,
                                            fdnn_dtype input_dtype, size_t input_count,
                                            void* output, fdnn_dtype output_dtype,
                                            size_t output_capacity);

/**
 * @brief Run on device buffers in the caller's element types on the caller's CUDA stream.
 *
 * Like fdnn_context_run_device(), with the input and the output each in any ::fdnn_dtype. The
 * kernels that can (fdnn_model_explain() says which) read a 16-bit device_input and write a
 * 16-bit device_output themselves; elsewhere a 16-bit input is widened on the GPU into the
 * context's own float32 input buffer and a 16-bit output narrowed into device_output from the
 * context's float32 output buffer. Either way the values are those of fdnn_model_run_typed()
 * (16-bit inputs widen exactly; outputs round to nearest even, overflow to infinity, NaN stays
 * NaN). Everything is queued on `cuda_stream`: nothing is allocated and the host does not wait.
 * With CUDA graphs on, the conversions are part of the captured graph. With
 * ::FDNN_DTYPE_FLOAT32 for both it is exactly fdnn_context_run_device() (zero-copy).
 *
 * Each buffer must be aligned to its element's size (4 bytes for float32, 2 for the 16-bit
 * types), and the two must not overlap (device_input's input_count elements and device_output's
 * batch x output-shape elements, in their dtypes, share no byte); otherwise the call returns
 * ::FDNN_STATUS_INVALID_ARGUMENT naming the buffers, before any work is queued. Not thread-safe
 * for one context.
 *
 * @param[in,out] context The context. Must not be NULL.
 * @param[in] batch Number of samples, 1 to the model's max_batch.
 * @param[in] device_input batch x input-shape elements of input_dtype in device memory. Must
 *            not be NULL.
 * @param[in] input_dtype The element type of device_input.
 * @param[in] input_count Number of elements in device_input; must equal batch x input elements.
 * @param[out] device_output Receives batch x output-shape elements of output_dtype in device
 *             memory. Must not be NULL.
 * @param[in] output_dtype The element type of device_output, independent of input_dtype.
 * @param[in] output_capacity Number of elements device_output can hold.
 * @param[in] cuda_stream A `cudaStream_t` of the model's device, or NULL for the context's own
 *            stream (then the call waits for the results).
 * @return ::FDNN_STATUS_OK; ::FDNN_STATUS_INVALID_ARGUMENT (also for an unknown input_dtype or
 *         output_dtype, a misaligned buffer, overlapping buffers), ::FDNN_STATUS_BUFFER_TOO_SMALL,
 *         ::FDNN_STATUS_UNSUPPORTED (the model runs on the CPU), ::FDNN_STATUS_DEVICE_ERROR.
 * @since 0.3
 */
FDNN_API fdnn_status fdnn_context_run_device_typed(fdnn_context* context, int64_t batch,
                                                   const void* device_input, fdnn_dtype input_dtype,
                                                   size_t input_count, void* device_output,
                                                   fdnn_dtype output_dtype, size_t output_capacity,
                                                   void* cuda_stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FUSEDNN_FUSEDNN_H */
