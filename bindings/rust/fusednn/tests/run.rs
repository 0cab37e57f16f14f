// SPDX-License-Identifier: Apache-2.0
//! Runs against an independent reference: an in-memory Linear model whose weights the test sets,
//! and the golden fixtures made with PyTorch.

mod common;

use common::{fixtures_dir, read_safetensors, relative_error, LinearModel, Random};
use fusednn::{Device, Model, ModelOptions, Shape, Version};

const TOLERANCE: f32 = 1e-5;

#[test]
fn linear_model_matches_reference() {
    let mut random = Random::new("linear");
    let linear = LinearModel::new(13, 7, &ModelOptions::new().max_batch(16), &mut random);
    for batch in [1, 3, 16] {
        let input = random.vec(batch * 13);
        let expected = linear.reference(batch, &input);
        let output = linear.model.run(batch, &input).unwrap();
        let error = relative_error(&output, &expected);
        assert!(error <= TOLERANCE, "batch {batch}: relative error {error}");

        let mut poisoned = vec![f32::NAN; batch * 7];
        linear.model.run_into(batch, &input, &mut poisoned).unwrap();
        assert_eq!(poisoned, output, "run_into and run differ at batch {batch}");
    }
}

#[test]
fn context_matches_model_run_and_outlives_the_model() {
    let mut random = Random::new("context");
    let linear = LinearModel::new(5, 2, &ModelOptions::new().max_batch(8), &mut random);
    let input = random.vec(8 * 5);
    let expected = linear.model.run(8, &input).unwrap();
    let mut context = linear.model.create_context().unwrap();
    assert_eq!(context.max_batch(), 8);
    assert_eq!(context.output_shape(), &Shape::new(&[2]));
    drop(linear);
    assert_eq!(context.run(8, &input).unwrap(), expected);
}

#[test]
fn half_precision_weights_are_converted() {
    // 0.5, -2.0 and 0.25 are exact in binary16 and bfloat16.
    let f16 = [0x3800u16, 0xC000];
    let bf16 = [0x3F00u16, 0xC000];
    for use_bf16 in [false, true] {
        let mut model = Model::from_spec(&common::linear_spec(2, 1)).unwrap();
        if use_bf16 {
            model.set_weight_bf16("fc.weight", &[1, 2], &bf16).unwrap();
            model.set_weight_bf16("fc.bias", &[1], &[0x3E80]).unwrap();
        } else {
            model.set_weight_f16("fc.weight", &[1, 2], &f16).unwrap();
            model.set_weight_f16("fc.bias", &[1], &[0x3400]).unwrap();
        }
        model.validate().unwrap();
        let output = model.run(1, &[4.0, 1.0]).unwrap();
        assert_eq!(output, [0.5 * 4.0 - 2.0 * 1.0 + 0.25], "bf16: {use_bf16}");
    }
}

#[test]
fn model_describes_itself() {
    let spec = r#"{"fusednn": 1, "input": {"shape": [6]}, "layers": [
        {"type": "Linear", "name": "fc1", "in_features": 6, "out_features": 4},
        {"type": "ReLU", "name": "act"},
        {"type": "Linear", "name": "fc2", "in_features": 4, "out_features": 3, "bias": false}]}"#;
    let model = Model::from_spec_with_options(spec, &ModelOptions::new().max_batch(32)).unwrap();
    assert_eq!(model.input_shape().dims(), &[6]);
    assert_eq!(model.output_shape().to_string(), "[3]");
    assert_eq!(model.max_batch(), 32);
    assert_eq!(model.device().unwrap(), Device::Cpu);

    let layers = model.layers().unwrap();
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    let types: Vec<&str> = layers.iter().map(|l| l.layer_type.as_str()).collect();
    assert_eq!(names, ["fc1", "act", "fc2"]);
    assert_eq!(types, ["Linear", "ReLU", "Linear"]);
    assert_eq!(layers[0].output_shape, Shape::new(&[4]));
    assert_eq!(layers[0].parameter_count, 6 * 4 + 4);
    assert_eq!(layers[1].parameter_count, 0);
    assert_eq!(layers[2].parameter_count, 4 * 3);

    let memory = model.memory_info().unwrap();
    assert_eq!(memory.parameter_count, 6 * 4 + 4 + 4 * 3);

    assert!(
        fusednn::version().runs_header(),
        "library {} vs header {}",
        fusednn::version(),
        Version::HEADER
    );
    assert_eq!(fusednn::version_string(), fusednn::version().to_string());
    let _gpus = fusednn::cuda_device_count().unwrap();

    // The options declare this crate's struct size, whatever size the library has.
    let options = ModelOptions::new();
    assert_eq!(
        options.as_raw().struct_size,
        std::mem::size_of::<fusednn::sys::fdnn_model_options>()
    );
    assert_eq!(options.as_raw().max_batch, 1024);
}

/// Runs `tests/fixtures/golden/<name>` for every batch its io.safetensors holds, through the
/// bundle (from its file and from its bytes) and through spec.json with each weight directory.
fn run_golden(name: &str) {
    let dir = fixtures_dir().join("golden").join(name);
    let bundle = dir.join("model.safetensors");
    assert!(
        bundle.is_file(),
        "no golden fixture at {} (set FUSEDNN_FIXTURES_DIR)",
        bundle.display()
    );
    let io = read_safetensors(&dir.join("io.safetensors"));

    let bundle_bytes = std::fs::read(&bundle).unwrap();
    let mut models = vec![
        (
            "bundle",
            Model::from_file(&bundle).unwrap_or_else(|e| panic!("{e}")),
        ),
        (
            "bundle bytes",
            Model::from_bytes(&bundle_bytes).unwrap_or_else(|e| panic!("{e}")),
        ),
    ];
    drop(bundle_bytes); // the model holds its own copy
    for weights in ["weights_bin", "weights_txt"] {
        if dir.join(weights).is_dir() {
            let mut model =
                Model::from_file(dir.join("spec.json")).unwrap_or_else(|e| panic!("{e}"));
            model
                .load_weights(dir.join(weights))
                .unwrap_or_else(|e| panic!("{weights}: {e}"));
            model.validate().unwrap();
            models.push((weights, model));
        }
    }

    let mut ran = 0;
    for (input_name, input) in io.iter().filter(|(k, _)| k.starts_with("input_b")) {
        let batch_text = &input_name["input_b".len()..];
        let batch: usize = batch_text.parse().unwrap();
        let expected = &io[&format!("output_b{batch_text}")];
        for (source, model) in &models {
            assert_eq!(input.shape[0], batch);
            assert_eq!(
                &input.shape[1..],
                model.input_shape().dims(),
                "{name} {source}: input shape"
            );
            assert_eq!(
                &expected.shape[1..],
                model.output_shape().dims(),
                "{name} {source}: output shape"
            );
            let output = model
                .run(batch, &input.data)
                .unwrap_or_else(|e| panic!("{name} b{batch}: {e}"));
            let error = relative_error(&output, &expected.data);
            assert!(
                error <= TOLERANCE,
                "{name} {source} batch {batch}: relative error {error}"
            );
        }
        ran += 1;
    }
    assert!(ran > 0, "{name}: io.safetensors holds no input_b<N>");
}

#[test]
fn golden_seed_mlp() {
    run_golden("seed_mlp");
}
