# SPDX-License-Identifier: Apache-2.0

"""The precision option: names, the library's checks, older option structs, the query.

The accuracy contract (fusednn.h, docs/precision.md) is checked against PyTorch in the same
precision by the last test, which needs torch and a GPU (it skips otherwise).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict

import numpy as np
import pytest

import fusednn
from fusednn import _native
from conftest import GOLDEN, relative_error

pytestmark = pytest.mark.usefixtures("native")

SEED_MLP = GOLDEN / "seed_mlp" / "model.safetensors"
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# The contract's bound on max |error| / max |fp32 output|, per precision.
BOUND = {"fp32": 1e-5, "tf32": 1e-3, "fp16": 1e-2, "bf16": 1e-2}


class OptionsBeforePrecision(ctypes.Structure):
    """fdnn_model_options as a program built against fusednn 0.1 declared it."""

    _fields_ = [(name, kind) for name, kind in _native.ModelOptions._fields_[
        :[field[0] for field in _native.ModelOptions._fields_].index("precision")]]


def create_raw(options: Any) -> Any:
    """fdnn_model_create_from_file with any options struct, wrapped in a Model."""
    handle = _native.ModelHandle()
    _native.call("fdnn_model_create_from_file")(
        bytes(SEED_MLP), ctypes.cast(ctypes.byref(options), ctypes.POINTER(_native.ModelOptions)),
        ctypes.byref(handle))
    return fusednn.Model(handle)


def initialised_options() -> _native.ModelOptions:
    options = _native.ModelOptions()
    _native.call("fdnn_model_options_init")(ctypes.byref(options), ctypes.sizeof(options))
    return options


def test_values_and_default_match_the_header() -> None:
    assert (_native.PRECISION_FP32, _native.PRECISION_TF32, _native.PRECISION_FP16,
            _native.PRECISION_BF16) == (0, 1, 2, 3)
    assert initialised_options().precision == _native.PRECISION_FP32
    # Appended: the struct of 0.1 ends where precision begins.
    assert _native.ModelOptions.precision.offset == ctypes.sizeof(OptionsBeforePrecision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_cpu_model_runs_fp32_whatever_precision_is_asked(precision: str,
                                                         rng: np.random.Generator) -> None:
    x = rng.standard_normal((3, 100)).astype(np.float32)
    with fusednn.Model.from_file(SEED_MLP) as reference, \
            fusednn.Model.from_file(SEED_MLP, precision=precision) as model:
        assert model.device == "cpu"
        assert model.precision == "fp32"
        np.testing.assert_array_equal(model.run(x), reference.run(x))
        assert model.precision == "fp32"  # the same once it has run


def test_from_spec_takes_precision_too() -> None:
    spec = (GOLDEN / "seed_mlp" / "spec.json").read_text()
    with fusednn.Model.from_spec(spec, precision="bf16") as model:
        assert model.precision == "fp32"


@pytest.mark.parametrize("bad", ["fp8", "FP16", "", None, 2])
def test_unknown_precision_names_are_refused_in_python(bad: Any) -> None:
    with pytest.raises(ValueError, match="precision must be one of"):
        fusednn.Model.from_file(SEED_MLP, precision=bad)


@pytest.mark.parametrize("value", [4, -1, 1 << 30])
def test_out_of_range_value_is_refused_by_the_library(value: int) -> None:
    options = initialised_options()
    options.precision = value
    with pytest.raises(fusednn.InvalidArgumentError) as caught:
        create_raw(options)
    assert caught.value.status == fusednn.Status.INVALID_ARGUMENT
    assert "options.precision" in caught.value.message
    assert str(value) in caught.value.message


def test_options_struct_without_precision_gets_fp32() -> None:
    # A caller built against 0.1: its struct is shorter and the init call writes no further.
    old = OptionsBeforePrecision()
    _native.call("fdnn_model_options_init")(
        ctypes.cast(ctypes.byref(old), ctypes.POINTER(_native.ModelOptions)),
        ctypes.sizeof(old))
    assert old.struct_size == ctypes.sizeof(OptionsBeforePrecision)
    assert old.max_batch == 1024 and old.cuda_graphs == 1
    with create_raw(old) as model:
        assert model.precision == "fp32"

    # The library reads no further than struct_size either: garbage after it is ignored.
    options = initialised_options()
    options.precision = 0x7F7F7F7F
    options.struct_size = ctypes.sizeof(OptionsBeforePrecision)
    with create_raw(options) as model:
        assert model.precision == "fp32"


def test_query_on_a_closed_model_is_refused() -> None:
    model = fusednn.Model.from_file(SEED_MLP, precision="fp16")
    model.close()
    with pytest.raises(ValueError, match="closed"):
        model.precision  # noqa: B018 (the property is the call under test)


def test_gpu_error_within_the_contract_and_twice_pytorchs(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or fusednn.cuda_device_count() < 1:
        pytest.skip("needs a CUDA GPU for both torch and fusednn")
    nn = torch.nn
    torch.manual_seed(int(rng.integers(1 << 31)))
    module = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256), nn.ReLU(),
                           nn.Linear(256, 10)).eval()
    from fusednn.export import export_module

    spec, tensors = export_module(module, (256,))
    weights: Dict[str, np.ndarray] = {name: t.numpy() for name, t in tensors.items()}
    x = rng.standard_normal((64, 256)).astype(np.float32)

    def fusednn_output(device: str, precision: str) -> np.ndarray:
        with fusednn.Model.from_spec(spec, device=device, precision=precision,
                                     max_batch=64) as model:
            for name, value in weights.items():
                model.set_weight(name, value)
            assert model.precision in (precision, "fp32")
            return model.run(x)

    def torch_output(precision: str) -> np.ndarray:
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        try:
            with torch.no_grad():
                gpu_module = module.to("cuda", dtype)
                return gpu_module(torch.from_numpy(x).to("cuda", dtype)).float().cpu().numpy()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
            module.to("cpu", torch.float32)

    reference = fusednn_output("cpu", "fp32")
    for precision in PRECISIONS:
        error = relative_error(fusednn_output("cuda", precision), reference)
        assert error <= BOUND[precision], precision
        if precision != "fp32":
            torch_error = relative_error(torch_output(precision), reference)
            assert error <= 2 * torch_error + 1e-6, (precision, error, torch_error)
