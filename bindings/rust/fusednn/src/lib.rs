// SPDX-License-Identifier: Apache-2.0
//! Safe Rust interface to fusednn: load a small PyTorch-trained network and run it.
//!
//! ```no_run
//! use fusednn::{Model, ModelOptions, Status};
//!
//! // A bundle: a safetensors file whose metadata carries the model spec.
//! let model = Model::from_file_with_options("mlp.safetensors", &ModelOptions::new().max_batch(32))?;
//! let input = vec![0.25f32; 4 * model.input_shape().element_count()];
//! let output = model.run(4, &input)?;
//! println!("{} outputs per sample", output.len() / 4);
//!
//! match Model::from_file("missing.safetensors") {
//!     Err(error) if error.status() == Status::IoError => eprintln!("{}", error.message()),
//!     other => panic!("unexpected: {other:?}"),
//! }
//! # Ok::<(), fusednn::Error>(())
//! ```
//!
//! * [`Model`] owns a network. It is `Send + Sync`: many threads may run it at once. Loading
//!   weights needs `&mut Model`, so it can never overlap another call, as the C API requires.
//! * [`Context`] holds the scratch memory of one run; it is `Send` but not `Sync`.
//! * Every fallible call returns [`Result`]; an [`Error`] carries a [`Status`] mirroring the C
//!   `fdnn_status` and the message the library wrote for the calling thread.
//! * Buffer lengths are checked against the model's shapes before the library is called.
//! * Inputs and outputs are `f32`, or float16 / bfloat16 bits in `u16` through
//!   [`Model::run_typed`] and [`Context::run_typed`] (each side its own [`Dtype`]).
//!
//! The native library is linked by `fusednn-sys`: set `FUSEDNN_DIR` or `FUSEDNN_LIB_DIR` (or make
//! `pkg-config fusednn` work) when building, and `LD_LIBRARY_PATH` when running.

#![warn(missing_docs)]

mod context;
mod dtype;
mod error;
mod info;
mod model;
mod precision;

use std::ffi::CStr;

/// The raw C declarations (the `fusednn-sys` crate), for use with [`Model::as_raw`] and
/// [`Context::as_raw`].
pub use fusednn_sys as sys;

pub use context::Context;
pub use dtype::{Dtype, Element};
pub use error::{Error, Result, Status};
pub use info::{LayerInfo, MemoryInfo, Shape, Version, MAX_RANK};
pub use model::{Device, HostIo, Model, ModelOptions};
pub use precision::Precision;

/// The version of the loaded library (which may be newer than [`Version::HEADER`]).
pub fn version() -> Version {
    // SAFETY: no arguments; thread-safe.
    Version::from_number(unsafe { sys::fdnn_version() })
}

/// The loaded library's version as the library spells it, `"major.minor.patch"`.
pub fn version_string() -> &'static str {
    // SAFETY: returns a static NUL-terminated string; thread-safe.
    let text = unsafe { CStr::from_ptr(sys::fdnn_version_string()) };
    text.to_str().unwrap_or("")
}

/// The number of usable GPUs: 0 when the library was built without CUDA or sees no GPU.
pub fn cuda_device_count() -> Result<usize> {
    let mut count = 0i32;
    // SAFETY: count is writable; thread-safe.
    error::check(unsafe { sys::fdnn_cuda_device_count(&mut count) })?;
    Ok(usize::try_from(count).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn thread_markers_follow_the_c_contract() {
        assert_send_sync::<Model>();
        assert_send::<Context>();
        assert_send_sync::<Error>();
        // Context is not Sync: see the compile_fail example on `Context`.
    }

    #[test]
    fn version_numbers_round_trip() {
        let version = Version::from_number(10203);
        assert_eq!((version.major, version.minor, version.patch), (1, 2, 3));
        assert_eq!(version.number(), 10203);
        assert_eq!(version.to_string(), "1.2.3");
        assert_eq!(Version::HEADER.number(), sys::FDNN_VERSION_NUMBER);
    }

    #[test]
    fn status_codes_round_trip() {
        assert_eq!(Status::from_raw(sys::FDNN_STATUS_OK), None);
        for code in 1..=12 {
            let status = Status::from_raw(code).unwrap();
            assert_ne!(status, Status::Unknown(code));
            assert_eq!(status.code(), code);
        }
        assert_eq!(Status::from_raw(99), Some(Status::Unknown(99)));
    }
}
