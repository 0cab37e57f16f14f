// SPDX-License-Identifier: Apache-2.0
//! Errors: the status code of a failed call and the message the library gave for it.

use std::ffi::CStr;
use std::fmt;

use fusednn_sys as sys;

/// Why a call failed: the failure codes of the C `fdnn_status`, with the same pinned values.
///
/// Success has no variant here; it is the `Ok` of [`Result`]. A library newer than this crate
/// may return a code this crate does not know: that arrives as [`Status::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// A bad value, a wrong buffer length or an out-of-range batch (`FDNN_STATUS_INVALID_ARGUMENT`).
    InvalidArgument,
    /// A file or directory is missing or cannot be read (`FDNN_STATUS_IO_ERROR`).
    IoError,
    /// A file is malformed: JSON syntax, safetensors layout (`FDNN_STATUS_PARSE_ERROR`).
    ParseError,
    /// The model spec is wrong: unknown layer, bad dims, shapes (`FDNN_STATUS_INVALID_MODEL`).
    InvalidModel,
    /// A weight is missing, extra, mis-shaped or mis-typed (`FDNN_STATUS_WEIGHT_MISMATCH`).
    WeightMismatch,
    /// The call is not allowed now, such as a run before the weights are loaded or a load after
    /// the first run (`FDNN_STATUS_INVALID_STATE`).
    InvalidState,
    /// An output buffer cannot hold the result (`FDNN_STATUS_BUFFER_TOO_SMALL`).
    BufferTooSmall,
    /// Host or device memory could not be allocated (`FDNN_STATUS_OUT_OF_MEMORY`).
    OutOfMemory,
    /// The feature is not available in this build or on this device (`FDNN_STATUS_UNSUPPORTED`).
    Unsupported,
    /// [`Model::validate`](crate::Model::validate) found a NaN or Inf weight
    /// (`FDNN_STATUS_NON_FINITE_WEIGHT`).
    NonFiniteWeight,
    /// The GPU runtime reported an error (`FDNN_STATUS_DEVICE_ERROR`).
    DeviceError,
    /// A bug in fusednn; please report the message (`FDNN_STATUS_INTERNAL_ERROR`).
    InternalError,
    /// A failure code this crate does not know (from a newer library).
    Unknown(i32),
}

impl Status {
    /// The status for a raw C code, or `None` for `FDNN_STATUS_OK`.
    pub fn from_raw(code: sys::fdnn_status) -> Option<Status> {
        Some(match code {
            sys::FDNN_STATUS_OK => return None,
            sys::FDNN_STATUS_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::FDNN_STATUS_IO_ERROR => Status::IoError,
            sys::FDNN_STATUS_PARSE_ERROR => Status::ParseError,
            sys::FDNN_STATUS_INVALID_MODEL => Status::InvalidModel,
            sys::FDNN_STATUS_WEIGHT_MISMATCH => Status::WeightMismatch,
            sys::FDNN_STATUS_INVALID_STATE => Status::InvalidState,
            sys::FDNN_STATUS_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::FDNN_STATUS_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::FDNN_STATUS_UNSUPPORTED => Status::Unsupported,
            sys::FDNN_STATUS_NON_FINITE_WEIGHT => Status::NonFiniteWeight,
            sys::FDNN_STATUS_DEVICE_ERROR => Status::DeviceError,
            sys::FDNN_STATUS_INTERNAL_ERROR => Status::InternalError,
            other => Status::Unknown(other),
        })
    }

    /// The raw C code (`fdnn_status`) of this status.
    pub fn code(self) -> sys::fdnn_status {
        match self {
            Status::InvalidArgument => sys::FDNN_STATUS_INVALID_ARGUMENT,
            Status::IoError => sys::FDNN_STATUS_IO_ERROR,
            Status::ParseError => sys::FDNN_STATUS_PARSE_ERROR,
            Status::InvalidModel => sys::FDNN_STATUS_INVALID_MODEL,
            Status::WeightMismatch => sys::FDNN_STATUS_WEIGHT_MISMATCH,
            Status::InvalidState => sys::FDNN_STATUS_INVALID_STATE,
            Status::BufferTooSmall => sys::FDNN_STATUS_BUFFER_TOO_SMALL,
            Status::OutOfMemory => sys::FDNN_STATUS_OUT_OF_MEMORY,
            Status::Unsupported => sys::FDNN_STATUS_UNSUPPORTED,
            Status::NonFiniteWeight => sys::FDNN_STATUS_NON_FINITE_WEIGHT,
            Status::DeviceError => sys::FDNN_STATUS_DEVICE_ERROR,
            Status::InternalError => sys::FDNN_STATUS_INTERNAL_ERROR,
            Status::Unknown(code) => code,
        }
    }

    /// The library's name for the code, such as `"FDNN_STATUS_IO_ERROR"`
    /// (`"FDNN_STATUS_UNKNOWN"` for codes the library does not know either).
    pub fn name(self) -> &'static str {
        // SAFETY: fdnn_status_string accepts any value and returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(sys::fdnn_status_string(self.code())) };
        name.to_str().unwrap_or("FDNN_STATUS_UNKNOWN")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: its [`Status`] and a message naming the file, tensor, layer or argument at
/// fault.
///
/// For failures reported by the library the message is the calling thread's
/// `fdnn_last_error_message()`, read right after the failing call. Checks this crate makes before
/// calling the library (buffer lengths, batch range, NUL bytes in strings) produce an error of the
/// same shape with the status the library would have returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// An error with the given status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The error of a call that just failed on this thread with `status`.
    pub(crate) fn from_library(status: Status) -> Error {
        // SAFETY: fdnn_last_error_message returns a NUL-terminated string owned by the library,
        // valid until this thread's next failing call; it is copied before any other call.
        let message = unsafe { CStr::from_ptr(sys::fdnn_last_error_message()) };
        Error::new(status, message.to_string_lossy().into_owned())
    }

    /// Why the call failed.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The detail: which file, tensor, layer or argument was at fault, and why.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call in this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `FDNN_STATUS_OK`, otherwise the error with this thread's message.
pub(crate) fn check(code: sys::fdnn_status) -> Result<()> {
    match Status::from_raw(code) {
        None => Ok(()),
        Some(status) => Err(Error::from_library(status)),
    }
}
