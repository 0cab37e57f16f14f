// SPDX-License-Identifier: Apache-2.0
//! The precision option: the builder, the query, bad values and option structs from before the
//! field existed.

mod common;

use std::mem::{offset_of, size_of};
use std::ptr;

use common::{linear_spec, relative_error, LinearModel, Random};
use fusednn::{sys, Device, ModelOptions, Precision};

#[test]
fn defaults_to_fp32() {
    assert_eq!(
        ModelOptions::new().as_raw().precision,
        sys::FDNN_PRECISION_FP32
    );
    assert_eq!(Precision::default(), Precision::Fp32);
    let names: Vec<String> = Precision::ALL.iter().map(|p| p.to_string()).collect();
    assert_eq!(names, ["fp32", "tf32", "fp16", "bf16"]);
}

#[test]
fn cpu_model_runs_fp32_whatever_precision_is_asked() {
    let mut random = Random::new("cpu_model_runs_fp32_whatever_precision_is_asked");
    for precision in Precision::ALL {
        let options = ModelOptions::new()
            .max_batch(4)
            .device(Device::Cpu)
            .precision(precision);
        let expected = match precision {
            Precision::Tf32 => sys::FDNN_PRECISION_TF32,
            Precision::Fp16 => sys::FDNN_PRECISION_FP16,
            Precision::Bf16 => sys::FDNN_PRECISION_BF16,
            _ => sys::FDNN_PRECISION_FP32,
        };
        assert_eq!(options.as_raw().precision, expected);
        let linear = LinearModel::new(8, 5, &options, &mut random);
        assert_eq!(
            linear.model.precision().unwrap(),
            Precision::Fp32,
            "{precision}"
        );
        let input = random.vec(3 * 8);
        let output = linear.model.run(3, &input).unwrap();
        assert!(relative_error(&output, &linear.reference(3, &input)) <= 1e-5);
        assert_eq!(
            linear.model.precision().unwrap(),
            Precision::Fp32,
            "{precision}"
        );
    }
}

/// The calling thread's last error message.
fn last_message() -> String {
    // SAFETY: the library returns a NUL-terminated string valid until this thread's next failure.
    unsafe { std::ffi::CStr::from_ptr(sys::fdnn_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

/// fdnn_model_create_from_spec on a small Linear spec with raw options; the model's precision,
/// or the failing status and message.
fn precision_with_raw_options(
    options: &sys::fdnn_model_options,
) -> Result<sys::fdnn_precision, (sys::fdnn_status, String)> {
    let spec = linear_spec(4, 3);
    let mut model = ptr::null_mut();
    // SAFETY: the spec pointer and length describe a live slice; options points to at least its
    // own struct_size bytes; model is writable.
    let status = unsafe {
        sys::fdnn_model_create_from_spec(spec.as_ptr().cast(), spec.len(), options, &mut model)
    };
    if status != sys::FDNN_STATUS_OK {
        return Err((status, last_message()));
    }
    let mut precision = sys::FDNN_PRECISION_BF16;
    // SAFETY: model is live and owned here; precision is writable.
    let status = unsafe { sys::fdnn_model_precision(model, &mut precision) };
    let message = last_message();
    // SAFETY: model is live and owned here, used by no other thread.
    unsafe { sys::fdnn_model_destroy(model) };
    if status != sys::FDNN_STATUS_OK {
        return Err((status, message));
    }
    Ok(precision)
}

#[test]
fn out_of_range_precision_is_invalid_argument_naming_the_field() {
    for value in [4, -1, 1 << 30] {
        let mut raw = *ModelOptions::new().as_raw();
        raw.precision = value;
        let (status, message) = precision_with_raw_options(&raw).unwrap_err();
        assert_eq!(status, sys::FDNN_STATUS_INVALID_ARGUMENT, "{message}");
        assert!(message.contains("options.precision"), "{message}");
        assert!(message.contains(&value.to_string()), "{message}");
    }
}

#[test]
fn options_struct_from_before_precision_runs_in_fp32() {
    // A program built against fusednn 0.1: its struct ends where precision begins, and neither
    // the init call nor model creation touches the bytes after it.
    let older = offset_of!(sys::fdnn_model_options, precision);
    assert!(older < size_of::<sys::fdnn_model_options>());
    let mut raw = *ModelOptions::new().as_raw();
    raw.precision = 0x7f7f_7f7f;
    // SAFETY: raw is writable for its whole size, more than `older`.
    let status = unsafe { sys::fdnn_model_options_init(&mut raw, older) };
    assert_eq!(status, sys::FDNN_STATUS_OK);
    assert_eq!(raw.struct_size, older);
    assert_eq!(
        raw.precision, 0x7f7f_7f7f,
        "the init call wrote past struct_size"
    );
    assert_eq!(
        precision_with_raw_options(&raw),
        Ok(sys::FDNN_PRECISION_FP32)
    );
}

#[test]
fn query_with_null_arguments_is_invalid_argument() {
    // SAFETY: the library checks both pointers before using them.
    let status = unsafe { sys::fdnn_model_precision(ptr::null(), ptr::null_mut()) };
    assert_eq!(status, sys::FDNN_STATUS_INVALID_ARGUMENT);
}
