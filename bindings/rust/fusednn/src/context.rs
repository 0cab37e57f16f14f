// SPDX-License-Identifier: Apache-2.0
//! [`Context`]: the scratch memory of one run in flight, owned by one thread at a time.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use fusednn_sys as sys;

use crate::dtype::{check_element, Dtype, Element};
use crate::error::{check, Error, Result, Status};
use crate::info::Shape;
use crate::model::{HostIo, Model, RunLayout};

/// An execution context: the scratch memory (and, on a GPU, the stream) that one run needs,
/// allocated once for the model's max batch so that its runs allocate nothing.
///
/// Create one per thread for the lowest latency; [`Model::run`] instead borrows one from the
/// model's pool on each call. A context keeps its model's weights alive, so it does not borrow
/// the [`Model`]: the model may be dropped first.
///
/// # Threads
///
/// The C contract allows one thread at a time per context. A `Context` is therefore [`Send`]
/// (move it to the thread that uses it) but not [`Sync`] (it cannot be shared between threads),
/// and its runs take `&mut self`. Different contexts of one model may run at the same time.
///
/// ```compile_fail
/// fn shared_between_threads<T: Sync>() {}
/// shared_between_threads::<fusednn::Context>();
/// ```
///
/// ```no_run
/// let model = fusednn::Model::from_file("mlp.safetensors")?;
/// std::thread::scope(|scope| {
///     for _ in 0..4 {
///         let mut context = model.create_context().unwrap();
///         scope.spawn(move || {
///             let input = vec![0.0f32; context.input_shape().element_count()];
///             context.run(1, &input).unwrap()
///         });
///     }
/// });
/// # Ok::<(), fusednn::Error>(())
/// ```
#[derive(Debug)]
pub struct Context {
    raw: NonNull<sys::fdnn_context>,
    layout: RunLayout,
    /// `Cell` is `Send` but not `Sync`, as a context is.
    _one_thread_at_a_time: PhantomData<Cell<()>>,
}

// SAFETY: a context may be used from any thread, one thread at a time; moving it hands it over.
unsafe impl Send for Context {}

impl Context {
    /// Creates a context for `model`, whose weights must all be loaded. Freezes the weights.
    ///
    /// Errors: [`Status::InvalidState`] when weights are missing, [`Status::OutOfMemory`],
    /// [`Status::DeviceError`].
    pub fn new(model: &Model) -> Result<Context> {
        let mut raw = ptr::null_mut();
        // SAFETY: the model handle is live and no load can overlap (loads need `&mut Model`);
        // context creation is thread-safe once the weights are loaded, and fails cleanly before.
        check(unsafe { sys::fdnn_context_create(model.as_raw(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(
                Status::InternalError,
                "the library reported success but returned no context",
            )
        })?;
        Ok(Context {
            raw,
            layout: model.layout().clone(),
            _one_thread_at_a_time: PhantomData,
        })
    }

    /// The per-sample input shape of the context's model.
    pub fn input_shape(&self) -> &Shape {
        &self.layout.input_shape
    }

    /// The per-sample output shape of the context's model.
    pub fn output_shape(&self) -> &Shape {
        &self.layout.output_shape
    }

    /// The largest batch a run accepts.
    pub fn max_batch(&self) -> usize {
        self.layout.max_batch
    }

    /// How this context's host-buffer runs move the data on a GPU: [`HostIo::Staged`] or
    /// [`HostIo::Mapped`] (C `fdnn_context_host_io`).
    ///
    /// Errors: [`Status::Unsupported`] when the model runs on the CPU, which reads the caller's
    /// buffers directly.
    pub fn host_io(&self) -> Result<HostIo> {
        let mut raw = sys::FDNN_HOST_IO_AUTO;
        // SAFETY: the context is live; the call only reads it and writes `raw`.
        check(unsafe { sys::fdnn_context_host_io(self.raw.as_ptr(), &mut raw) })?;
        HostIo::from_raw(raw)
    }

    /// Runs `batch` samples with this context's scratch memory; see [`Model::run`] for the
    /// arguments and errors.
    pub fn run(&mut self, batch: usize, input: &[f32]) -> Result<Vec<f32>> {
        // Check before allocating: a wild batch must be an error, not a huge allocation.
        let output_len = self.layout.check(batch, input.len(), usize::MAX)?;
        let mut output = vec![0.0f32; output_len];
        self.run_into(batch, input, &mut output)?;
        Ok(output)
    }

    /// Runs `batch` samples into the start of `output`; see [`Model::run_into`].
    pub fn run_into(&mut self, batch: usize, input: &[f32], output: &mut [f32]) -> Result<()> {
        self.layout.check(batch, input.len(), output.len())?;
        // SAFETY: the context is exclusively borrowed (one thread at a time); the lengths are
        // the slices' own; batch was checked against max_batch, which fits in i64.
        check(unsafe {
            sys::fdnn_context_run(
                self.raw.as_ptr(),
                batch as i64,
                input.as_ptr(),
                input.len(),
                output.as_mut_ptr(),
                output.len(),
            )
        })
    }

    /// Runs `batch` samples in the caller's [`Dtype`]s with this context's scratch memory; see
    /// [`Model::run_typed`]. The first run that needs them allocates the context's `f32`
    /// conversion buffers (for max_batch); later runs allocate nothing.
    pub fn run_typed<I: Element, O: Element>(
        &mut self,
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
        // SAFETY: as run_into; the element sizes match the dtypes (checked above).
        check(unsafe {
            sys::fdnn_context_run_typed(
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

    /// [`Context::run_device`] with the input and output in their own [`Dtype`]s
    /// (`fdnn_context_run_device_typed`): a 16-bit side is converted on the GPU, on
    /// `cuda_stream`, through the context's own `f32` buffers. Counts are in elements.
    ///
    /// Errors: as [`Context::run_device`].
    ///
    /// # Safety
    /// As [`Context::run_device`], with `device_input` pointing to `input_count` elements of
    /// `input_dtype` and `device_output` to `output_capacity` elements of `output_dtype`, each
    /// aligned to its element size.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_device_typed(
        &mut self,
        batch: usize,
        device_input: *const std::ffi::c_void,
        input_dtype: Dtype,
        input_count: usize,
        device_output: *mut std::ffi::c_void,
        output_dtype: Dtype,
        output_capacity: usize,
        cuda_stream: *mut std::ffi::c_void,
    ) -> Result<()> {
        self.layout
            .check_counts(batch, input_count, output_capacity, "elements")?;
        check(sys::fdnn_context_run_device_typed(
            self.raw.as_ptr(),
            batch as i64,
            device_input,
            input_dtype.to_raw(),
            input_count,
            device_output,
            output_dtype.to_raw(),
            output_capacity,
            cuda_stream,
        ))
    }

    /// Runs `batch` samples on device buffers, queued on the caller's CUDA stream: nothing is
    /// copied or allocated, and the host does not wait unless `cuda_stream` is null (then the
    /// context's own stream is used and the call waits for the results).
    ///
    /// The batch is checked against [`Context::max_batch`] and the counts against the model's
    /// shapes here; the pointers cannot be.
    ///
    /// Errors: [`Status::Unsupported`] when the model runs on the CPU, [`Status::InvalidArgument`],
    /// [`Status::BufferTooSmall`], [`Status::DeviceError`].
    ///
    /// # Safety
    /// `device_input` must point to `input_count` floats and `device_output` to
    /// `output_capacity` floats of device memory on the model's GPU, and `cuda_stream` must be a
    /// `cudaStream_t` of that device or null. Both buffers must stay allocated, and the output
    /// unread, until the stream has passed this work.
    pub unsafe fn run_device(
        &mut self,
        batch: usize,
        device_input: *const f32,
        input_count: usize,
        device_output: *mut f32,
        output_capacity: usize,
        cuda_stream: *mut std::ffi::c_void,
    ) -> Result<()> {
        self.layout.check(batch, input_count, output_capacity)?;
        check(sys::fdnn_context_run_device(
            self.raw.as_ptr(),
            batch as i64,
            device_input,
            input_count,
            device_output,
            output_capacity,
            cuda_stream,
        ))
    }

    /// The raw handle, for calls through `fusednn-sys`. It stays owned by this `Context`.
    pub fn as_raw(&self) -> *mut sys::fdnn_context {
        self.raw.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the handle is owned by this value and cannot be running (runs borrow it).
        unsafe { sys::fdnn_context_destroy(self.raw.as_ptr()) }
    }
}
