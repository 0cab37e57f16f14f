# SPDX-License-Identifier: Apache-2.0

"""The Python binding's contract: errors, argument checks, lifetimes and golden outputs.

Needs the native library (see conftest.py); tests skip when it cannot be loaded.
"""

from __future__ import annotations

import ctypes
import json
import re
import threading
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import fusednn
from fusednn import _native
from conftest import GOLDEN, GOLDEN_BATCHES, GOLDEN_MODELS, load_io, relative_error

pytestmark = pytest.mark.usefixtures("native")

# Golden outputs must match PyTorch to this fraction of the output's largest magnitude.
GOLDEN_TOLERANCE = 1e-5

SEED_MLP = GOLDEN / "seed_mlp"
SEED_MLP_TENSORS = {"fc1.weight": (128, 100), "fc1.bias": (128,), "fc2.weight": (64, 128),
                    "fc2.bias": (64,), "fc3.weight": (10, 64), "fc3.bias": (10,)}


def seed_mlp_spec_text() -> str:
    return (SEED_MLP / "spec.json").read_text()


def seed_mlp_tensors() -> Dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(SEED_MLP / "model.safetensors"))


@pytest.fixture
def seed_mlp() -> Any:
    with fusednn.Model.from_file(SEED_MLP / "model.safetensors", max_batch=300) as model:
        yield model


# ------------------------------------------------------------------------------------------------
# Library and version
# ------------------------------------------------------------------------------------------------


def test_version_comes_from_the_library(native: Any) -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", fusednn.__version__)
    major, minor, patch = (int(part) for part in fusednn.__version__.split("."))
    assert native.version_number == major * 10000 + minor * 100 + patch
    assert major == _native.API_VERSION_MAJOR and minor >= _native.API_VERSION_MINOR


def test_status_strings_match_the_status_enum() -> None:
    for status in fusednn.Status:
        assert fusednn.status_string(status) == f"FDNN_STATUS_{status.name}"
    assert fusednn.status_string(999) == "FDNN_STATUS_UNKNOWN"


def header_text() -> str:
    """fusednn.h without its comments."""
    text = (Path(__file__).resolve().parents[2] / "include" / "fusednn" / "fusednn.h").read_text()
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def test_every_header_function_is_declared_with_its_arity(native: Any) -> None:
    functions = re.findall(r"FDNN_API\s+([\w\s\*]+?)\b(fdnn_\w+)\s*\(([^)]*)\)", header_text())
    assert len(functions) >= 20, "the header's functions were not found"
    for result, name, parameters in functions:
        function = getattr(native.cdll, name)
        arity = 0 if parameters.strip() in ("", "void") else parameters.count(",") + 1
        assert function.argtypes is not None and len(function.argtypes) == arity, name
        if result.strip() == "fdnn_status":
            assert function.errcheck is not None, f"{name} returns a status but is not checked"


@pytest.mark.parametrize("c_name, struct", [
    ("fdnn_model_options", _native.ModelOptions), ("fdnn_shape", _native.Shape),
    ("fdnn_memory_info", _native.MemoryInfoStruct), ("fdnn_layer_info", _native.LayerInfoStruct),
])
def test_structs_match_the_header(c_name: str, struct: Any) -> None:
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (c_name, c_name), header_text(), re.S)
    assert body, f"struct {c_name} not found in the header"
    header_fields = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", body.group(1))
    assert [field[0] for field in struct._fields_] == header_fields


def test_cuda_device_count_is_non_negative() -> None:
    assert fusednn.cuda_device_count() >= 0


# ------------------------------------------------------------------------------------------------
# Errors: each status raises its subclass with the library's message
# ------------------------------------------------------------------------------------------------


def check_error(info: pytest.ExceptionInfo, cls: type, status: fusednn.Status,
                *mentions: str) -> None:
    error = info.value
    assert type(error) is cls
    assert isinstance(error, fusednn.FusednnError)
    assert error.status == status
    assert error.message, "the library gave no message"
    assert error.message in str(error) and status.name in str(error)
    for text in mentions:
        assert text in error.message, f"{text!r} not in {error.message!r}"


def test_missing_file_is_a_file_error(tmp_path: Path) -> None:
    path = tmp_path / "missing.safetensors"
    with pytest.raises(fusednn.FileError) as info:
        fusednn.Model.from_file(path)
    check_error(info, fusednn.FileError, fusednn.Status.IO_ERROR, str(path))


def test_bundle_bytes_give_the_same_outputs_as_the_file() -> None:
    path = SEED_MLP / "model.safetensors"
    data = bytearray(path.read_bytes())
    x = np.random.default_rng(3).standard_normal((3, 100)).astype(np.float32)
    with fusednn.Model.from_file(path, max_batch=4) as from_file, \
            fusednn.Model.from_bytes(data, max_batch=4) as from_bytes:
        data[:] = b"\0" * len(data)  # the library holds its own copy
        np.testing.assert_array_equal(from_bytes.run(x), from_file.run(x))


def test_bad_bytes_are_parse_errors() -> None:
    bundle = (SEED_MLP / "model.safetensors").read_bytes()
    for data in (b"", bundle[:100], bundle[:-1], b"garbage"):
        with pytest.raises(fusednn.ParseError) as info:
            fusednn.Model.from_bytes(data)
        check_error(info, fusednn.ParseError, fusednn.Status.PARSE_ERROR, "<memory>")
    with pytest.raises(TypeError):
        fusednn.Model.from_bytes("not bytes")  # type: ignore[arg-type]


def test_malformed_json_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"fusednn": 1, "layers": [')
    with pytest.raises(fusednn.ParseError) as info:
        fusednn.Model.from_file(path)
    check_error(info, fusednn.ParseError, fusednn.Status.PARSE_ERROR)
    with pytest.raises(fusednn.ParseError):
        fusednn.Model.from_spec("{not json")


def test_unknown_layer_type_is_an_invalid_model() -> None:
    spec = json.loads(seed_mlp_spec_text())
    spec["layers"][1]["type"] = "Swish"
    with pytest.raises(fusednn.InvalidModelError) as info:
        fusednn.Model.from_spec(spec)
    check_error(info, fusednn.InvalidModelError, fusednn.Status.INVALID_MODEL, "Swish")


def test_wrong_weight_shape_is_a_weight_mismatch() -> None:
    with fusednn.Model.from_spec(seed_mlp_spec_text()) as model:
        with pytest.raises(fusednn.WeightMismatchError) as info:
            model.set_weight("fc1.weight", np.zeros((100, 128), np.float32))
        check_error(info, fusednn.WeightMismatchError, fusednn.Status.WEIGHT_MISMATCH,
                    "fc1.weight")
        with pytest.raises(fusednn.WeightMismatchError) as info:
            model.set_weight("fc9.weight", np.zeros((3,), np.float32))
        check_error(info, fusednn.WeightMismatchError, fusednn.Status.WEIGHT_MISMATCH,
                    "fc9.weight")


def test_missing_weights_are_reported_by_validate_and_refused_by_run() -> None:
    with fusednn.Model.from_spec(seed_mlp_spec_text()) as model:
        model.set_weight("fc1.weight", np.zeros((128, 100), np.float32))
        with pytest.raises(fusednn.WeightMismatchError) as info:
            model.validate()
        check_error(info, fusednn.WeightMismatchError, fusednn.Status.WEIGHT_MISMATCH,
                    "fc3.bias")
        with pytest.raises(fusednn.InvalidStateError) as info:
            model.run(np.zeros((2, 100), np.float32))
        check_error(info, fusednn.InvalidStateError, fusednn.Status.INVALID_STATE)


def test_weights_are_frozen_after_the_first_run(seed_mlp: fusednn.Model) -> None:
    seed_mlp.run(np.zeros((1, 100), np.float32))
    with pytest.raises(fusednn.InvalidStateError) as info:
        seed_mlp.set_weight("fc1.bias", np.zeros((128,), np.float32))
    check_error(info, fusednn.InvalidStateError, fusednn.Status.INVALID_STATE)


def test_non_finite_weight_is_reported_by_validate() -> None:
    with fusednn.Model.from_spec(seed_mlp_spec_text()) as model:
        for name, tensor in seed_mlp_tensors().items():
            model.set_weight(name, tensor)
        bad = np.array(seed_mlp_tensors()["fc2.weight"])
        bad[3, 7] = np.nan
        model.set_weight("fc2.weight", bad)
        with pytest.raises(fusednn.NonFiniteWeightError) as info:
            model.validate()
        check_error(info, fusednn.NonFiniteWeightError, fusednn.Status.NON_FINITE_WEIGHT,
                    "fc2.weight")


def test_layer_index_out_of_range_is_an_invalid_argument(seed_mlp: fusednn.Model) -> None:
    info_struct = _native.LayerInfoStruct()
    info_struct.struct_size = ctypes.sizeof(info_struct)
    with pytest.raises(fusednn.InvalidArgumentError) as info:
        _native.call("fdnn_model_layer_info")(seed_mlp._handle, 99, ctypes.byref(info_struct))
    check_error(info, fusednn.InvalidArgumentError, fusednn.Status.INVALID_ARGUMENT)


def test_small_output_buffer_is_refused_and_left_untouched(seed_mlp: fusednn.Model) -> None:
    x = np.ones((4, 100), np.float32)
    output = np.full((4 * 10 - 1,), 7.0, np.float32)
    with pytest.raises(fusednn.BufferTooSmallError) as info:
        _native.call("fdnn_model_run")(seed_mlp._handle, 4, x, x.size, output, output.size)
    check_error(info, fusednn.BufferTooSmallError, fusednn.Status.BUFFER_TOO_SMALL)
    assert np.all(output == 7.0)


def test_cuda_without_a_gpu_is_unsupported() -> None:
    if fusednn.cuda_device_count() > 0:
        pytest.skip("a GPU is available here")
    with pytest.raises(fusednn.UnsupportedError) as info:
        fusednn.Model.from_file(SEED_MLP / "model.safetensors", device="cuda")
    check_error(info, fusednn.UnsupportedError, fusednn.Status.UNSUPPORTED)


def test_auto_device_resolves_to_a_real_device() -> None:
    with fusednn.Model.from_file(SEED_MLP / "model.safetensors", device="auto") as model:
        expected = "cuda" if fusednn.cuda_device_count() > 0 else "cpu"
        assert model.device == expected


def test_error_messages_are_per_thread(tmp_path: Path) -> None:
    """A failure on another thread does not change this thread's message."""
    with pytest.raises(fusednn.FileError) as info:
        fusednn.Model.from_file(tmp_path / "first.safetensors")
    other: List[str] = []

    def fail_elsewhere() -> None:
        try:
            fusednn.Model.from_spec("{")
        except fusednn.ParseError as exc:
            other.append(exc.message)

    thread = threading.Thread(target=fail_elsewhere)
    thread.start()
    thread.join()
    assert other and "first.safetensors" not in other[0]
    assert native_message() == info.value.message


def native_message() -> str:
    return _native.library().last_error_message()


# ------------------------------------------------------------------------------------------------
# Input checks happen in Python, before any native call
# ------------------------------------------------------------------------------------------------


class RecordingRun:
    """Stands in for the native run function and counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> int:
        self.calls += 1
        return 0


@pytest.mark.parametrize("make_input, error, text", [
    (lambda: np.zeros((2, 100), np.float64), TypeError, "float32"),
    (lambda: np.zeros((2, 100), np.int32), TypeError, "float32"),
    (lambda: np.zeros((2, 100), ">f4"), TypeError, "float32"),
    (lambda: [[0.0] * 100], TypeError, "numpy.ndarray"),
    (lambda: np.zeros((100, 2), np.float32).T, ValueError, "C-contiguous"),
    (lambda: np.zeros((2, 200), np.float32)[:, ::2], ValueError, "C-contiguous"),
    (lambda: np.zeros((2, 99), np.float32), ValueError, "shape"),
    (lambda: np.zeros((2, 1, 100), np.float32), ValueError, "shape"),
    (lambda: np.zeros((0, 100), np.float32), ValueError, "empty"),
    (lambda: np.zeros((301, 100), np.float32), ValueError, "max_batch"),
    (lambda: np.float32(1.0), TypeError, "numpy.ndarray"),
])
def test_bad_inputs_are_refused_before_the_native_call(seed_mlp: fusednn.Model, make_input: Any,
                                                       error: type, text: str) -> None:
    recorder = RecordingRun()
    seed_mlp._run_function = recorder
    with pytest.raises(error, match=text):
        seed_mlp.run(make_input())
    assert recorder.calls == 0
    seed_mlp.run(np.zeros((2, 100), np.float32))  # the same model, good input: one native call
    assert recorder.calls == 1


def test_context_checks_inputs_before_the_native_call(seed_mlp: fusednn.Model) -> None:
    with seed_mlp.create_context() as context:
        recorder = RecordingRun()
        context._run_function = recorder
        with pytest.raises(TypeError):
            context.run(np.zeros((2, 100), np.float64))
        with pytest.raises(ValueError):
            context.run(np.zeros((2, 101), np.float32))
        assert recorder.calls == 0


def test_single_sample_returns_one_output(seed_mlp: fusednn.Model, rng: np.random.Generator
                                          ) -> None:
    x = rng.standard_normal((5, 100)).astype(np.float32)
    batch = seed_mlp.run(x)
    single = seed_mlp.run(np.ascontiguousarray(x[2]))
    assert batch.shape == (5, 10) and single.shape == (10,)
    assert single.dtype == np.float32
    # Same as a batch of one (same code path); the batch of five may sum in another order.
    np.testing.assert_array_equal(single, seed_mlp.run(np.ascontiguousarray(x[2:3]))[0])
    assert relative_error(single, batch[2]) <= GOLDEN_TOLERANCE


def test_bad_options_are_refused_in_python() -> None:
    path = SEED_MLP / "model.safetensors"
    with pytest.raises(ValueError, match="device"):
        fusednn.Model.from_file(path, device="tpu")
    with pytest.raises(ValueError, match="max_batch"):
        fusednn.Model.from_file(path, max_batch=0)
    with pytest.raises(ValueError, match="cpu_threads"):
        fusednn.Model.from_file(path, cpu_threads=-1)
    with pytest.raises(TypeError):
        fusednn.Model.from_spec(42)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Lifetimes
# ------------------------------------------------------------------------------------------------


def test_close_is_idempotent_and_closed_objects_refuse_work() -> None:
    with fusednn.Model.from_file(SEED_MLP / "model.safetensors") as model:
        assert not model.closed
    assert model.closed
    model.close()
    with pytest.raises(ValueError, match="closed"):
        model.run(np.zeros((1, 100), np.float32))
    with pytest.raises(ValueError, match="closed"):
        model.validate()
    with pytest.raises(ValueError, match="closed"):
        model.create_context()
    assert "closed" in repr(model)


def test_context_is_idempotent_and_outlives_its_model(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 100)).astype(np.float32)
    model = fusednn.Model.from_file(SEED_MLP / "model.safetensors")
    expected = model.run(x)
    context = model.create_context()
    model.close()
    del model
    np.testing.assert_array_equal(context.run(x), expected)
    with context:
        pass
    assert context.closed
    context.close()
    with pytest.raises(ValueError, match="closed"):
        context.run(x)


def test_garbage_collection_releases_without_close() -> None:
    for _ in range(20):
        model = fusednn.Model.from_file(SEED_MLP / "model.safetensors")
        model.create_context()
        del model


def test_run_device_is_unsupported_on_the_cpu(seed_mlp: fusednn.Model) -> None:
    if seed_mlp.device != "cpu":
        pytest.skip("the model runs on a GPU")

    class HostArrayPretendingToBeDevice:
        def __init__(self, array: np.ndarray) -> None:
            self.array = array
            self.__cuda_array_interface__ = {
                "shape": array.shape, "typestr": "<f4", "strides": None, "version": 3,
                "data": (array.ctypes.data, False)}

    x = HostArrayPretendingToBeDevice(np.zeros((2, 100), np.float32))
    y = HostArrayPretendingToBeDevice(np.zeros((2, 10), np.float32))
    with seed_mlp.create_context() as context:
        with pytest.raises(TypeError, match="__cuda_array_interface__"):
            context.run_device(np.zeros((2, 100), np.float32), y)
        with pytest.raises(ValueError, match="output shape"):
            context.run_device(x, HostArrayPretendingToBeDevice(np.zeros((2, 9), np.float32)))
        with pytest.raises(fusednn.UnsupportedError):
            context.run_device(x, y)


# ------------------------------------------------------------------------------------------------
# Description
# ------------------------------------------------------------------------------------------------


def test_shapes_layers_and_memory(seed_mlp: fusednn.Model) -> None:
    assert seed_mlp.input_shape == (100,)
    assert seed_mlp.output_shape == (10,)
    assert seed_mlp.max_batch == 300
    assert seed_mlp.device == "cpu"
    layers = seed_mlp.layers
    assert [(layer.name, layer.type, layer.output_shape) for layer in layers] == [
        ("fc1", "Linear", (128,)), ("relu1", "ReLU", (128,)), ("fc2", "Linear", (64,)),
        ("relu2", "ReLU", (64,)), ("fc3", "Linear", (10,))]
    expected_parameters = sum(int(np.prod(shape)) for shape in SEED_MLP_TENSORS.values())
    assert sum(layer.parameter_count for layer in layers) == expected_parameters
    memory = seed_mlp.memory_info
    assert memory.parameter_count == expected_parameters
    assert memory.weight_bytes >= 4 * expected_parameters // 2
    assert memory.context_bytes >= 0
    # The three Linear layers' multiply-adds (each ReLU runs in the Linear before it) and every
    # layer's input and output as float32.
    # The multiply-adds count 2, each ReLU 1 per output.
    assert memory.flops_per_sample == 2 * (100 * 128 + 128 * 64 + 64 * 10) + 128 + 64
    assert memory.bytes_per_sample == 4 * ((100 + 128) + (128 + 64) + (64 + 10))


def test_resource_limits_are_options(tmp_path: Path) -> None:
    spec = {"fusednn": 1, "name": "wide", "input": {"shape": [256]},
            "layers": [{"type": "Linear", "name": "fc", "in_features": 256, "out_features": 256},
                       {"type": "Linear", "name": "out", "in_features": 256, "out_features": 2}]}
    parameters = 256 * 257 + 2 * 257
    with pytest.raises(fusednn.OutOfMemoryError) as info:
        fusednn.Model.from_spec(spec, max_weight_bytes=1000)
    check_error(info, fusednn.OutOfMemoryError, fusednn.Status.OUT_OF_MEMORY,
                "options.max_weight_bytes", f"{4 * parameters} bytes")
    # The 256 values between the layers, for 64 samples, need more than 1000 bytes of scratch.
    with fusednn.Model.from_spec(spec, max_batch=64, max_workspace_bytes=1000) as model:
        model.set_weight("fc.weight", np.zeros((256, 256), np.float32))
        model.set_weight("fc.bias", np.zeros(256, np.float32))
        model.set_weight("out.weight", np.zeros((2, 256), np.float32))
        model.set_weight("out.bias", np.zeros(2, np.float32))
        with pytest.raises(fusednn.OutOfMemoryError) as info:
            model.run(np.zeros((1, 256), np.float32))
        check_error(info, fusednn.OutOfMemoryError, fusednn.Status.OUT_OF_MEMORY,
                    "options.max_workspace_bytes", "options.max_batch = 64")
    with fusednn.Model.from_spec(spec, max_workspace_bytes=0, max_weight_bytes=0) as model:
        assert model.memory_info.parameter_count == parameters
    for bad in (-1, 2**64, 1.5, True):
        with pytest.raises(ValueError, match="max_workspace_bytes"):
            fusednn.Model.from_spec(spec, max_workspace_bytes=bad)
        with pytest.raises(ValueError, match="max_weight_bytes"):
            fusednn.Model.from_spec(spec, max_weight_bytes=bad)


def test_host_io_is_checked_and_ignored_on_the_cpu(rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 100)).astype(np.float32)
    with fusednn.Model.from_file(SEED_MLP / "model.safetensors") as reference:
        expected = reference.run(x)
    for host_io in ("auto", "staged", "mapped"):
        with fusednn.Model.from_file(SEED_MLP / "model.safetensors", host_io=host_io) as model:
            assert np.array_equal(model.run(x), expected)
            with model.create_context() as context:
                with pytest.raises(fusednn.UnsupportedError) as info:
                    context.host_io
                check_error(info, fusednn.UnsupportedError, fusednn.Status.UNSUPPORTED, "CPU")
    for bad in ("zero-copy", 2, None):
        with pytest.raises(ValueError, match="host_io"):
            fusednn.Model.from_file(SEED_MLP / "model.safetensors", host_io=bad)
    # What C can pass: the library names the field.
    options = _native.ModelOptions()
    _native.call("fdnn_model_options_init")(ctypes.byref(options), ctypes.sizeof(options))
    options.host_io = 7
    spec = (SEED_MLP / "model.safetensors").read_bytes()
    with pytest.raises(fusednn.InvalidArgumentError) as info:
        _native.call("fdnn_model_create_from_memory")(spec, len(spec), ctypes.byref(options),
                                                      ctypes.byref(_native.ModelHandle()))
    check_error(info, fusednn.InvalidArgumentError, fusednn.Status.INVALID_ARGUMENT,
                "options.host_io", "7")


def test_mapped_host_io_matches_staged_on_a_gpu(rng: np.random.Generator) -> None:
    if fusednn.cuda_device_count() == 0:
        pytest.skip("needs a GPU and a CUDA build of libfusednn")
    path = SEED_MLP / "model.safetensors"
    with fusednn.Model.from_file(path, device="cuda", host_io="staged") as staged, \
            fusednn.Model.from_file(path, device="cuda", host_io="mapped") as mapped:
        with staged.create_context() as context:
            assert context.host_io == "staged"
        with mapped.create_context() as context:
            assert context.host_io == "mapped"
            for batch in (1, 33, 1000):
                x = rng.standard_normal((batch, 100)).astype(np.float32)
                assert np.array_equal(context.run(x), staged.run(x))


# ------------------------------------------------------------------------------------------------
# Results
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cpu_threads", [1, None], ids=["one_thread", "default_threads"])
@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_golden_outputs(name: str, cpu_threads: Any) -> None:
    io = load_io(name)
    with fusednn.Model.from_file(GOLDEN / name / "model.safetensors",
                                 cpu_threads=cpu_threads) as model:
        for batch in GOLDEN_BATCHES:
            expected = io[f"output_b{batch}"]
            actual = model.run(io[f"input_b{batch}"])
            assert actual.shape == expected.shape
            error = relative_error(actual, expected)
            assert error <= GOLDEN_TOLERANCE, f"{name} batch {batch}: relative error {error:.2e}"


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_threaded_runs_agree_for_every_batch_size(name: str) -> None:
    """cpu_threads=2 splits large batches across threads; each batch size splits differently."""
    io = load_io(name)
    x, expected = io["input_b257"], io["output_b257"]
    wrong = []
    with fusednn.Model.from_file(GOLDEN / name / "model.safetensors", cpu_threads=2) as model:
        for batch in list(range(1, 65)) + [100, 128, 200, 256, 257]:
            for _ in range(2):
                error = relative_error(model.run(np.ascontiguousarray(x[:batch])),
                                       expected[:batch])
                if error > GOLDEN_TOLERANCE:
                    wrong.append(f"{batch}: {error:.1e}")
                    break
    assert not wrong, f"{name}, cpu_threads=2: wrong outputs for batch sizes {wrong}"


@pytest.mark.parametrize("name", ["seed_mlp", "lenet5"])
def test_golden_outputs_through_a_context(name: str) -> None:
    io = load_io(name)
    with fusednn.Model.from_file(GOLDEN / name / "model.safetensors", cpu_threads=1) as model:
        with model.create_context() as context:
            for batch in GOLDEN_BATCHES:
                error = relative_error(context.run(io[f"input_b{batch}"]), io[f"output_b{batch}"])
                assert error <= GOLDEN_TOLERANCE, f"{name} batch {batch}: {error:.2e}"


@pytest.mark.parametrize("source", ["safetensors", "weights_bin", "weights_txt", "set_weight",
                                    "set_weight_float16"])
def test_seed_mlp_weights_from_every_format(source: str) -> None:
    io = load_io("seed_mlp")
    tensors = seed_mlp_tensors()
    with fusednn.Model.from_file(SEED_MLP / "spec.json") as model:
        if source == "safetensors":
            model.load_weights(SEED_MLP / "model.safetensors")
        elif source in ("weights_bin", "weights_txt"):
            model.load_weights(SEED_MLP / source)
        else:
            for tensor_name, tensor in tensors.items():
                if source == "set_weight_float16":
                    tensor = tensor.astype(np.float16)
                model.set_weight(tensor_name, tensor)
        model.validate()
        x = io["input_b32"]
        if source == "set_weight_float16":
            # The same weights rounded to float16, given as float32, must give the same result.
            with fusednn.Model.from_spec(seed_mlp_spec_text()) as rounded:
                for tensor_name, tensor in tensors.items():
                    rounded.set_weight(tensor_name, tensor.astype(np.float16).astype(np.float32))
                np.testing.assert_array_equal(model.run(x), rounded.run(x))
        else:
            error = relative_error(model.run(x), io["output_b32"])
            assert error <= GOLDEN_TOLERANCE, f"{source}: {error:.2e}"


def test_num_batches_tracked_is_accepted_and_ignored(tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.numpy import save_file

    source = GOLDEN / "batchnorm_cnn" / "model.safetensors"
    with safe_open(str(source), framework="numpy") as handle:
        metadata = handle.metadata()
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    for layer in ("bn1", "bn2", "bn3"):
        tensors[f"{layer}.num_batches_tracked"] = np.array(100, dtype=np.int64)
    bundle = tmp_path / "with_counters.safetensors"
    save_file(tensors, str(bundle), metadata=metadata)
    io = load_io("batchnorm_cnn")
    with fusednn.Model.from_file(bundle, cpu_threads=1) as model:
        error = relative_error(model.run(io["input_b3"]), io["output_b3"])
        assert error <= GOLDEN_TOLERANCE


def test_every_output_element_is_written(rng: np.random.Generator) -> None:
    """The raw call with a NaN-poisoned buffer: every element of the result gets written."""
    io = load_io("lenet5")
    x = io["input_b3"]
    with fusednn.Model.from_file(GOLDEN / "lenet5" / "model.safetensors", cpu_threads=1) as model:
        output = np.full((3, 10), np.nan, np.float32)
        _native.call("fdnn_model_run")(model._handle, 3, x, x.size, output, output.size)
        assert np.isfinite(output).all()
        assert relative_error(output, io["output_b3"]) <= GOLDEN_TOLERANCE


def test_concurrent_runs_on_one_model() -> None:
    """Model.run from several threads at once (the C API allows it; ctypes drops the GIL)."""
    io = load_io("seed_mlp")
    failures: List[str] = []
    with fusednn.Model.from_file(SEED_MLP / "model.safetensors") as model:
        def work(batch: int) -> None:
            for _ in range(20):
                error = relative_error(model.run(io[f"input_b{batch}"]), io[f"output_b{batch}"])
                if error > GOLDEN_TOLERANCE:
                    failures.append(f"batch {batch}: {error:.2e}")

        threads = [threading.Thread(target=work, args=(batch,)) for batch in GOLDEN_BATCHES]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures


# ------------------------------------------------------------------------------------------------
# Library lookup (no native calls: these only exercise the search)
# ------------------------------------------------------------------------------------------------


def test_explicit_library_path_that_does_not_load(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    missing = tmp_path / "libfusednn.so"
    monkeypatch.setenv(_native.ENV_LIBRARY, str(missing))
    with pytest.raises(fusednn.LibraryNotFoundError, match=_native.ENV_LIBRARY):
        _native._load()


def test_no_library_anywhere_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_native.ENV_LIBRARY, raising=False)
    monkeypatch.setattr(_native, "_bundled_candidates", lambda: [])
    monkeypatch.setattr(_native, "_shared_library_names", lambda: ["libfusednn-not-here.so"])
    monkeypatch.setattr(_native.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(fusednn.LibraryNotFoundError) as info:
        _native._load()
    assert _native.ENV_LIBRARY in str(info.value)
    assert "libfusednn-not-here.so" in str(info.value)
    assert "pip install ./bindings/python" in str(info.value)


def test_bundled_copy_is_used_when_no_path_is_set(monkeypatch: pytest.MonkeyPatch,
                                                  native: Any) -> None:
    real = Path(native.path)
    if not real.is_file():
        pytest.skip("the loaded library is not a file path")
    monkeypatch.delenv(_native.ENV_LIBRARY, raising=False)
    monkeypatch.setattr(_native, "_bundled_candidates", lambda: [real])
    assert _native._load().path == str(real)
