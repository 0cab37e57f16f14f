// SPDX-License-Identifier: Apache-2.0
//! Plain descriptions a model gives of itself: shapes, memory figures, layers, versions.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use fusednn_sys as sys;

use crate::error::{Error, Result, Status};

/// The most dimensions a per-sample [`Shape`] may have (`FDNN_MAX_RANK`).
pub const MAX_RANK: usize = sys::FDNN_MAX_RANK;

/// A per-sample shape: the extents of one sample, outermost first, without the batch dimension.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    dims: Vec<usize>,
}

impl Shape {
    /// A shape with the given extents, outermost first.
    pub fn new(dims: &[usize]) -> Shape {
        Shape {
            dims: dims.to_vec(),
        }
    }

    /// The extents, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The number of elements in one sample: the product of the extents (1 for rank 0).
    pub fn element_count(&self) -> usize {
        self.dims.iter().product()
    }

    /// Reads a C shape, refusing a rank or extent the contract does not allow.
    pub(crate) fn from_raw(raw: &sys::fdnn_shape) -> Result<Shape> {
        let rank = usize::try_from(raw.rank)
            .ok()
            .filter(|&rank| rank <= MAX_RANK)
            .ok_or_else(|| {
                Error::new(
                    Status::InternalError,
                    format!("the library returned a shape of rank {}", raw.rank),
                )
            })?;
        let dims = raw.dims[..rank]
            .iter()
            .map(|&extent| {
                usize::try_from(extent).map_err(|_| {
                    Error::new(
                        Status::InternalError,
                        format!("the library returned a shape with extent {extent}"),
                    )
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        Ok(Shape { dims })
    }

    /// An all-zero C shape to be filled in by the library.
    pub(crate) fn empty_raw() -> sys::fdnn_shape {
        sys::fdnn_shape {
            rank: 0,
            dims: [0; MAX_RANK],
        }
    }
}

impl fmt::Display for Shape {
    /// Writes the extents as a list, `[3, 32, 32]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, extent) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{extent}")?;
        }
        f.write_str("]")
    }
}

/// The parameter count of a model, the memory it and each of its contexts use, and what one
/// sample costs.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct MemoryInfo {
    /// Scalars in all weights as the spec declares them.
    pub parameter_count: u64,
    /// Bytes the backend holds for the weights (after any folding).
    pub weight_bytes: usize,
    /// Scratch bytes each execution context allocates; known before any run.
    pub context_bytes: usize,
    /// Floating-point operations one sample costs (a multiply-add counts 2): lets a server
    /// refuse a model before running it.
    pub flops_per_sample: f64,
    /// Bytes of activations one sample moves (float32, weights excluded).
    pub bytes_per_sample: f64,
}

/// One layer of a model as written in its spec (before any folding).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LayerInfo {
    /// The layer's name in the spec (`"fc1"`).
    pub name: String,
    /// The layer type as written in the spec (`"Linear"`).
    pub layer_type: String,
    /// The per-sample shape of the layer's output.
    pub output_shape: Shape,
    /// Scalars in this layer's weights.
    pub parameter_count: u64,
}

/// Copies a string owned by the library; NULL reads as "".
///
/// # Safety
/// `text` is NULL or points to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn copy_c_string(text: *const c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// A library or header version, `major.minor.patch`.
///
/// The major version is the ABI version: a library runs a program built against a header with
/// the same major version and a minor version no higher than the library's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Incremented on an incompatible ABI change.
    pub major: u32,
    /// Incremented when functions or struct fields are added.
    pub minor: u32,
    /// Incremented on fixes that change no interface.
    pub patch: u32,
}

impl Version {
    /// The version of the C header this crate was written against.
    pub const HEADER: Version = Version {
        major: sys::FDNN_VERSION_MAJOR,
        minor: sys::FDNN_VERSION_MINOR,
        patch: sys::FDNN_VERSION_PATCH,
    };

    /// Splits `major * 10000 + minor * 100 + patch`.
    pub const fn from_number(number: u32) -> Version {
        Version {
            major: number / 10000,
            minor: number / 100 % 100,
            patch: number % 100,
        }
    }

    /// The version as one number, `major * 10000 + minor * 100 + patch`.
    pub const fn number(self) -> u32 {
        self.major * 10000 + self.minor * 100 + self.patch
    }

    /// Whether a library of this version runs a program built against [`Version::HEADER`].
    pub fn runs_header(self) -> bool {
        self.major == Version::HEADER.major && self.minor >= Version::HEADER.minor
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}
