# SPDX-License-Identifier: Apache-2.0

"""Runs in the caller's dtype: float16 and bfloat16 host arrays (uint16 bits, dtype="bfloat16"),
out_dtype, the checks made before the library is called, and run_device's dtypes through
__cuda_array_interface__ and DLPack (recorded, without a GPU; a real torch run when there is one).
"""

from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np
import pytest

import fusednn
from conftest import GOLDEN
from test_dlpack import FakeProducer

pytestmark = pytest.mark.usefixtures("native")

SEED_MLP = GOLDEN / "seed_mlp" / "model.safetensors"  # input (100,), output (10,)


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (NaN kept a NaN), as uint16."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def model() -> Any:
    with fusednn.Model.from_file(SEED_MLP, device="cpu", cpu_threads=1) as m:
        yield m


def exact_inputs(rng: np.random.Generator, batch: int) -> np.ndarray:
    """Values exact in float16 and bfloat16 alike, so widening gives the float32 run's input."""
    return (rng.integers(-128, 129, size=(batch, 100)) / 32).astype(np.float32)


def test_float16_in_float16_out(model: Any, rng: np.random.Generator) -> None:
    x = exact_inputs(rng, 4)
    reference = model.run(x)
    for runner in (model, model.create_context()):
        y = runner.run(x.astype(np.float16))
        assert y.dtype == np.float16 and y.shape == (4, 10)
        np.testing.assert_array_equal(y.view(np.uint16), reference.astype(np.float16).view(np.uint16))
        single = runner.run(x[0].astype(np.float16))
        assert single.shape == (10,) and single.dtype == np.float16


def test_bfloat16_bits_in_and_out(model: Any, rng: np.random.Generator) -> None:
    x = exact_inputs(rng, 3)
    reference = model.run(x)
    bits = bfloat16_bits(x)
    np.testing.assert_array_equal(bfloat16_values(bits), x)  # exact, as the test needs
    with model.create_context() as context:
        for runner in (model, context):
            y = runner.run(bits, dtype="bfloat16")
            assert y.dtype == np.uint16
            np.testing.assert_array_equal(y, bfloat16_bits(reference))


def test_every_dtype_pair(model: Any, rng: np.random.Generator) -> None:
    x = exact_inputs(rng, 5)
    reference = model.run(x)
    inputs = {"float32": (x, None), "float16": (x.astype(np.float16), None),
              "bfloat16": (bfloat16_bits(x), "bfloat16")}
    expected = {"float32": reference.view(np.uint32),
                "float16": reference.astype(np.float16).view(np.uint16),
                "bfloat16": bfloat16_bits(reference)}
    for in_name, (array, dtype) in inputs.items():
        for out_name, want in expected.items():
            y = model.run(array, dtype=dtype, out_dtype=out_name)
            got = y.view(np.uint32) if out_name == "float32" else y.view(np.uint16)
            np.testing.assert_array_equal(got, want, err_msg=f"{in_name} -> {out_name}")
    # Numpy dtypes are accepted for the names.
    y = model.run(x, out_dtype=np.float16)
    assert y.dtype == np.float16


def test_float16_output_overflows_to_infinity(model: Any) -> None:
    x = np.full((1, 100), 6e6, np.float32)  # outputs from 2e4 to 5e5 in magnitude
    wide = model.run(x)
    narrow = model.run(x, out_dtype="float16")
    assert np.array_equal(np.isinf(narrow), np.abs(wide) >= 65520)  # halfway to 65536 rounds up
    assert np.isinf(narrow).any(), "the test needs outputs beyond float16's range"
    np.testing.assert_array_equal(bfloat16_values(model.run(x, out_dtype="bfloat16")),
                                  bfloat16_values(bfloat16_bits(wide)))  # finite in bfloat16


BAD = [
    (lambda: np.zeros((2, 100), np.uint16), {}, TypeError, "dtype='bfloat16'"),
    (lambda: np.zeros((2, 100), np.float64), {}, TypeError, "float32"),
    (lambda: np.zeros((2, 100), ">f2"), {}, TypeError, "float16"),
    (lambda: np.zeros((2, 100), np.float32), {"dtype": "bfloat16"}, TypeError, "uint16"),
    (lambda: np.zeros((2, 100), np.float16), {"dtype": "float32"}, TypeError, "float32"),
    (lambda: np.zeros((2, 100), np.float32), {"dtype": "float64"}, ValueError, "'float64'"),
    (lambda: np.zeros((2, 100), np.float32), {"out_dtype": "int8"}, ValueError, "out_dtype"),
    (lambda: np.zeros((2, 100), np.float32), {"out_dtype": 3.5}, TypeError, "out_dtype"),
    (lambda: np.zeros((2, 99), np.float16), {}, ValueError, "shape"),
    (lambda: np.zeros((1025, 100), np.uint16), {"dtype": "bfloat16"}, ValueError, "max_batch"),
    (lambda: np.zeros((200, 2), np.float16).T, {}, ValueError, "C-contiguous"),
]


@pytest.mark.parametrize("make, kwargs, error, fragment", BAD)
def test_bad_arguments_are_refused_before_the_library(model: Any, make: Any, kwargs: Any,
                                                      error: type, fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        model.run(make(), **kwargs)


# ------------------------------------------------------------------------------------------------
# run_device: the dtype of each buffer reaches the typed call (recorded, nothing dereferenced)
# ------------------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> int:
        self.calls.append(args[1:])
        return 0


class FakeCudaArray:
    """A host array exposing __cuda_array_interface__ (never dereferenced: calls are recorded)."""

    def __init__(self, array: np.ndarray, typestr: str) -> None:
        self.array = array
        self.__cuda_array_interface__ = {"shape": array.shape, "typestr": typestr,
                                         "strides": None, "version": 3,
                                         "data": (array.ctypes.data, False)}


@pytest.fixture
def recorded() -> Any:
    with fusednn.Model.from_file(SEED_MLP) as m:
        with m.create_context() as context:
            context._run_device_function = Recorder()
            context._run_device_typed_function = Recorder()
            yield context


def test_cuda_array_interface_float16_goes_through_the_typed_call(recorded: Any) -> None:
    x = FakeCudaArray(np.zeros((2, 100), np.float16), "<f2")
    y = FakeCudaArray(np.zeros((2, 10), np.float32), "<f4")
    recorded.run_device(x, y, stream=7)
    assert not recorded._run_device_function.calls
    (call,) = recorded._run_device_typed_function.calls
    assert call == (2, x.array.ctypes.data, 1, 200, y.array.ctypes.data, 0, 20, 7)
    # float32 both ways stays on the float32 call.
    recorded.run_device(FakeCudaArray(np.zeros((2, 100), np.float32), "<f4"), y)
    assert len(recorded._run_device_function.calls) == 1


def test_dlpack_bfloat16_and_float16(recorded: Any) -> None:
    x = FakeProducer(np.zeros((3, 100), np.uint16), dtype=(4, 16, 1))  # kDLBfloat
    y = FakeProducer(np.zeros((3, 10), np.float16))                   # kDLFloat, 16 bits
    recorded.run_device(x, y)
    (call,) = recorded._run_device_typed_function.calls
    assert call == (3, x.array.ctypes.data, 2, 300, y.array.ctypes.data, 1, 30, None)


def test_device_dtypes_refused(recorded: Any) -> None:
    y = FakeCudaArray(np.zeros((2, 10), np.float32), "<f4")
    with pytest.raises(TypeError, match=r"'<u2'.*float16"):
        recorded.run_device(FakeCudaArray(np.zeros((2, 100), np.uint16), "<u2"), y)
    with pytest.raises(TypeError, match=r"code 4, bits 32.*bfloat16"):
        recorded.run_device(FakeProducer(np.zeros((2, 100), np.float32), dtype=(4, 32, 1)),
                            FakeProducer(np.zeros((2, 10), np.float32)))
    storage = np.zeros(2 * 100 + 1, np.float16)
    odd = FakeProducer(storage[1:].reshape(2, 100))
    assert odd.array.ctypes.data % 4 == 2  # 2-byte aligned is enough for float16
    recorded.run_device(odd, FakeProducer(np.zeros((2, 10), np.float16)))
    assert len(recorded._run_device_typed_function.calls) == 1
    with pytest.raises(ValueError, match="not aligned to float16"):
        raw = np.zeros(2 * 200 + 1, np.uint8)[1:].view(np.float16).reshape(2, 100)
        recorded.run_device(FakeProducer(raw), FakeProducer(np.zeros((2, 10), np.float16)))
    assert not recorded._run_device_function.calls


def test_cpu_model_refuses_typed_device_run() -> None:
    with fusednn.Model.from_file(SEED_MLP, device="cpu") as m, m.create_context() as context:
        x = FakeCudaArray(np.zeros((2, 100), np.float16), "<f2")
        y = FakeCudaArray(np.zeros((2, 10), np.float16), "<f2")
        with pytest.raises(fusednn.UnsupportedError, match="FDNN_DEVICE_CUDA"):
            context.run_device(x, y)


def test_torch_half_and_bfloat16_on_the_gpu(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or fusednn.cuda_device_count() == 0:
        pytest.skip("needs a GPU and a CUDA build of libfusednn")
    x = exact_inputs(rng, 4)
    with fusednn.Model.from_file(SEED_MLP, device="cuda") as m, m.create_context() as context:
        reference = m.run(x)
        for dtype in (torch.float16, torch.bfloat16):
            x_gpu = torch.from_numpy(x).cuda().to(dtype)
            y_gpu = torch.empty((4, 10), dtype=dtype, device="cuda")
            context.run_device(x_gpu, y_gpu)
            expected = torch.from_numpy(reference).to(dtype)
            assert torch.equal(y_gpu.cpu(), expected), dtype
