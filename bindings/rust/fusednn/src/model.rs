// SPDX-License-Identifier: Apache-2.0
//! [`Model`]: a loaded network, and [`ModelOptions`] for creating one.

use std::ffi::{c_void, CString};
use std::path::Path;
use std::ptr::{self, NonNull};

use fusednn_sys as sys;

use crate::context::Context;
use crate::dtype::{check_element, Dtype, Element};
use crate::error::{check, Error, Result, Status};
use crate::info::{copy_c_string, LayerInfo, MemoryInfo, Shape, MAX_RANK};
use crate::precision::Precision;

/// Where a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Device {
    /// The portable CPU backend (exact fp32).
    Cpu,
    /// An NVIDIA GPU; creating the model fails with [`Status::Unsupported`] when none can be used.
    Cuda,
    /// The GPU when one can be used, else the CPU. A model reports the device it resolved to.
    Auto,
}

impl Device {
    fn to_raw(self) -> sys::fdnn_device {
        match self {
            Device::Cpu => sys::FDNN_DEVICE_CPU,
            Device::Cuda => sys::FDNN_DEVICE_CUDA,
            Device::Auto => sys::FDNN_DEVICE_AUTO,
        }
    }

    fn from_raw(raw: sys::fdnn_device) -> Result<Device> {
        match raw {
            sys::FDNN_DEVICE_CPU => Ok(Device::Cpu),
            sys::FDNN_DEVICE_CUDA => Ok(Device::Cuda),
            sys::FDNN_DEVICE_AUTO => Ok(Device::Auto),
            other => Err(Error::new(
                Status::Unknown(other),
                format!("the library reported device {other}, which this crate does not know"),
            )),
        }
    }
}

/// How a GPU model's host-buffer runs move the input and output (C `fdnn_host_io`). Every path
/// gives the same bits; the CPU backend reads the caller's buffers directly and ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostIo {
    /// Mapped on an integrated GPU (Jetson), staged on a discrete one. The default.
    Auto,
    /// Copies through the context's pinned staging.
    Staged,
    /// No copies: the kernels read and write the caller's host buffers in place (registered
    /// for the run), also on a discrete GPU.
    Mapped,
}

impl HostIo {
    fn to_raw(self) -> sys::fdnn_host_io {
        match self {
            HostIo::Auto => sys::FDNN_HOST_IO_AUTO,
            HostIo::Staged => sys::FDNN_HOST_IO_STAGED,
            HostIo::Mapped => sys::FDNN_HOST_IO_MAPPED,
        }
    }

    pub(crate) fn from_raw(raw: sys::fdnn_host_io) -> Result<HostIo> {
        match raw {
            sys::FDNN_HOST_IO_AUTO => Ok(HostIo::Auto),
            sys::FDNN_HOST_IO_STAGED => Ok(HostIo::Staged),
            sys::FDNN_HOST_IO_MAPPED => Ok(HostIo::Mapped),
            other => Err(Error::new(
                Status::Unknown(other),
                format!("the library reported host I/O path {other}, which this crate does not know"),
            )),
        }
    }
}

/// Options for creating a [`Model`], built from the library's defaults.
///
/// ```no_run
/// use fusednn::{Device, Model, ModelOptions};
/// let options = ModelOptions::new().max_batch(64).device(Device::Cpu).cpu_threads(1);
/// let model = Model::from_file_with_options("mlp.safetensors", &options)?;
/// # Ok::<(), fusednn::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ModelOptions {
    raw: sys::fdnn_model_options,
}

impl ModelOptions {
    /// The library's defaults: max batch 1024, the CPU, GPU 0, as many CPU threads as pay off,
    /// CUDA graphs on, [`Precision::Fp32`], 64 GiB of workspace and 256 GiB of weights at most.
    pub fn new() -> ModelOptions {
        let size = std::mem::size_of::<sys::fdnn_model_options>();
        // SAFETY: every field is a plain integer, valid when zeroed.
        let mut raw: sys::fdnn_model_options = unsafe { std::mem::zeroed() };
        // SAFETY: `raw` is writable for `size` bytes, and the library writes no further. It can
        // only fail for a NULL pointer or a size below its minimum, neither possible here.
        let status = unsafe { sys::fdnn_model_options_init(&mut raw, size) };
        debug_assert_eq!(status, sys::FDNN_STATUS_OK);
        ModelOptions { raw }
    }

    /// Largest batch a run may use (1 or more; 0 is refused when the model is created). Scratch
    /// memory is sized for it.
    pub fn max_batch(mut self, max_batch: usize) -> ModelOptions {
        self.raw.max_batch = i64::try_from(max_batch).unwrap_or(i64::MAX);
        self
    }

    /// Where to run.
    pub fn device(mut self, device: Device) -> ModelOptions {
        self.raw.device = device.to_raw();
        self
    }

    /// GPU ordinal when the device is [`Device::Cuda`] or [`Device::Auto`].
    pub fn device_id(mut self, device_id: u32) -> ModelOptions {
        self.raw.device_id = i32::try_from(device_id).unwrap_or(i32::MAX);
        self
    }

    /// Threads one CPU run may use: 0 picks the number of hardware threads (used only when the
    /// batch is large enough to pay for them), 1 runs on the calling thread alone.
    pub fn cpu_threads(mut self, threads: usize) -> ModelOptions {
        self.raw.cpu_threads = i32::try_from(threads).unwrap_or(i32::MAX);
        self
    }

    /// GPU only: whether each run is captured into a CUDA graph (per context and batch size) and
    /// replayed afterwards, the lowest launch overhead; otherwise kernels launch directly.
    pub fn cuda_graphs(mut self, enabled: bool) -> ModelOptions {
        self.raw.cuda_graphs = i32::from(enabled);
        self
    }

    /// The least precise arithmetic the model may use: an upper bound on its error (see
    /// [`Precision`]). The CPU always runs in fp32; [`Model::precision`] says what runs.
    pub fn precision(mut self, precision: Precision) -> ModelOptions {
        self.raw.precision = precision.to_raw();
        self
    }

    /// The most scratch memory, in bytes, one execution context may take; a model that needs
    /// more fails with an out-of-memory error naming the option when it is prepared (its first
    /// run or context), before anything is allocated. 0 means no limit; the default is 64 GiB.
    /// Lower it for models from untrusted sources: a small file can ask for a large workspace.
    pub fn max_workspace_bytes(mut self, bytes: u64) -> ModelOptions {
        self.raw.max_workspace_bytes = bytes;
        self
    }

    /// The most memory, in bytes, the model's weights may take: the spec's declared tensors as
    /// float32 (checked when the model is created, before any weight is read) and the backend's
    /// copy (checked when it is prepared). 0 means no limit; the default is 256 GiB.
    pub fn max_weight_bytes(mut self, bytes: u64) -> ModelOptions {
        self.raw.max_weight_bytes = bytes;
        self
    }

    /// GPU only: how host-buffer runs move the input and output (see [`HostIo`]);
    /// [`Context::host_io`] says which path a context takes. The default is [`HostIo::Auto`].
    pub fn host_io(mut self, host_io: HostIo) -> ModelOptions {
        self.raw.host_io = host_io.to_raw();
        self
    }

    /// The C struct, for callers mixing this crate with `fusednn-sys`.
    pub fn as_raw(&self) -> &sys::fdnn_model_options {
        &self.raw
    }
}

impl Default for ModelOptions {
    fn default() -> ModelOptions {
        ModelOptions::new()
    }
}

/// The per-sample shapes and batch limit of a model: what a run's buffer lengths must match.
#[derive(Debug, Clone)]
pub(crate) struct RunLayout {
    pub(crate) input_shape: Shape,
    pub(crate) output_shape: Shape,
    pub(crate) max_batch: usize,
}

impl RunLayout {
    /// Number of output floats a run of `batch` samples writes, after checking the batch and the
    /// buffer lengths against the model's shapes.
    pub(crate) fn check(&self, batch: usize, input_len: usize, output_len: usize) -> Result<usize> {
        self.check_counts(batch, input_len, output_len, "floats")
    }

    /// As [`RunLayout::check`], with `unit` naming what the lengths count ("elements").
    pub(crate) fn check_counts(
        &self,
        batch: usize,
        input_len: usize,
        output_len: usize,
        unit: &str,
    ) -> Result<usize> {
        if batch == 0 || batch > self.max_batch {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "batch is {batch}; it must be from 1 to the model's max_batch {}",
                    self.max_batch
                ),
            ));
        }
        let too_large = || {
            Error::new(
                Status::InvalidArgument,
                format!("batch {batch} is too large"),
            )
        };
        let input_needed = batch
            .checked_mul(self.input_shape.element_count())
            .ok_or_else(too_large)?;
        let output_needed = batch
            .checked_mul(self.output_shape.element_count())
            .ok_or_else(too_large)?;
        if input_len != input_needed {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "input holds {input_len} {unit}, but batch {batch} x input shape {} needs {input_needed}",
                    self.input_shape
                ),
            ));
        }
        if output_len < output_needed {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!(
                    "output holds {output_len} {unit}, but batch {batch} x output shape {} needs {output_needed}",
                    self.output_shape
                ),
            ));
        }
        Ok(output_needed)
    }
}

/// A NUL-terminated copy of `text` for the C API; a NUL inside is an invalid argument.
pub(crate) fn c_string(what: &str, text: &[u8]) -> Result<CString> {
    CString::new(text).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!(
                "{what} contains a NUL byte: {}",
                String::from_utf8_lossy(text)
            ),
        )
    })
}

fn path_to_c(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        c_string("path", path.as_os_str().as_bytes())
    }
    #[cfg(not(unix))]
    {
        match path.to_str() {
            Some(text) => c_string("path", text.as_bytes()),
            None => Err(Error::new(
                Status::InvalidArgument,
                format!("path {} is not valid Unicode", path.display()),
            )),
        }
    }
}

/// A network loaded by the library: its graph, its weights and the backend it runs on.
///
/// # Threads
///
/// A `Model` is [`Send`] and [`Sync`]: the C contract lets any number of threads run one model at
/// once and query it, as long as nothing overlaps loading its weights. Loading
/// ([`load_weights`](Model::load_weights), [`set_weight`](Model::set_weight)) takes `&mut self`,
/// so the borrow checker keeps it apart from every other call; everything else takes `&self`.
/// Share a model across threads with `&Model` (scoped threads) or `Arc<Model>`.
///
/// # Lifecycle
///
/// The first run (or the first [`Context`]) freezes the weights: loading after that fails with
/// [`Status::InvalidState`]. Dropping the model frees it; contexts created from it stay usable.
///
/// ```no_run
/// let model = fusednn::Model::from_file("mlp.safetensors")?;
/// let batch = 2;
/// let input = vec![0.5f32; batch * model.input_shape().element_count()];
/// let output = model.run(batch, &input)?;
/// assert_eq!(output.len(), batch * model.output_shape().element_count());
/// # Ok::<(), fusednn::Error>(())
/// ```
#[derive(Debug)]
pub struct Model {
    raw: NonNull<sys::fdnn_model>,
    layout: RunLayout,
}

// SAFETY: the library keeps no thread affinity for a model; destroying it from the thread that
// owns the `Model` is allowed because no other thread can be using it then.
unsafe impl Send for Model {}
// SAFETY: every `&self` method calls a function the header documents as thread-safe (once the
// weights are loaded); the calls that must not overlap anything take `&mut self`.
unsafe impl Sync for Model {}

impl Model {
    /// Opens a JSON model spec (weights to be loaded next) or a safetensors bundle (weights
    /// included), with default options.
    ///
    /// Errors: [`Status::IoError`] naming the path when it cannot be read,
    /// [`Status::ParseError`], [`Status::InvalidModel`], [`Status::WeightMismatch`],
    /// [`Status::Unsupported`], [`Status::OutOfMemory`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Model> {
        Model::from_file_with_options(path, &ModelOptions::new())
    }

    /// Like [`Model::from_file`], with options.
    pub fn from_file_with_options(path: impl AsRef<Path>, options: &ModelOptions) -> Result<Model> {
        let path = path_to_c(path.as_ref())?;
        let mut raw = ptr::null_mut();
        // SAFETY: path is NUL-terminated, options is a valid struct, raw is writable.
        check(unsafe { sys::fdnn_model_create_from_file(path.as_ptr(), &options.raw, &mut raw) })?;
        Model::adopt(raw)
    }

    /// Creates a model from a model file's bytes held in memory (a bundle, e.g. one embedded with
    /// `include_bytes!`, or a JSON spec), with default options. The library copies what it needs.
    ///
    /// Errors: [`Status::ParseError`] (empty, truncated, neither format), [`Status::InvalidModel`],
    /// [`Status::WeightMismatch`], [`Status::Unsupported`], [`Status::OutOfMemory`].
    pub fn from_bytes(data: &[u8]) -> Result<Model> {
        Model::from_bytes_with_options(data, &ModelOptions::new())
    }

    /// Like [`Model::from_bytes`], with options.
    pub fn from_bytes_with_options(data: &[u8], options: &ModelOptions) -> Result<Model> {
        let mut raw = ptr::null_mut();
        // SAFETY: the pointer and length describe a live byte slice (a non-null pointer even when
        // empty), options is a valid struct, raw is writable.
        check(unsafe {
            sys::fdnn_model_create_from_memory(
                data.as_ptr().cast(),
                data.len(),
                &options.raw,
                &mut raw,
            )
        })?;
        Model::adopt(raw)
    }

    /// Creates a model from a JSON spec held in memory, with default options; load its weights
    /// next with [`Model::load_weights`] or [`Model::set_weight`].
    ///
    /// Errors: [`Status::ParseError`] (with line and column), [`Status::InvalidModel`],
    /// [`Status::Unsupported`], [`Status::OutOfMemory`].
    pub fn from_spec(spec_json: &str) -> Result<Model> {
        Model::from_spec_with_options(spec_json, &ModelOptions::new())
    }

    /// Like [`Model::from_spec`], with options.
    pub fn from_spec_with_options(spec_json: &str, options: &ModelOptions) -> Result<Model> {
        let mut raw = ptr::null_mut();
        // SAFETY: the spec pointer and length describe a live byte slice (no NUL needed), options
        // is a valid struct, raw is writable.
        check(unsafe {
            sys::fdnn_model_create_from_spec(
                spec_json.as_ptr().cast(),
                spec_json.len(),
                &options.raw,
                &mut raw,
            )
        })?;
        Model::adopt(raw)
    }

    /// Takes ownership of a freshly created handle and reads the shapes runs are checked against.
    fn adopt(raw: *mut sys::fdnn_model) -> Result<Model> {
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(
                Status::InternalError,
                "the library reported success but returned no model",
            )
        })?;
        // From here on, dropping `model` destroys the handle, also on the error paths below.
        let mut model = Model {
            raw,
            layout: RunLayout {
                input_shape: Shape::default(),
                output_shape: Shape::default(),
                max_batch: 0,
            },
        };
        let mut input = Shape::empty_raw();
        let mut output = Shape::empty_raw();
        let mut max_batch = 0i64;
        // SAFETY: the handle is live and every out-pointer is writable.
        unsafe {
            check(sys::fdnn_model_input_shape(model.raw.as_ptr(), &mut input))?;
            check(sys::fdnn_model_output_shape(
                model.raw.as_ptr(),
                &mut output,
            ))?;
            check(sys::fdnn_model_max_batch(
                model.raw.as_ptr(),
                &mut max_batch,
            ))?;
        }
        model.layout = RunLayout {
            input_shape: Shape::from_raw(&input)?,
            output_shape: Shape::from_raw(&output)?,
            max_batch: usize::try_from(max_batch).unwrap_or(0),
        };
        Ok(model)
    }

    /// Loads weights from a `.safetensors` file or from a directory of `<name>.bin` (raw
    /// little-endian float32) / `<name>.txt` (one number per line) files.
    ///
    /// Every tensor is checked against the spec; on a mismatch nothing is loaded. Tensors the
    /// file lacks may come from later calls. F32, F16 and BF16 are converted to float32.
    ///
    /// Errors: [`Status::IoError`], [`Status::ParseError`], [`Status::WeightMismatch`] naming the
    /// tensor and both shapes, [`Status::InvalidState`] once the weights are frozen.
    pub fn load_weights(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_c(path.as_ref())?;
        // SAFETY: the handle is live and exclusively borrowed; path is NUL-terminated.
        check(unsafe { sys::fdnn_model_load_weights(self.raw.as_ptr(), path.as_ptr()) })
    }

    /// Sets one float32 weight tensor, named as in the PyTorch state_dict (`"fc1.weight"`), with
    /// its extents (which must equal the spec's) and its elements in C order. The data is copied.
    ///
    /// Errors: [`Status::InvalidArgument`] when `data.len()` is not the product of `shape` or
    /// the rank exceeds [`MAX_RANK`], [`Status::WeightMismatch`], [`Status::InvalidState`] once
    /// the weights are frozen.
    pub fn set_weight(&mut self, name: &str, shape: &[usize], data: &[f32]) -> Result<()> {
        self.set_weight_raw(
            name,
            sys::FDNN_DTYPE_FLOAT32,
            shape,
            data.as_ptr().cast(),
            data.len(),
        )
    }

    /// Sets one weight tensor given as IEEE 754 binary16 bit patterns; see [`Model::set_weight`].
    pub fn set_weight_f16(&mut self, name: &str, shape: &[usize], bits: &[u16]) -> Result<()> {
        self.set_weight_raw(
            name,
            sys::FDNN_DTYPE_FLOAT16,
            shape,
            bits.as_ptr().cast(),
            bits.len(),
        )
    }

    /// Sets one weight tensor given as bfloat16 bit patterns (the upper 16 bits of a float32);
    /// see [`Model::set_weight`].
    pub fn set_weight_bf16(&mut self, name: &str, shape: &[usize], bits: &[u16]) -> Result<()> {
        self.set_weight_raw(
            name,
            sys::FDNN_DTYPE_BFLOAT16,
            shape,
            bits.as_ptr().cast(),
            bits.len(),
        )
    }

    fn set_weight_raw(
        &mut self,
        name: &str,
        dtype: sys::fdnn_dtype,
        shape: &[usize],
        data: *const c_void,
        element_count: usize,
    ) -> Result<()> {
        if shape.len() > MAX_RANK {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "weight '{name}' has rank {}; at most {MAX_RANK} is supported",
                    shape.len()
                ),
            ));
        }
        let extents = Shape::new(shape);
        if shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) != Some(element_count) {
            return Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "weight '{name}' has {element_count} elements, but shape {extents} needs {}",
                    extents.element_count()
                ),
            ));
        }
        let dims = shape
            .iter()
            .map(|&d| i64::try_from(d))
            .collect::<std::result::Result<Vec<i64>, _>>()
            .map_err(|_| {
                Error::new(
                    Status::InvalidArgument,
                    format!("weight '{name}': extent too large"),
                )
            })?;
        let name_c = c_string("weight name", name.as_bytes())?;
        // An empty slice may have a dangling pointer; the library wants a real one.
        let placeholder = 0u32;
        let data = if element_count == 0 {
            (&placeholder as *const u32).cast()
        } else {
            data
        };
        // SAFETY: the handle is exclusively borrowed; data holds element_count elements of dtype;
        // dims holds shape.len() extents (at most MAX_RANK, so the cast to i32 is exact).
        check(unsafe {
            sys::fdnn_model_set_weight(
                self.raw.as_ptr(),
                name_c.as_ptr(),
                dtype,
                data,
                dims.as_ptr(),
                dims.len() as i32,
            )
        })
    }

    /// Checks the weights: all present and all finite.
    ///
    /// Errors: [`Status::WeightMismatch`] naming the missing tensors, [`Status::NonFiniteWeight`]
    /// naming each tensor holding NaN or Inf and its first bad index.
    pub fn validate(&self) -> Result<()> {
        // SAFETY: the handle is live; validation only reads the model.
        check(unsafe { sys::fdnn_model_validate(self.raw.as_ptr()) })
    }

    /// The per-sample input shape (without the batch dimension).
    pub fn input_shape(&self) -> &Shape {
        &self.layout.input_shape
    }

    /// The per-sample output shape (without the batch dimension).
    pub fn output_shape(&self) -> &Shape {
        &self.layout.output_shape
    }

    /// The largest batch a run accepts ([`ModelOptions::max_batch`]).
    pub fn max_batch(&self) -> usize {
        self.layout.max_batch
    }

    /// The device the model runs on; never [`Device::Auto`], which resolves when the model is
    /// created.
    pub fn device(&self) -> Result<Device> {
        let mut raw = sys::FDNN_DEVICE_CPU;
        // SAFETY: the handle is live and raw is writable.
        check(unsafe { sys::fdnn_model_device(self.raw.as_ptr(), &mut raw) })?;
        Device::from_raw(raw)
    }

    /// The precision the model runs its matrix work in: the one asked for with
    /// [`ModelOptions::precision`] or a more precise one; always [`Precision::Fp32`] on the CPU.
    ///
    /// Errors: for a GPU model before its first run, the first query sets up the backend and may
    /// fail with [`Status::OutOfMemory`] or [`Status::DeviceError`].
    pub fn precision(&self) -> Result<Precision> {
        let mut raw = sys::FDNN_PRECISION_FP32;
        // SAFETY: the handle is live and raw is writable; the query is thread-safe.
        check(unsafe { sys::fdnn_model_precision(self.raw.as_ptr(), &mut raw) })?;
        Precision::from_raw(raw)
    }

    /// The parameter count and the memory the model and each context use.
    pub fn memory_info(&self) -> Result<MemoryInfo> {
        let mut raw = sys::fdnn_memory_info {
            struct_size: std::mem::size_of::<sys::fdnn_memory_info>(),
            parameter_count: 0,
            weight_bytes: 0,
            context_bytes: 0,
            flops_per_sample: 0.0,
            bytes_per_sample: 0.0,
        };
        // SAFETY: the handle is live and raw is a writable struct with struct_size set.
        check(unsafe { sys::fdnn_model_memory_info(self.raw.as_ptr(), &mut raw) })?;
        Ok(MemoryInfo {
            parameter_count: u64::try_from(raw.parameter_count).unwrap_or(0),
            weight_bytes: raw.weight_bytes,
            context_bytes: raw.context_bytes,
            flops_per_sample: raw.flops_per_sample,
            bytes_per_sample: raw.bytes_per_sample,
        })
    }

    /// How a run of `batch` samples would go, as a JSON document (`fdnn_model_explain`): for
    /// each kernel the backend runs, the spec layers it covers, the activations fused into it,
    /// the kernel form chosen at this batch and why, where its output lives, and its nominal
    /// FLOPs and bytes (fields: docs/bindings.md, "Explaining the plan"). Works before the
    /// weights are loaded and freezes nothing.
    ///
    /// Errors: [`Status::InvalidArgument`] for a batch outside 1..=max_batch; for a GPU model
    /// before its first run, what setting up the backend may fail with.
    pub fn explain_json(&self, batch: usize) -> Result<String> {
        self.explain(batch, sys::FDNN_EXPLAIN_FORMAT_JSON)
    }

    /// The same as [`Model::explain_json`], as the table `fusednn info MODEL --plan` prints.
    pub fn explain_text(&self, batch: usize) -> Result<String> {
        self.explain(batch, sys::FDNN_EXPLAIN_FORMAT_TEXT)
    }

    fn explain(&self, batch: usize, format: sys::fdnn_explain_format) -> Result<String> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let mut size = 0usize;
        // SAFETY: the handle is live; a null buffer with capacity 0 asks for the size only.
        check(unsafe {
            sys::fdnn_model_explain(
                self.raw.as_ptr(),
                batch,
                format,
                ptr::null_mut(),
                0,
                &mut size,
            )
        })?;
        let mut buffer = vec![0u8; size];
        // SAFETY: buffer holds buffer.len() writable bytes; size is writable.
        check(unsafe {
            sys::fdnn_model_explain(
                self.raw.as_ptr(),
                batch,
                format,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                &mut size,
            )
        })?;
        buffer.truncate(size.saturating_sub(1));
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// The number of layers in the spec.
    pub fn layer_count(&self) -> Result<usize> {
        let mut count = 0i32;
        // SAFETY: the handle is live and count is writable.
        check(unsafe { sys::fdnn_model_layer_count(self.raw.as_ptr(), &mut count) })?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Describes layer `index` (0 to [`Model::layer_count`] - 1) as written in the spec.
    ///
    /// Errors: [`Status::InvalidArgument`] for an index out of range.
    pub fn layer_info(&self, index: usize) -> Result<LayerInfo> {
        let index = i32::try_from(index).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!("layer index {index} is out of range"),
            )
        })?;
        let mut raw = sys::fdnn_layer_info {
            struct_size: std::mem::size_of::<sys::fdnn_layer_info>(),
            name: ptr::null(),
            r#type: ptr::null(),
            output_shape: Shape::empty_raw(),
            parameter_count: 0,
        };
        // SAFETY: the handle is live and raw is a writable struct with struct_size set; the
        // strings it receives are owned by the model, which `self` keeps alive while they are
        // copied.
        unsafe {
            check(sys::fdnn_model_layer_info(
                self.raw.as_ptr(),
                index,
                &mut raw,
            ))?;
            Ok(LayerInfo {
                name: copy_c_string(raw.name),
                layer_type: copy_c_string(raw.r#type),
                output_shape: Shape::from_raw(&raw.output_shape)?,
                parameter_count: u64::try_from(raw.parameter_count).unwrap_or(0),
            })
        }
    }

    /// Every layer, in spec order.
    pub fn layers(&self) -> Result<Vec<LayerInfo>> {
        (0..self.layer_count()?)
            .map(|index| self.layer_info(index))
            .collect()
    }

    /// Runs `batch` samples and returns the outputs, `batch` x [`Model::output_shape`] floats in
    /// C order.
    ///
    /// `input` holds exactly `batch` x [`Model::input_shape`] floats in C order. Safe to call from
    /// many threads at once: each call borrows an execution context from the model's pool. The
    /// first run freezes the weights.
    ///
    /// Errors: [`Status::InvalidArgument`] for a batch outside 1..=[`Model::max_batch`] or an
    /// input of the wrong length (both checked before calling the library),
    /// [`Status::InvalidState`] when weights are missing, [`Status::OutOfMemory`],
    /// [`Status::DeviceError`].
    pub fn run(&self, batch: usize, input: &[f32]) -> Result<Vec<f32>> {
        // Check before allocating: a wild batch must be an error, not a huge allocation.
        let output_len = self.layout.check(batch, input.len(), usize::MAX)?;
        let mut output = vec![0.0f32; output_len];
        self.run_into(batch, input, &mut output)?;
        Ok(output)
    }

    /// Runs `batch` samples, writing `batch` x [`Model::output_shape`] floats to the start of
    /// `output`; any further elements are left as they were. On error nothing is written.
    ///
    /// Errors: as [`Model::run`], plus [`Status::BufferTooSmall`] when `output` is shorter than
    /// the result (checked before calling the library).
    pub fn run_into(&self, batch: usize, input: &[f32], output: &mut [f32]) -> Result<()> {
        self.layout.check(batch, input.len(), output.len())?;
        // SAFETY: the handle is live; runs are thread-safe per the header; the lengths passed
        // are the slices' own, so the library reads and writes only inside them. batch was
        // checked against max_batch, which fits in i64.
        check(unsafe {
            sys::fdnn_model_run(
                self.raw.as_ptr(),
                batch as i64,
                input.as_ptr(),
                input.len(),
                output.as_mut_ptr(),
                output.len(),
            )
        })
    }

    /// Runs `batch` samples with the input and the output each in its own [`Dtype`]: `f32`
    /// slices for [`Dtype::Float32`], `u16` slices of bits for [`Dtype::Float16`] and
    /// [`Dtype::Bfloat16`] (`fdnn_model_run_typed`). Writes `batch` x [`Model::output_shape`]
    /// elements to the start of `output`; on error nothing is written. Thread-safe, as
    /// [`Model::run`].
    ///
    /// A 16-bit input is widened exactly, a 16-bit output rounded to nearest even; with
    /// `Float32` both ways it is [`Model::run_into`]. Each pooled context allocates its `f32`
    /// conversion buffers (for max_batch) on its first run that needs them.
    ///
    /// Errors: [`Status::InvalidArgument`] for a slice whose element type does not fit its dtype
    /// or a length that does not match the shapes, [`Status::BufferTooSmall`], and those of
    /// [`Model::run`].
    pub fn run_typed<I: Element, O: Element>(
        &self,
        batch: usize,
        input: &[I],
        input_dtype: Dtype,
        output: &mut [O],
        output_dtype: Dtype,
    ) -> Result<()> {
        check_element::<I>(input_dtype, "input_dtype")?;
        check_element::<O>(output_dtype, "output_dtype")?;
        self.layout
            .check_counts(batch, input.len(), output.len(), "elements")?;
        // SAFETY: as run_into; the element sizes match the dtypes (checked above), so the
        // library reads and writes only inside the slices.
        check(unsafe {
            sys::fdnn_model_run_typed(
                self.raw.as_ptr(),
                batch as i64,
                input.as_ptr().cast(),
                input_dtype.to_raw(),
                input.len(),
                output.as_mut_ptr().cast(),
                output_dtype.to_raw(),
                output.len(),
            )
        })
    }

    /// Creates an execution context: scratch memory for [`Model::max_batch`] samples, allocated
    /// now so that its runs allocate nothing. Freezes the weights. Same as [`Context::new`].
    pub fn create_context(&self) -> Result<Context> {
        Context::new(self)
    }

    /// The raw handle, for calls through `fusednn-sys`. It stays owned by this `Model`: do not
    /// destroy it, and keep to the C thread-safety rules.
    pub fn as_raw(&self) -> *mut sys::fdnn_model {
        self.raw.as_ptr()
    }

    pub(crate) fn layout(&self) -> &RunLayout {
        &self.layout
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the handle is owned by this value and nothing else uses it any more; contexts
        // keep their own reference to the weights.
        unsafe { sys::fdnn_model_destroy(self.raw.as_ptr()) }
    }
}
