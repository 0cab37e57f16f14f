// SPDX-License-Identifier: Apache-2.0
//! Typed runs on the CPU: float16 / bfloat16 bits in `u16` slices against the `f32` run narrowed
//! by an independent converter; element types checked against dtypes; counts in elements.

mod common;

use common::{LinearModel, Random};
use fusednn::{Dtype, ModelOptions, Status};

/// f32 -> float16 bits, round to nearest even (finite, normal-range values only: the test's).
fn to_half(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let magnitude = bits & 0x7FFF_FFFF;
    if magnitude >= 0x477F_F000 {
        return sign | 0x7C00; // beyond 65504 (ties included): infinity
    }
    assert!(magnitude >= 0x3880_0000, "the test keeps away from float16 subnormals: {value}");
    let mut half = (((magnitude >> 23) - 112) << 10) | ((magnitude >> 13) & 0x3FF);
    let rest = magnitude & 0x1FFF;
    if rest > 0x1000 || (rest == 0x1000 && half & 1 != 0) {
        half += 1;
    }
    sign | half as u16
}

fn to_bfloat16(value: f32) -> u16 {
    let bits = value.to_bits();
    ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) as u16
}

fn half_to_f32(half: u16) -> f32 {
    let sign = ((half as u32) & 0x8000) << 16;
    let exponent = ((half >> 10) & 0x1F) as u32;
    let mantissa = (half & 0x3FF) as u32;
    assert!(exponent != 0 && exponent != 0x1F, "normal values only");
    f32::from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13))
}

/// Values exact in float16 and bfloat16 alike, away from zero: k / 16 for 1 <= |k| <= 128.
fn exact_inputs(random: &mut Random, count: usize) -> Vec<f32> {
    random
        .vec(count)
        .iter()
        .map(|v| {
            let k = ((v.abs() * 64.0) as i32 % 128 + 1) as f32;
            if *v < 0.0 {
                -k / 16.0
            } else {
                k / 16.0
            }
        })
        .collect()
}

#[test]
fn every_dtype_pair_matches_the_f32_run_narrowed() {
    let mut random = Random::new("typed");
    let linear = LinearModel::new(6, 4, &ModelOptions::new().max_batch(8), &mut random);
    let batch = 3;
    let input = exact_inputs(&mut random, batch * 6);
    let half: Vec<u16> = input.iter().map(|&v| to_half(v)).collect();
    let bf16: Vec<u16> = input.iter().map(|&v| to_bfloat16(v)).collect();
    assert!(half.iter().zip(&input).all(|(&h, &v)| half_to_f32(h) == v));
    let reference = linear.model.run(batch, &input).unwrap();
    let mut context = linear.model.create_context().unwrap();

    // f32 out
    for (dtype, bits) in [(Dtype::Float16, &half), (Dtype::Bfloat16, &bf16)] {
        let mut output = vec![f32::NAN; batch * 4 + 2];
        linear
            .model
            .run_typed(batch, bits, dtype, &mut output, Dtype::Float32)
            .unwrap();
        assert_eq!(&output[..batch * 4], &reference[..], "{dtype:?} -> f32");
        assert!(output[batch * 4..].iter().all(|v| v.is_nan()), "written past the result");
    }
    // 16-bit out, from every input dtype
    for out in [Dtype::Float16, Dtype::Bfloat16] {
        let narrow = if out == Dtype::Float16 { to_half } else { to_bfloat16 };
        let expected: Vec<u16> = reference.iter().map(|&v| narrow(v)).collect();
        let mut output = vec![0u16; batch * 4];
        linear
            .model
            .run_typed(batch, &input, Dtype::Float32, &mut output, out)
            .unwrap();
        assert_eq!(output, expected, "f32 -> {out:?}");
        for (dtype, bits) in [(Dtype::Float16, &half), (Dtype::Bfloat16, &bf16)] {
            let mut from_context = vec![0u16; batch * 4];
            context
                .run_typed(batch, bits, dtype, &mut from_context, out)
                .unwrap();
            assert_eq!(from_context, expected, "{dtype:?} -> {out:?}");
        }
    }
    // f32 both ways is the plain run
    let mut output = vec![0.0f32; batch * 4];
    context
        .run_typed(batch, &input, Dtype::Float32, &mut output, Dtype::Float32)
        .unwrap();
    assert_eq!(output, reference);
}

#[test]
fn slices_must_fit_their_dtypes_and_counts_are_elements() {
    let mut random = Random::new("typed-errors");
    let linear = LinearModel::new(3, 2, &ModelOptions::new().max_batch(4), &mut random);
    let input = vec![1.0f32; 3];
    let mut output = vec![0u16; 2];
    let error = linear
        .model
        .run_typed(1, &input, Dtype::Float16, &mut output, Dtype::Float16)
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("input_dtype"), "{}", error.message());
    let error = linear
        .model
        .run_typed(1, &input, Dtype::Float32, &mut output, Dtype::Float32)
        .unwrap_err();
    assert!(error.message().contains("output_dtype"), "{}", error.message());
    let mut short = vec![7u16; 3];
    let error = linear
        .model
        .run_typed(2, &[0u16; 6], Dtype::Bfloat16, &mut short, Dtype::Bfloat16)
        .unwrap_err();
    assert_eq!(error.status(), Status::BufferTooSmall);
    assert!(error.message().contains("elements"), "{}", error.message());
    assert_eq!(short, vec![7u16; 3]);
}

#[test]
fn a_cpu_model_refuses_typed_device_runs() {
    let mut random = Random::new("typed-device");
    let linear = LinearModel::new(3, 2, &ModelOptions::new().max_batch(4), &mut random);
    let mut context = linear.model.create_context().unwrap();
    let input = [0u16; 3];
    let mut output = [0u16; 2];
    // SAFETY: the CPU model refuses device pointers before touching them.
    let error = unsafe {
        context.run_device_typed(
            1,
            input.as_ptr().cast(),
            Dtype::Float16,
            3,
            output.as_mut_ptr().cast(),
            Dtype::Float16,
            2,
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert_eq!(error.status(), Status::Unsupported);
}
