// SPDX-License-Identifier: Apache-2.0
//! Raw declarations of the fusednn C API, one for one with `include/fusednn/fusednn.h`.
//!
//! Everything here is `unsafe` to call and follows the C contract exactly: statuses are plain
//! integers, handles are raw pointers, strings are NUL-terminated `c_char` pointers owned by the
//! library. Use the `fusednn` crate for a safe interface.
//!
//! # Linking
//!
//! The build script takes the first of these that is set, which must then hold the library:
//!
//! 1. `FUSEDNN_LIB_DIR`: a folder holding `libfusednn.so` (or `.dylib`, `.a`, `fusednn.lib`);
//! 2. `FUSEDNN_DIR`: a folder holding the library itself, or `lib/` / `lib64/` holding it
//!    (an install prefix);
//! 3. with neither set, `pkg-config --libs fusednn` (honours `PKG_CONFIG_PATH`).
//!
//! When that gives no library the build stops with a message naming these variables.
//! Programs that link the shared library also need it at run time: set `LD_LIBRARY_PATH` (or
//! install it where the dynamic loader looks).
//!
//! # Keeping in step with the header
//!
//! Enums are declared as integer type aliases plus constants (not Rust `enum`s), because a newer
//! library may return a value this crate does not know. The declarations are written through small
//! macros that also record them in [`declared`]; the test `tests/header_drift.rs` parses the C
//! header and compiles a C program against it, and fails on any function, parameter, enum value,
//! struct field, size or offset that differs from what is declared here.

#![no_std]
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

pub use core::ffi::{c_char, c_int, c_void};

/// Descriptions of the declarations in this crate, recorded by the macros that write them.
///
/// Only the header drift test reads these; they are not part of the API.
#[doc(hidden)]
pub mod declared {
    /// One `extern "C"` function: its name, its parameters as (name, Rust type), its Rust return
    /// type ("" for none).
    #[derive(Debug)]
    pub struct FunctionDecl {
        /// The C symbol.
        pub name: &'static str,
        /// (parameter name, Rust type as written).
        pub params: &'static [(&'static str, &'static str)],
        /// The Rust return type as written, or "" for `void`.
        pub returns: &'static str,
    }

    /// One C enum: the alias name and each constant with its value.
    #[derive(Debug)]
    pub struct EnumDecl {
        /// The C typedef name.
        pub name: &'static str,
        /// (constant name, value).
        pub values: &'static [(&'static str, i64)],
    }

    /// One field of a `#[repr(C)]` struct.
    #[derive(Debug)]
    pub struct FieldDecl {
        /// The field name.
        pub name: &'static str,
        /// The Rust type as written.
        pub ty: &'static str,
        /// `offset_of!` the field.
        pub offset: usize,
        /// `size_of` the field's type.
        pub size: usize,
    }

    /// One `#[repr(C)]` struct with its layout as Rust computes it.
    #[derive(Debug)]
    pub struct StructDecl {
        /// The C typedef name.
        pub name: &'static str,
        /// `size_of` the struct.
        pub size: usize,
        /// `align_of` the struct.
        pub align: usize,
        /// The fields in declaration order.
        pub fields: &'static [FieldDecl],
    }

    /// Every enum declared in this crate.
    pub const ENUMS: &[EnumDecl] = &[
        super::STATUS_DECL,
        super::DTYPE_DECL,
        super::DEVICE_DECL,
        super::PRECISION_DECL,
        super::EXPLAIN_FORMAT_DECL,
        super::HOST_IO_DECL,
    ];

    /// Every struct declared in this crate.
    pub const STRUCTS: &[StructDecl] = &[
        super::MODEL_OPTIONS_DECL,
        super::SHAPE_DECL,
        super::MEMORY_INFO_DECL,
        super::LAYER_INFO_DECL,
    ];

    /// Every opaque handle type declared in this crate.
    pub const OPAQUE_TYPES: &[&str] = &["fdnn_model", "fdnn_context"];

    /// Every integer `#define` mirrored as a constant: (name, value).
    pub const CONSTANTS: &[(&str, i64)] = &[
        ("FDNN_VERSION_MAJOR", super::FDNN_VERSION_MAJOR as i64),
        ("FDNN_VERSION_MINOR", super::FDNN_VERSION_MINOR as i64),
        ("FDNN_VERSION_PATCH", super::FDNN_VERSION_PATCH as i64),
        ("FDNN_VERSION_NUMBER", super::FDNN_VERSION_NUMBER as i64),
        ("FDNN_MAX_RANK", super::FDNN_MAX_RANK as i64),
        ("FDNN_MAX_BATCH_LIMIT", super::FDNN_MAX_BATCH_LIMIT),
    ];

    pub use super::FUNCTIONS;
}

use declared::{EnumDecl, FieldDecl, FunctionDecl, StructDecl};

/// Declares a C enum as an integer alias plus one constant per value, and records it.
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        $decl:ident: pub type $name:ident = $repr:ty {
            $( $(#[$value_meta:meta])* $value:ident = $number:expr, )*
        }
    ) => {
        $(#[$meta])*
        pub type $name = $repr;
        $( $(#[$value_meta])* pub const $value: $name = $number; )*
        const $decl: EnumDecl = EnumDecl {
            name: stringify!($name),
            values: &[$( (stringify!($value), $number as i64) ),*],
        };
    };
}

/// Declares a `#[repr(C)]` struct and records its fields, types and layout.
macro_rules! c_struct {
    (
        $(#[$meta:meta])*
        $decl:ident: pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident: $ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: $ty, )*
        }
        const $decl: StructDecl = StructDecl {
            name: stringify!($name),
            size: core::mem::size_of::<$name>(),
            align: core::mem::align_of::<$name>(),
            fields: &[$( FieldDecl {
                name: stringify!($field),
                ty: stringify!($ty),
                offset: core::mem::offset_of!($name, $field),
                size: core::mem::size_of::<$ty>(),
            } ),*],
        };
    };
}

/// Declares an opaque C handle type: zero-sized, neither `Send`, `Sync` nor `Unpin`, never
/// constructed in Rust.
macro_rules! c_opaque {
    ($(#[$meta:meta])* pub struct $name:ident;) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
            _only_behind_pointers: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
        }
    };
}

/// Declares the `extern "C"` functions and records their signatures in `FUNCTIONS`.
macro_rules! c_functions {
    (
        $(
            $(#[$meta:meta])*
            pub fn $name:ident( $( $param:ident: $param_ty:ty ),* $(,)? ) $( -> $ret:ty )?;
        )*
    ) => {
        extern "C" {
            $(
                $(#[$meta])*
                pub fn $name( $( $param: $param_ty ),* ) $( -> $ret )?;
            )*
        }
        /// The signature of every function declared in this crate.
        #[doc(hidden)]
        pub const FUNCTIONS: &[FunctionDecl] = &[$(
            FunctionDecl {
                name: stringify!($name),
                params: &[$( (stringify!($param), stringify!($param_ty)) ),*],
                returns: stringify!($($ret)?),
            }
        ),*];
    };
}

// ------------------------------------------------------------------------------------------------
// Constants
// ------------------------------------------------------------------------------------------------

/// ABI major version of the header these declarations mirror; the library's SOVERSION.
pub const FDNN_VERSION_MAJOR: u32 = 0;
/// Minor version of the header: incremented when functions or struct fields are added.
pub const FDNN_VERSION_MINOR: u32 = 4;
/// Patch version of the header: fixes that change no interface.
pub const FDNN_VERSION_PATCH: u32 = 0;
/// The header version as one number, `major * 10000 + minor * 100 + patch`; compare with
/// [`fdnn_version`] to find a library older than these declarations.
pub const FDNN_VERSION_NUMBER: u32 =
    FDNN_VERSION_MAJOR * 10000 + FDNN_VERSION_MINOR * 100 + FDNN_VERSION_PATCH;
/// The most dimensions a per-sample shape ([`fdnn_shape`]) may have.
pub const FDNN_MAX_RANK: usize = 8;
/// The largest [`fdnn_model_options::max_batch`] accepted, 2^31 - 1; a larger one is
/// `FDNN_STATUS_INVALID_ARGUMENT`.
pub const FDNN_MAX_BATCH_LIMIT: i64 = 2147483647;
/// Default of [`fdnn_model_options::max_workspace_bytes`]: 64 GiB.
pub const FDNN_DEFAULT_MAX_WORKSPACE_BYTES: u64 = 1 << 36;
/// Default of [`fdnn_model_options::max_weight_bytes`]: 256 GiB.
pub const FDNN_DEFAULT_MAX_WEIGHT_BYTES: u64 = 1 << 38;

// ------------------------------------------------------------------------------------------------
// Enums
// ------------------------------------------------------------------------------------------------

c_enum! {
    /// Result of every fallible call (C `fdnn_status`). Values are pinned across versions; a
    /// newer library may add values, so treat unknown ones as failures.
    STATUS_DECL: pub type fdnn_status = c_int {
        /// Success.
        FDNN_STATUS_OK = 0,
        /// A NULL pointer, a bad value or an out-of-range batch.
        FDNN_STATUS_INVALID_ARGUMENT = 1,
        /// A file or directory is missing or cannot be read.
        FDNN_STATUS_IO_ERROR = 2,
        /// A file is malformed (JSON syntax, safetensors layout).
        FDNN_STATUS_PARSE_ERROR = 3,
        /// The model spec is wrong: unknown layer, bad dims, shapes.
        FDNN_STATUS_INVALID_MODEL = 4,
        /// A weight is missing, extra, mis-shaped or mis-typed.
        FDNN_STATUS_WEIGHT_MISMATCH = 5,
        /// The call is not allowed now (run before weights load, load after the first run).
        FDNN_STATUS_INVALID_STATE = 6,
        /// An output buffer cannot hold the result.
        FDNN_STATUS_BUFFER_TOO_SMALL = 7,
        /// Host or device memory could not be allocated.
        FDNN_STATUS_OUT_OF_MEMORY = 8,
        /// The feature is not available in this build or on this device.
        FDNN_STATUS_UNSUPPORTED = 9,
        /// `fdnn_model_validate` found a NaN or Inf weight.
        FDNN_STATUS_NON_FINITE_WEIGHT = 10,
        /// The GPU runtime reported an error.
        FDNN_STATUS_DEVICE_ERROR = 11,
        /// A bug in fusednn; the message should be reported.
        FDNN_STATUS_INTERNAL_ERROR = 12,
    }
}

c_enum! {
    /// Element type of a tensor passed in by the caller (C `fdnn_dtype`).
    DTYPE_DECL: pub type fdnn_dtype = c_int {
        /// IEEE 754 binary32.
        FDNN_DTYPE_FLOAT32 = 0,
        /// IEEE 754 binary16.
        FDNN_DTYPE_FLOAT16 = 1,
        /// bfloat16 (the upper half of a binary32).
        FDNN_DTYPE_BFLOAT16 = 2,
    }
}

c_enum! {
    /// Where a model runs (C `fdnn_device`).
    DEVICE_DECL: pub type fdnn_device = c_int {
        /// The portable CPU backend (exact fp32).
        FDNN_DEVICE_CPU = 0,
        /// An NVIDIA GPU; creation fails with `FDNN_STATUS_UNSUPPORTED` when none can be used.
        FDNN_DEVICE_CUDA = 1,
        /// The GPU when one can be used, else the CPU.
        FDNN_DEVICE_AUTO = 2,
    }
}

c_enum! {
    /// The numeric precision a model may run its matrix work in (C `fdnn_precision`). A bound on
    /// the error relative to an fp32 run (TF32 1e-3, FP16 and BF16 1e-2, and never more than
    /// twice PyTorch's in the same precision), never a promise of less accuracy: the CPU backend
    /// always computes in fp32. Inputs and outputs stay float32.
    PRECISION_DECL: pub type fdnn_precision = c_int {
        /// IEEE 754 binary32 throughout (exact; the default).
        FDNN_PRECISION_FP32 = 0,
        /// fp32 storage; tensor-core products with a 10-bit mantissa.
        FDNN_PRECISION_TF32 = 1,
        /// Weights and products in IEEE 754 binary16, fp32 accumulation.
        FDNN_PRECISION_FP16 = 2,
        /// Weights and products in bfloat16, fp32 accumulation.
        FDNN_PRECISION_BF16 = 3,
    }
}

c_enum! {
    /// The form of [`fdnn_model_explain`]'s document (C `fdnn_explain_format`).
    EXPLAIN_FORMAT_DECL: pub type fdnn_explain_format = c_int {
        /// A JSON object (its fields: docs/bindings.md, "Explaining the plan").
        FDNN_EXPLAIN_FORMAT_JSON = 0,
        /// A table for people, as `fusednn info MODEL --plan` prints it.
        FDNN_EXPLAIN_FORMAT_TEXT = 1,
    }
}

c_enum! {
    /// How a GPU model's host-buffer runs move the input and output (C `fdnn_host_io`, since
    /// 0.4): staged copies through pinned memory, or mapped (the kernels read and write the
    /// caller's host buffers in place, registered for the run). Every path gives the same bits;
    /// the CPU backend ignores it.
    HOST_IO_DECL: pub type fdnn_host_io = c_int {
        /// Mapped on an integrated GPU (Jetson), staged on a discrete one. The default.
        FDNN_HOST_IO_AUTO = 0,
        /// Always staged copies.
        FDNN_HOST_IO_STAGED = 1,
        /// Always mapped, also on a discrete GPU.
        FDNN_HOST_IO_MAPPED = 2,
    }
}

// ------------------------------------------------------------------------------------------------
// Handles and structs
// ------------------------------------------------------------------------------------------------

c_opaque! {
    /// A network: its graph, its weights and the backend it runs on. Created by
    /// [`fdnn_model_create_from_file`], [`fdnn_model_create_from_memory`] or
    /// [`fdnn_model_create_from_spec`], freed by
    /// [`fdnn_model_destroy`].
    pub struct fdnn_model;
}

c_opaque! {
    /// An execution context: the scratch memory one run in flight needs. Used by one thread at a
    /// time; keeps its model's weights alive. Created by [`fdnn_context_create`], freed by
    /// [`fdnn_context_destroy`].
    pub struct fdnn_context;
}

c_struct! {
    /// Options for creating a model. Fill with [`fdnn_model_options_init`], then change fields;
    /// new fields are only ever appended.
    MODEL_OPTIONS_DECL: pub struct fdnn_model_options {
        /// `size_of::<fdnn_model_options>()` as the caller was compiled; set by the init call.
        pub struct_size: usize,
        /// Largest batch a run may use (1 to [`FDNN_MAX_BATCH_LIMIT`]); scratch memory is sized
        /// for it.
        pub max_batch: i64,
        /// Where to run.
        pub device: fdnn_device,
        /// GPU ordinal when `device` is CUDA or AUTO.
        pub device_id: i32,
        /// Threads one CPU run may use: 0 picks the hardware thread count, 1 runs on the caller.
        pub cpu_threads: i32,
        /// GPU only: 1 captures each run into a CUDA graph per context and batch size and replays
        /// it afterwards; 0 launches the kernels directly.
        pub cuda_graphs: i32,
        /// The least precise arithmetic the model may use (see [`fdnn_precision`]); the CPU
        /// always runs in fp32. A struct that ends before this field gets FP32.
        pub precision: fdnn_precision,
        /// The most scratch bytes one execution context may take; a model needing more is
        /// refused with `FDNN_STATUS_OUT_OF_MEMORY` when prepared. 0: no limit. A struct that
        /// ends before this field gets [`FDNN_DEFAULT_MAX_WORKSPACE_BYTES`].
        pub max_workspace_bytes: u64,
        /// The most bytes the model's weights may take (the declared tensors as float32, checked
        /// at creation; the backend's copy, checked when prepared). 0: no limit. A struct that
        /// ends before this field gets [`FDNN_DEFAULT_MAX_WEIGHT_BYTES`].
        pub max_weight_bytes: u64,
        /// GPU only: how host-buffer runs move the input and output (see [`fdnn_host_io`]); an
        /// unknown value is refused on every device. A struct that ends before this field gets
        /// `FDNN_HOST_IO_AUTO`.
        pub host_io: fdnn_host_io,
    }
}

c_struct! {
    /// A per-sample shape (the batch dimension is not included).
    SHAPE_DECL: pub struct fdnn_shape {
        /// Number of valid entries in `dims` (0 to [`FDNN_MAX_RANK`]).
        pub rank: i32,
        /// Extents, outermost first (C order).
        pub dims: [i64; FDNN_MAX_RANK],
    }
}

c_struct! {
    /// Memory a model uses, from [`fdnn_model_memory_info`].
    MEMORY_INFO_DECL: pub struct fdnn_memory_info {
        /// Set by the caller to `size_of::<fdnn_memory_info>()`.
        pub struct_size: usize,
        /// Scalars in all weights as the spec declares them.
        pub parameter_count: i64,
        /// Bytes the backend holds for the (folded) weights.
        pub weight_bytes: usize,
        /// Scratch bytes each execution context allocates.
        pub context_bytes: usize,
        /// Floating-point operations one sample costs (a multiply-add counts 2).
        pub flops_per_sample: f64,
        /// Bytes of activations one sample moves (float32, weights excluded).
        pub bytes_per_sample: f64,
    }
}

c_struct! {
    /// One layer of a model, from [`fdnn_model_layer_info`].
    LAYER_INFO_DECL: pub struct fdnn_layer_info {
        /// Set by the caller to `size_of::<fdnn_layer_info>()`.
        pub struct_size: usize,
        /// The layer's name; owned by the model, valid until it is destroyed.
        pub name: *const c_char,
        /// The layer type as written in the spec ("Linear"); owned by the model.
        pub r#type: *const c_char,
        /// Per-sample shape of the layer's output.
        pub output_shape: fdnn_shape,
        /// Scalars in this layer's weights.
        pub parameter_count: i64,
    }
}

// ------------------------------------------------------------------------------------------------
// Functions
// ------------------------------------------------------------------------------------------------

c_functions! {
    /// The library's version as `major * 10000 + minor * 100 + patch`. Thread-safe.
    pub fn fdnn_version() -> u32;

    /// The library's version as "major.minor.patch"; a static string. Thread-safe.
    pub fn fdnn_version_string() -> *const c_char;

    /// The name of a status code ("FDNN_STATUS_OK"), or "FDNN_STATUS_UNKNOWN"; a static string.
    pub fn fdnn_status_string(status: fdnn_status) -> *const c_char;

    /// The message of the calling thread's last failed call; "" when it has had none. Valid until
    /// this thread's next failing call.
    pub fn fdnn_last_error_message() -> *const c_char;

    /// Number of usable GPUs (0 in a CPU-only build). `count` must not be NULL.
    pub fn fdnn_cuda_device_count(count: *mut i32) -> fdnn_status;

    /// Fill `options` with the defaults, writing no more than `struct_size` bytes (pass
    /// `size_of::<fdnn_model_options>()`); `struct_size` is set to that size.
    pub fn fdnn_model_options_init(options: *mut fdnn_model_options, struct_size: usize)
        -> fdnn_status;

    /// Create a model from a JSON spec file or a safetensors bundle. `options` may be NULL for
    /// the defaults. Free the result with [`fdnn_model_destroy`]. Thread-safe.
    pub fn fdnn_model_create_from_file(
        path: *const c_char,
        options: *const fdnn_model_options,
        model: *mut *mut fdnn_model,
    ) -> fdnn_status;

    /// Create a model from a JSON spec in memory (`spec_length` bytes, no NUL needed). Free the
    /// result with [`fdnn_model_destroy`]. Thread-safe.
    pub fn fdnn_model_create_from_spec(
        spec_json: *const c_char,
        spec_length: usize,
        options: *const fdnn_model_options,
        model: *mut *mut fdnn_model,
    ) -> fdnn_status;

    /// Create a model from a model file's bytes in memory (`size` bytes): a bundle or a JSON
    /// spec, as [`fdnn_model_create_from_file`] takes. The bytes are copied; `data` may be freed
    /// when the call returns. Free the result with [`fdnn_model_destroy`]. Thread-safe.
    pub fn fdnn_model_create_from_memory(
        data: *const c_void,
        size: usize,
        options: *const fdnn_model_options,
        model: *mut *mut fdnn_model,
    ) -> fdnn_status;

    /// Destroy a model (NULL is ignored). Contexts created from it stay usable. It must not be in
    /// use by another thread.
    pub fn fdnn_model_destroy(model: *mut fdnn_model);

    /// Load weights from a safetensors file or a directory of `<name>.bin` / `<name>.txt`. No
    /// other call on this model may overlap it.
    pub fn fdnn_model_load_weights(model: *mut fdnn_model, path: *const c_char) -> fdnn_status;

    /// Set one weight tensor from the caller's memory (copied). `shape` has `rank` entries. No
    /// other call on this model may overlap it.
    pub fn fdnn_model_set_weight(
        model: *mut fdnn_model,
        name: *const c_char,
        dtype: fdnn_dtype,
        data: *const c_void,
        shape: *const i64,
        rank: i32,
    ) -> fdnn_status;

    /// Check that all weights are present and finite. Thread-safe once weights are loaded.
    pub fn fdnn_model_validate(model: *const fdnn_model) -> fdnn_status;

    /// The per-sample input shape. Thread-safe.
    pub fn fdnn_model_input_shape(model: *const fdnn_model, shape: *mut fdnn_shape)
        -> fdnn_status;

    /// The per-sample output shape. Thread-safe.
    pub fn fdnn_model_output_shape(model: *const fdnn_model, shape: *mut fdnn_shape)
        -> fdnn_status;

    /// The largest batch a run accepts. Thread-safe.
    pub fn fdnn_model_max_batch(model: *const fdnn_model, max_batch: *mut i64) -> fdnn_status;

    /// The device the model runs on (never AUTO). Thread-safe.
    pub fn fdnn_model_device(model: *const fdnn_model, device: *mut fdnn_device) -> fdnn_status;

    /// The precision the model actually runs in: the one asked for or a more precise one
    /// (always FP32 on the CPU). For a GPU model before its first run, the first query sets up
    /// the backend and may fail as creating a context can. Thread-safe.
    pub fn fdnn_model_precision(model: *const fdnn_model, precision: *mut fdnn_precision)
        -> fdnn_status;

    /// Parameter count and memory figures; set `info.struct_size` first. Thread-safe.
    pub fn fdnn_model_memory_info(model: *const fdnn_model, info: *mut fdnn_memory_info)
        -> fdnn_status;

    /// Number of layers in the spec. Thread-safe.
    pub fn fdnn_model_layer_count(model: *const fdnn_model, count: *mut i32) -> fdnn_status;

    /// Describe layer `index`; set `info.struct_size` first. Thread-safe.
    pub fn fdnn_model_layer_info(
        model: *const fdnn_model,
        index: i32,
        info: *mut fdnn_layer_info,
    ) -> fdnn_status;

    /// How a run of `batch` samples would go, step by step: kernel forms and why, workspace,
    /// FLOPs and bytes (since 0.4). Two-phase: `buffer` null and `buffer_capacity` 0 give the
    /// size (NUL included) in `*size`; a smaller buffer gets `FDNN_STATUS_BUFFER_TOO_SMALL` with
    /// only `*size` written. Works before the first run. Thread-safe.
    pub fn fdnn_model_explain(
        model: *const fdnn_model,
        batch: i64,
        format: fdnn_explain_format,
        buffer: *mut c_char,
        buffer_capacity: usize,
        size: *mut usize,
    ) -> fdnn_status;

    /// Run on host buffers. Thread-safe once the weights are loaded; the first run freezes them.
    pub fn fdnn_model_run(
        model: *mut fdnn_model,
        batch: i64,
        input: *const f32,
        input_count: usize,
        output: *mut f32,
        output_capacity: usize,
    ) -> fdnn_status;

    /// Run on host buffers in the caller's element types (since 0.3): a 16-bit input is widened
    /// exactly, a 16-bit output rounded to nearest even; counts are in elements. FLOAT32 both
    /// ways is [`fdnn_model_run`]. Thread-safe once the weights are loaded.
    pub fn fdnn_model_run_typed(
        model: *mut fdnn_model,
        batch: i64,
        input: *const c_void,
        input_dtype: fdnn_dtype,
        input_count: usize,
        output: *mut c_void,
        output_dtype: fdnn_dtype,
        output_capacity: usize,
    ) -> fdnn_status;

    /// Create an execution context with all scratch memory for max_batch. Freezes the weights.
    /// Free with [`fdnn_context_destroy`]. Thread-safe once the weights are loaded.
    pub fn fdnn_context_create(model: *mut fdnn_model, context: *mut *mut fdnn_context)
        -> fdnn_status;

    /// Destroy a context (NULL is ignored). It must not be running.
    pub fn fdnn_context_destroy(context: *mut fdnn_context);

    /// Run on host buffers with this context; one thread at a time per context.
    pub fn fdnn_context_run(
        context: *mut fdnn_context,
        batch: i64,
        input: *const f32,
        input_count: usize,
        output: *mut f32,
        output_capacity: usize,
    ) -> fdnn_status;

    /// How this context's host-buffer runs move the data (since 0.4): `FDNN_HOST_IO_STAGED` or
    /// `FDNN_HOST_IO_MAPPED`; `FDNN_STATUS_UNSUPPORTED` for a model on the CPU. Thread-safe.
    pub fn fdnn_context_host_io(context: *const fdnn_context, host_io: *mut fdnn_host_io)
        -> fdnn_status;

    /// Run on device buffers on the caller's CUDA stream (`cuda_stream` is a `cudaStream_t`, or
    /// NULL for the context's own stream, in which case the call waits). Nothing is copied; the
    /// model must run on CUDA (else `FDNN_STATUS_UNSUPPORTED`). One thread at a time per context.
    pub fn fdnn_context_run_device(
        context: *mut fdnn_context,
        batch: i64,
        device_input: *const f32,
        input_count: usize,
        device_output: *mut f32,
        output_capacity: usize,
        cuda_stream: *mut c_void,
    ) -> fdnn_status;

    /// [`fdnn_model_run_typed`] with this context (since 0.3); one thread at a time per context.
    /// Its float32 conversion buffers are allocated by the first run that needs them.
    pub fn fdnn_context_run_typed(
        context: *mut fdnn_context,
        batch: i64,
        input: *const c_void,
        input_dtype: fdnn_dtype,
        input_count: usize,
        output: *mut c_void,
        output_dtype: fdnn_dtype,
        output_capacity: usize,
    ) -> fdnn_status;

    /// [`fdnn_context_run_device`] in the caller's element types (since 0.3): converted on the
    /// GPU on `cuda_stream`, nothing allocated. One thread at a time per context.
    pub fn fdnn_context_run_device_typed(
        context: *mut fdnn_context,
        batch: i64,
        device_input: *const c_void,
        input_dtype: fdnn_dtype,
        input_count: usize,
        device_output: *mut c_void,
        output_dtype: fdnn_dtype,
        output_capacity: usize,
        cuda_stream: *mut c_void,
    ) -> fdnn_status;
}
