// SPDX-License-Identifier: Apache-2.0
//! The plan explanation on the CPU: a Linear 13 -> 7 model's one step, its form at a few rows
//! and at many, and its FLOPs (2 x 13 x 7 a sample) worked out by hand.

mod common;

use common::{parse_json, Json, LinearModel, Random};
use fusednn::{ModelOptions, Status};

fn number(json: &Json) -> f64 {
    match json {
        Json::Number(value) => *value,
        other => panic!("expected a number, got {other:?}"),
    }
}

fn text(json: &Json) -> &str {
    match json {
        Json::Text(value) => value,
        other => panic!("expected a string, got {other:?}"),
    }
}

#[test]
fn explain_json_lists_the_step_with_its_form_and_flops() {
    let mut random = Random::new("explain");
    let options = ModelOptions::new().max_batch(16).cpu_threads(1);
    let linear = LinearModel::new(13, 7, &options, &mut random);
    let document = parse_json(&linear.model.explain_json(8).unwrap());
    let Some(Json::List(steps)) = document.get("steps") else {
        panic!("no steps in {document:?}");
    };
    assert_eq!(steps.len(), 1);
    assert!(text(steps[0].get("form").unwrap()).starts_with("packed GEMM"));
    assert_eq!(
        number(steps[0].get("flops_per_sample").unwrap()),
        2.0 * 13.0 * 7.0
    );
    assert_eq!(
        number(steps[0].get("flops").unwrap()),
        8.0 * 2.0 * 13.0 * 7.0
    );

    let few = linear.model.explain_text(2).unwrap();
    assert!(few.contains("dot products"), "{few}");
}

#[test]
fn explain_refuses_a_batch_past_max_batch() {
    let mut random = Random::new("explain-bad");
    let linear = LinearModel::new(3, 2, &ModelOptions::new().max_batch(4), &mut random);
    let error = linear.model.explain_json(5).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        error.message().contains("batch is 5"),
        "{}",
        error.message()
    );
}
