// SPDX-License-Identifier: Apache-2.0
//! [`Dtype`]: the element types runs take and give back, and the [`Element`] slices that hold
//! them.

use fusednn_sys as sys;

use crate::error::{Error, Result, Status};

/// The element type of a run's input or output (C `fdnn_dtype`), for
/// [`Model::run_typed`](crate::Model::run_typed) and its siblings.
///
/// A 16-bit input is widened to `f32` exactly (every float16 and bfloat16 value has an equal
/// `f32`), the model runs in its precision, and a 16-bit output is narrowed with round to
/// nearest even: values beyond the type's range become infinities, NaN stays NaN. 16-bit
/// elements are held as their bits in `u16` slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Dtype {
    /// IEEE 754 binary32, held in `f32` slices (the default).
    #[default]
    Float32,
    /// IEEE 754 binary16, held as bits in `u16` slices.
    Float16,
    /// bfloat16 (the upper half of a binary32), held as bits in `u16` slices.
    Bfloat16,
}

impl Dtype {
    /// Bytes per element: 4 or 2.
    pub fn size(self) -> usize {
        match self {
            Dtype::Float32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 => 2,
        }
    }

    pub(crate) fn to_raw(self) -> sys::fdnn_dtype {
        match self {
            Dtype::Float32 => sys::FDNN_DTYPE_FLOAT32,
            Dtype::Float16 => sys::FDNN_DTYPE_FLOAT16,
            Dtype::Bfloat16 => sys::FDNN_DTYPE_BFLOAT16,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u16 {}
}

/// A type whose slices hold run inputs and outputs: `f32` for [`Dtype::Float32`], `u16` (the
/// bits) for [`Dtype::Float16`] and [`Dtype::Bfloat16`]. Sealed: implemented for those two only.
pub trait Element: sealed::Sealed + Copy {
    /// Bytes per element.
    const SIZE: usize;
}

impl Element for f32 {
    const SIZE: usize = 4;
}

impl Element for u16 {
    const SIZE: usize = 2;
}

/// Refuses a slice whose element type cannot hold `dtype` (an `f32` slice tagged float16).
pub(crate) fn check_element<T: Element>(dtype: Dtype, what: &str) -> Result<()> {
    if T::SIZE == dtype.size() {
        return Ok(());
    }
    Err(Error::new(
        Status::InvalidArgument,
        format!(
            "{what} is {dtype:?}, whose elements take {} bytes, but the slice's take {}; use \
             f32 slices for Float32 and u16 slices for Float16 / Bfloat16",
            dtype.size(),
            T::SIZE
        ),
    ))
}
