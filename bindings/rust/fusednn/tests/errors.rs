// SPDX-License-Identifier: Apache-2.0
//! Error paths: every failure arrives as `Err` with the right status and a message that says
//! what was at fault.

mod common;

use common::{linear_spec, LinearModel, Random};
use fusednn::{HostIo, Model, ModelOptions, Status};

#[test]
fn missing_file_is_io_error_naming_the_path() {
    let path = std::env::temp_dir().join("fusednn-rust-test-does-not-exist/model.safetensors");
    let error = Model::from_file(&path).unwrap_err();
    assert_eq!(error.status(), Status::IoError, "{error}");
    assert!(
        error.message().contains(&*path.to_string_lossy()),
        "message lacks the path: {error}"
    );
    assert!(
        error.to_string().starts_with("FDNN_STATUS_IO_ERROR"),
        "{error}"
    );
}

#[test]
fn empty_or_truncated_bytes_are_parse_errors() {
    let bundle = std::fs::read(common::fixtures_dir().join("formats/tiny_mlp.safetensors")).unwrap();
    for data in [&bundle[..0], &bundle[..100], &bundle[..bundle.len() - 1]] {
        let error = Model::from_bytes(data).unwrap_err();
        assert_eq!(error.status(), Status::ParseError, "{error}");
        assert!(error.message().contains("<memory>"), "{error}");
    }
}

#[test]
fn malformed_spec_is_parse_error() {
    let error = Model::from_spec("{\"fusednn\": 1, \"input\": ").unwrap_err();
    assert_eq!(error.status(), Status::ParseError, "{error}");
    assert!(!error.message().is_empty());
}

#[test]
fn unknown_layer_is_invalid_model_naming_it() {
    let spec = r#"{"fusednn": 1, "input": {"shape": [4]},
                   "layers": [{"type": "Frobnicate", "name": "mystery"}]}"#;
    let error = Model::from_spec(spec).unwrap_err();
    assert_eq!(error.status(), Status::InvalidModel, "{error}");
    assert!(error.message().contains("Frobnicate"), "{error}");
}

#[test]
fn zero_max_batch_is_invalid_argument() {
    let error =
        Model::from_spec_with_options(&linear_spec(4, 3), &ModelOptions::new().max_batch(0))
            .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
}

#[test]
fn max_batch_past_the_limit_is_invalid_argument() {
    let too_large = usize::try_from(fusednn::sys::FDNN_MAX_BATCH_LIMIT).unwrap() + 1;
    let error = Model::from_spec_with_options(
        &linear_spec(4, 3),
        &ModelOptions::new().max_batch(too_large),
    )
    .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    assert!(error.message().contains("options.max_batch"), "{error}");
}

#[test]
fn host_io_is_ignored_on_the_cpu_whose_contexts_report_no_path() {
    let mut random = Random::new("host_io");
    for host_io in [HostIo::Auto, HostIo::Staged, HostIo::Mapped] {
        let options = ModelOptions::new().host_io(host_io);
        let linear = LinearModel::new(4, 3, &options, &mut random);
        let input = random.vec(2 * 4);
        let output = linear.model.run(2, &input).unwrap();
        assert!(common::relative_error(&output, &linear.reference(2, &input)) <= 1e-6);
        let error = linear.model.create_context().unwrap().host_io().unwrap_err();
        assert_eq!(error.status(), Status::Unsupported, "{error}");
        assert!(error.message().contains("CPU"), "{error}");
    }
}

#[test]
fn weight_limit_is_out_of_memory_naming_the_option() {
    // 64 x 64 + 64 floats: 16,640 bytes.
    let spec = linear_spec(64, 64);
    let error =
        Model::from_spec_with_options(&spec, &ModelOptions::new().max_weight_bytes(16_000))
            .unwrap_err();
    assert_eq!(error.status(), Status::OutOfMemory, "{error}");
    assert!(error.message().contains("options.max_weight_bytes"), "{error}");
    assert!(error.message().contains("16640 bytes"), "{error}");
    let model =
        Model::from_spec_with_options(&spec, &ModelOptions::new().max_weight_bytes(16_640))
            .unwrap();
    let memory = model.memory_info().unwrap();
    assert_eq!(memory.flops_per_sample, 2.0 * 64.0 * 64.0);
    assert_eq!(memory.bytes_per_sample, 4.0 * (64.0 + 64.0));
}

#[test]
fn wrong_weight_shape_is_weight_mismatch_naming_the_tensor() {
    let mut model = Model::from_spec(&linear_spec(4, 3)).unwrap();
    let error = model
        .set_weight("fc.weight", &[4, 3], &[0.0; 12])
        .unwrap_err();
    assert_eq!(error.status(), Status::WeightMismatch, "{error}");
    assert!(error.message().contains("fc.weight"), "{error}");
    let error = model
        .set_weight("fc.nonexistent", &[3], &[0.0; 3])
        .unwrap_err();
    assert_eq!(error.status(), Status::WeightMismatch, "{error}");
}

#[test]
fn weight_length_and_names_are_checked_before_the_call() {
    let mut model = Model::from_spec(&linear_spec(4, 3)).unwrap();
    let error = model
        .set_weight("fc.weight", &[3, 4], &[0.0; 11])
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    let error = model
        .set_weight("fc\0weight", &[3, 4], &[0.0; 12])
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    let error = model
        .set_weight("fc.weight", &[1; 9], &[0.0; 1])
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
}

#[test]
fn missing_weights_fail_validate_and_run() {
    let mut model = Model::from_spec(&linear_spec(4, 3)).unwrap();
    model.set_weight("fc.weight", &[3, 4], &[0.5; 12]).unwrap();
    let error = model.validate().unwrap_err();
    assert_eq!(error.status(), Status::WeightMismatch, "{error}");
    assert!(error.message().contains("fc.bias"), "{error}");
    let error = model.run(1, &[0.0; 4]).unwrap_err();
    assert_eq!(error.status(), Status::InvalidState, "{error}");
    let error = model.create_context().unwrap_err();
    assert_eq!(error.status(), Status::InvalidState, "{error}");
}

#[test]
fn non_finite_weight_fails_validate() {
    let mut model = Model::from_spec(&linear_spec(2, 1)).unwrap();
    model
        .set_weight("fc.weight", &[1, 2], &[1.0, f32::NAN])
        .unwrap();
    model.set_weight("fc.bias", &[1], &[0.0]).unwrap();
    let error = model.validate().unwrap_err();
    assert_eq!(error.status(), Status::NonFiniteWeight, "{error}");
    assert!(error.message().contains("fc.weight"), "{error}");
}

#[test]
fn weights_are_frozen_after_the_first_run() {
    let mut linear = LinearModel::new(4, 3, &ModelOptions::new(), &mut Random::new("frozen"));
    linear.model.run(1, &[0.0; 4]).unwrap();
    let error = linear
        .model
        .set_weight("fc.bias", &[3], &[0.0; 3])
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidState, "{error}");
}

#[test]
fn missing_weight_file_is_io_error() {
    let mut model = Model::from_spec(&linear_spec(4, 3)).unwrap();
    let path = std::env::temp_dir().join("fusednn-rust-test-no-weights.safetensors");
    let error = model.load_weights(&path).unwrap_err();
    assert_eq!(error.status(), Status::IoError, "{error}");
    assert!(
        error.message().contains(&*path.to_string_lossy()),
        "{error}"
    );
}

#[test]
fn buffer_lengths_and_batch_are_checked_before_the_call() {
    let options = ModelOptions::new().max_batch(4);
    let linear = LinearModel::new(4, 3, &options, &mut Random::new("lengths"));
    let model = &linear.model;

    let error = model.run(2, &[0.0; 7]).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
    assert!(error.message().contains("needs 8"), "{error}");

    let mut small = [0.0f32; 5];
    let error = model.run_into(2, &[0.0; 8], &mut small).unwrap_err();
    assert_eq!(error.status(), Status::BufferTooSmall, "{error}");
    assert_eq!(small, [0.0; 5], "nothing may be written on failure");

    assert_eq!(
        model.run(0, &[]).unwrap_err().status(),
        Status::InvalidArgument
    );
    assert_eq!(
        model.run(5, &[0.0; 20]).unwrap_err().status(),
        Status::InvalidArgument
    );

    // A larger output buffer is fine: the tail is left alone.
    let mut large = [7.0f32; 8];
    model.run_into(2, &[0.0; 8], &mut large).unwrap();
    assert_eq!(large[6..], [7.0, 7.0]);

    let mut context = model.create_context().unwrap();
    assert_eq!(
        context.run(1, &[0.0; 3]).unwrap_err().status(),
        Status::InvalidArgument
    );
    assert_eq!(
        context
            .run_into(1, &[0.0; 4], &mut [0.0; 2])
            .unwrap_err()
            .status(),
        Status::BufferTooSmall
    );
}

#[test]
fn layer_index_out_of_range_is_invalid_argument() {
    let model = Model::from_spec(&linear_spec(4, 3)).unwrap();
    let error = model.layer_info(5).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
}

#[test]
fn messages_are_per_thread() {
    // A failure on another thread must not change the message this thread's error carries.
    let error = Model::from_spec("not json").unwrap_err();
    std::thread::spawn(|| Model::from_file("/nonexistent/elsewhere.json").unwrap_err())
        .join()
        .unwrap();
    let again = Model::from_spec("not json").unwrap_err();
    assert_eq!(error, again);
    assert!(!again.message().contains("elsewhere"), "{again}");
}

#[test]
fn status_names_come_from_the_library() {
    assert_eq!(Status::IoError.name(), "FDNN_STATUS_IO_ERROR");
    assert_eq!(Status::InternalError.name(), "FDNN_STATUS_INTERNAL_ERROR");
    assert_eq!(Status::Unknown(4242).name(), "FDNN_STATUS_UNKNOWN");
}

#[test]
fn device_run_on_a_cpu_model_is_unsupported() {
    let linear = LinearModel::new(
        4,
        3,
        &ModelOptions::new().max_batch(2),
        &mut Random::new("device"),
    );
    let mut context = linear.model.create_context().unwrap();
    // Host buffers stand in for device ones: a CPU model refuses before touching them.
    let input = [0.0f32; 8];
    let mut output = [0.0f32; 6];
    // SAFETY: both pointers are valid for their counts; the null stream is allowed.
    let error = unsafe {
        context.run_device(
            2,
            input.as_ptr(),
            8,
            output.as_mut_ptr(),
            6,
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert_eq!(error.status(), Status::Unsupported, "{error}");
    // SAFETY: as above; the count check fails before the library is called.
    let error = unsafe {
        context.run_device(
            2,
            input.as_ptr(),
            7,
            output.as_mut_ptr(),
            6,
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{error}");
}
