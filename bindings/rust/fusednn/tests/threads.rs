// SPDX-License-Identifier: Apache-2.0
//! One model run from several threads at once gives what one thread gives.

mod common;

use common::{LinearModel, Random};
use fusednn::{Model, ModelOptions};

const THREADS: usize = 4;
const ROUNDS: usize = 200;

/// Linear -> GELU -> Linear: enough work per run for threads to overlap.
fn mlp(random: &mut Random) -> Model {
    let spec = r#"{"fusednn": 1, "input": {"shape": [32]}, "layers": [
        {"type": "Linear", "name": "fc1", "in_features": 32, "out_features": 64},
        {"type": "GELU", "name": "act"},
        {"type": "Linear", "name": "fc2", "in_features": 64, "out_features": 10}]}"#;
    let options = ModelOptions::new().max_batch(16).cpu_threads(1);
    let mut model = Model::from_spec_with_options(spec, &options).unwrap();
    model
        .set_weight("fc1.weight", &[64, 32], &random.vec(64 * 32))
        .unwrap();
    model
        .set_weight("fc1.bias", &[64], &random.vec(64))
        .unwrap();
    model
        .set_weight("fc2.weight", &[10, 64], &random.vec(10 * 64))
        .unwrap();
    model
        .set_weight("fc2.bias", &[10], &random.vec(10))
        .unwrap();
    model
}

#[test]
fn model_run_from_several_threads_matches_one_thread() {
    let mut random = Random::new("threads");
    let model = mlp(&mut random);
    let batches = [1usize, 5, 16];
    let inputs: Vec<Vec<f32>> = batches.iter().map(|b| random.vec(b * 32)).collect();
    let expected: Vec<Vec<f32>> = batches
        .iter()
        .zip(&inputs)
        .map(|(b, x)| model.run(*b, x).unwrap())
        .collect();

    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (model, inputs, expected) = (&model, &inputs, &expected);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let which = (thread + round) % batches.len();
                    let output = model.run(batches[which], &inputs[which]).unwrap();
                    assert_eq!(output, expected[which], "thread {thread} round {round}");
                }
            });
        }
    });
}

#[test]
fn one_context_per_thread_matches_one_thread() {
    let mut random = Random::new("contexts");
    let linear = LinearModel::new(24, 12, &ModelOptions::new().max_batch(8), &mut random);
    let input = random.vec(8 * 24);
    let expected = linear.model.run(8, &input).unwrap();
    let reference = linear.reference(8, &input);
    assert!(common::relative_error(&expected, &reference) <= 1e-5);

    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let mut context = linear.model.create_context().unwrap();
            let (input, expected) = (&input, &expected);
            scope.spawn(move || {
                let mut output = vec![f32::NAN; 8 * 12];
                for round in 0..ROUNDS {
                    context.run_into(8, input, &mut output).unwrap();
                    assert_eq!(&output, expected, "thread {thread} round {round}");
                }
            });
        }
    });
}

#[test]
fn model_moves_to_another_thread_and_drops_there() {
    let mut random = Random::new("move");
    let linear = LinearModel::new(3, 2, &ModelOptions::new(), &mut random);
    let input = random.vec(3);
    let expected = linear.reference(1, &input);
    let output = std::thread::spawn(move || linear.model.run(1, &input).unwrap())
        .join()
        .unwrap();
    assert!(common::relative_error(&output, &expected) <= 1e-5);
}
