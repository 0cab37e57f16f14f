// SPDX-License-Identifier: Apache-2.0
//! 04_rust: the safe `fusednn` crate.
//!
//! Builds a model from a spec held in a string, sets its weights from slices, runs it from the
//! main thread, from a `Context` of its own, and from four threads at once sharing `&Model`
//! (`Model` is `Send + Sync`; `Context` is `Send` only), and checks every output against values
//! worked out by hand:
//!
//! ```text
//! fc1 = Linear(3 -> 2)  weight [[1, 2, 3], [-1, 0, 1]]  bias [0.5, -1]
//! ReLU
//! fc2 = Linear(2 -> 2)  weight [[1, 1], [2, -1]]        bias [0, 0.25]
//!
//! x = [ 1,  2,  3]: fc1 = [14.5,  1] -> ReLU [14.5, 1] -> fc2 = [15.5, 28.25]
//! x = [-3,  1,  0]: fc1 = [-0.5,  2] -> ReLU [0,    2] -> fc2 = [2,    -1.75]
//! x = [-1, -1, -1]: fc1 = [-5.5, -1] -> ReLU [0,    0] -> fc2 = [0,     0.25]
//! ```
//!
//! Errors arrive as `fusednn::Error` (a `Status` and the library's message); two are caused on
//! purpose. Exit status 0 when every check passes, 1 otherwise.

use std::process::ExitCode;

use fusednn::{Context, Model, ModelOptions, Status};

const SPEC: &str = r#"{
  "fusednn": 1,
  "name": "hello",
  "input": {"shape": [3]},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 2},
    {"type": "ReLU"},
    {"type": "Linear", "name": "fc2", "in_features": 2, "out_features": 2}
  ]
}"#;

const INPUT: [f32; 9] = [1.0, 2.0, 3.0, -3.0, 1.0, 0.0, -1.0, -1.0, -1.0];
const EXPECTED: [f32; 6] = [15.5, 28.25, 2.0, -1.75, 0.0, 0.25];

/// The model with its weights set; `set_weight` takes `&mut Model`, so it can never overlap a
/// run, which is what the C API requires.
fn build_model() -> fusednn::Result<Model> {
    let options = ModelOptions::new().max_batch(16).cpu_threads(1);
    let mut model = Model::from_spec_with_options(SPEC, &options)?;
    model.set_weight("fc1.weight", &[2, 3], &[1.0, 2.0, 3.0, -1.0, 0.0, 1.0])?;
    model.set_weight("fc1.bias", &[2], &[0.5, -1.0])?;
    model.set_weight("fc2.weight", &[2, 2], &[1.0, 1.0, 2.0, -1.0])?;
    model.set_weight("fc2.bias", &[2], &[0.0, 0.25])?;
    model.validate()?;
    Ok(model)
}

/// Prints the outcome of one check and returns 1 when it failed.
fn check_output(what: &str, output: &[f32]) -> u32 {
    let matches = output.len() == EXPECTED.len()
        && output
            .iter()
            .zip(EXPECTED)
            .all(|(got, want)| (got - want).abs() <= 1e-6);
    println!(
        "{what}: {output:?} {}",
        if matches { "ok" } else { "MISMATCH" }
    );
    u32::from(!matches)
}

/// The two deliberate mistakes; each must fail with the expected status.
fn show_errors(model: &Model) -> u32 {
    let mut failures = 0;
    match Model::from_file("no-such-model.safetensors") {
        Err(error) if error.status() == Status::IoError => {
            println!("bad call 1: Model::from_file(\"no-such-model.safetensors\")");
            println!(
                "  status: {}\n  message: {}",
                error.status(),
                error.message()
            );
        }
        other => {
            eprintln!("expected an IoError, got {other:?}");
            failures += 1;
        }
    }
    // A buffer of the wrong length is caught by the crate before the library is called.
    match model.run(2, &INPUT) {
        Err(error) if error.status() == Status::InvalidArgument => {
            println!("bad call 2: run(2, 9 floats)\n  error: {error}");
        }
        other => {
            eprintln!("expected an InvalidArgument error, got {other:?}");
            failures += 1;
        }
    }
    failures
}

fn run_sample() -> fusednn::Result<u32> {
    println!(
        "fusednn {} (crate written against {})",
        fusednn::version(),
        fusednn::Version::HEADER
    );
    let model = build_model()?;
    let mut failures = 0;

    failures += check_output("Model::run", &model.run(3, &INPUT)?);

    let mut context: Context = model.create_context()?;
    failures += check_output("Context::run", &context.run(3, &INPUT)?);

    // Many threads, one model: scoped threads borrow it; each run is independent.
    let outputs: Vec<fusednn::Result<Vec<f32>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| model.run(3, &INPUT)))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a run thread panicked"))
            .collect()
    });
    for (thread, output) in outputs.into_iter().enumerate() {
        failures += check_output(&format!("thread {thread}"), &output?);
    }

    failures += show_errors(&model);
    Ok(failures)
}

fn main() -> ExitCode {
    match run_sample() {
        Ok(0) => {
            println!("PASS: 04_rust");
            ExitCode::SUCCESS
        }
        Ok(failures) => {
            eprintln!("FAIL: {failures} check(s) failed");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("FAIL: {error}");
            ExitCode::FAILURE
        }
    }
}
