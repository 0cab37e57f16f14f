// SPDX-License-Identifier: Apache-2.0
//! [`Precision`]: the numeric precision a model may run its matrix work in.

use fusednn_sys as sys;

use crate::error::{Error, Result, Status};

/// The least precise arithmetic a model may use, set with
/// [`ModelOptions::precision`](crate::ModelOptions::precision); [`Model::precision`](crate::Model::precision)
/// reports what the model actually runs in.
///
/// A precision is an upper bound on the error, never a promise of less accuracy. Against the CPU
/// backend in fp32 (largest absolute difference over the largest magnitude of the output) the
/// error is at most 1e-3 for [`Precision::Tf32`] and 1e-2 for [`Precision::Fp16`] and
/// [`Precision::Bf16`], and never more than twice PyTorch's in the same precision. Inputs and
/// outputs stay `f32`. The CPU backend always computes in fp32, so a CPU model reports
/// [`Precision::Fp32`] whatever was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Precision {
    /// IEEE 754 binary32 throughout (exact; the default).
    #[default]
    Fp32,
    /// fp32 storage; tensor-core products with a 10-bit mantissa, fp32 accumulation.
    Tf32,
    /// Weights and products in IEEE 754 binary16, fp32 accumulation.
    Fp16,
    /// Weights and products in bfloat16, fp32 accumulation.
    Bf16,
}

impl Precision {
    /// Every precision, most precise first.
    pub const ALL: [Precision; 4] = [
        Precision::Fp32,
        Precision::Tf32,
        Precision::Fp16,
        Precision::Bf16,
    ];

    /// The name used by the CLI and the other bindings: "fp32", "tf32", "fp16" or "bf16".
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
        }
    }

    pub(crate) fn to_raw(self) -> sys::fdnn_precision {
        match self {
            Precision::Fp32 => sys::FDNN_PRECISION_FP32,
            Precision::Tf32 => sys::FDNN_PRECISION_TF32,
            Precision::Fp16 => sys::FDNN_PRECISION_FP16,
            Precision::Bf16 => sys::FDNN_PRECISION_BF16,
        }
    }

    pub(crate) fn from_raw(raw: sys::fdnn_precision) -> Result<Precision> {
        match raw {
            sys::FDNN_PRECISION_FP32 => Ok(Precision::Fp32),
            sys::FDNN_PRECISION_TF32 => Ok(Precision::Tf32),
            sys::FDNN_PRECISION_FP16 => Ok(Precision::Fp16),
            sys::FDNN_PRECISION_BF16 => Ok(Precision::Bf16),
            other => Err(Error::new(
                Status::Unknown(other),
                format!("the library reported precision {other}, which this crate does not know"),
            )),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
