# SPDX-License-Identifier: Apache-2.0

"""Context.bind_device and the torch tensor path of run_device, without a GPU (native calls
recorded, torch replaced by a stand-in module), and with one (real torch tensors on a stream,
against the CPU backend) where torch and a GPU are present."""

from __future__ import annotations

import sys
import types
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

import fusednn
from conftest import GOLDEN, relative_error
from test_dlpack import ManagedProducer
from test_typed_io import FakeCudaArray, Recorder, recorded  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("native")

SEED_MLP = GOLDEN / "seed_mlp" / "model.safetensors"  # input (100,), output (10,)


class CountingCudaArray:
    """Counts reads of its __cuda_array_interface__, to show when buffers are checked."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self._interface = FakeCudaArray(array, "<f4").__cuda_array_interface__
        self.reads = 0

    @property
    def __cuda_array_interface__(self) -> Any:
        self.reads += 1
        return self._interface


# ------------------------------------------------------------------------------------------------
# bind_device
# ------------------------------------------------------------------------------------------------


def test_bound_run_checks_once_and_repeats_run_devices_call(recorded: Any) -> None:
    x = CountingCudaArray(np.zeros((3, 100), np.float32))
    y = CountingCudaArray(np.zeros((3, 10), np.float32))
    recorded.run_device(x, y, stream=0x77)
    assert (x.reads, y.reads) == (1, 1)  # one read a buffer a call
    run = recorded.bind_device(x, y, stream=0x77)
    for _ in range(3):
        run()
    assert (x.reads, y.reads) == (2, 2)  # the binding's read only
    calls = recorded._run_device_function.calls
    assert len(calls) == 4 and calls[1:] == [calls[0]] * 3
    assert calls[0] == (3, x.array.ctypes.data, 300, y.array.ctypes.data, 30, 0x77)


def test_bound_run_takes_the_typed_call_for_16_bit_buffers(recorded: Any) -> None:
    x = FakeCudaArray(np.zeros((2, 100), np.float16), "<f2")
    y = FakeCudaArray(np.zeros((2, 10), np.float32), "<f4")
    recorded.bind_device(x, y)()
    assert not recorded._run_device_function.calls
    assert recorded._run_device_typed_function.calls == [
        (2, x.array.ctypes.data, 1, 200, y.array.ctypes.data, 0, 20, None)]


def test_binding_refuses_what_run_device_refuses(recorded: Any) -> None:
    x = FakeCudaArray(np.zeros((2, 100), np.float32), "<f4")
    with pytest.raises(ValueError, match=r"Context.bind_device: output shape \(2, 9\)"):
        recorded.bind_device(x, FakeCudaArray(np.zeros((2, 9), np.float32), "<f4"))
    with pytest.raises(ValueError, match="batch 0 is outside"):
        recorded.bind_device(FakeCudaArray(np.zeros((0, 100), np.float32), "<f4"),
                             FakeCudaArray(np.zeros((0, 10), np.float32), "<f4"))
    assert not recorded._run_device_function.calls


def test_bound_run_refuses_after_close_of_itself_or_its_context() -> None:
    with fusednn.Model.from_file(SEED_MLP, device="cpu") as m:
        context = m.create_context()
        context._run_device_function = Recorder()
        x = FakeCudaArray(np.zeros((1, 100), np.float32), "<f4")
        y = FakeCudaArray(np.zeros((1, 10), np.float32), "<f4")
        with context.bind_device(x, y) as run:
            run()
        assert run.closed
        with pytest.raises(ValueError, match="closed"):
            run()
        run = context.bind_device(x, y)
        context.close()
        with pytest.raises(ValueError, match="closed"):
            run()
        with pytest.raises(ValueError, match="the context is closed"):
            context.bind_device(x, y)
        assert len(context._run_device_function.calls) == 1


def test_bound_dlpack_tensors_are_released_once_at_close(recorded: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 10), np.float32))
    run = recorded.bind_device(x, y, stream=5)
    run()
    run()
    assert (x.deleted, y.deleted) == (0, 0)  # held while the binding may queue runs
    run.close()
    run.close()
    assert (x.deleted, y.deleted) == (1, 1)
    # A refused binding releases what it had consumed.
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    with pytest.raises(ValueError, match="output shape"):
        recorded.bind_device(x, ManagedProducer(np.zeros((2, 9), np.float32)))
    assert x.deleted == 1


def test_bound_run_reports_the_native_status() -> None:
    # The real library's call, through the binding's ctypes conversion: a CPU model has no
    # device path, so the native call answers UNSUPPORTED on each call.
    with fusednn.Model.from_file(SEED_MLP, device="cpu") as m, m.create_context() as context:
        run = context.bind_device(FakeCudaArray(np.zeros((2, 100), np.float32), "<f4"),
                                  FakeCudaArray(np.zeros((2, 10), np.float32), "<f4"))
        for _ in range(2):
            with pytest.raises(fusednn.UnsupportedError, match="FDNN_DEVICE_CUDA"):
                run()


# ------------------------------------------------------------------------------------------------
# torch tensors through their own methods, with a stand-in torch module
# ------------------------------------------------------------------------------------------------


class FakeDtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


def fake_torch_module() -> Any:
    module = types.ModuleType("torch")
    for name in ("float32", "float16", "bfloat16", "float64"):
        setattr(module, name, FakeDtype(name))

    class Tensor:
        """What the binding reads of a torch tensor, over a host array (never dereferenced)."""

        def __init__(self, array: np.ndarray, dtype: Any = None, device: Optional[int] = 0,
                     contiguous: bool = True, requires_grad: bool = False,
                     offset: int = 0) -> None:
            self.array = array
            self.dtype = dtype or module.float32
            self.index = device
            self.contiguous = contiguous
            self.requires_grad = requires_grad
            self.offset = offset
            self.shape = array.shape
            self.interface_reads = 0

        is_cuda = property(lambda self: self.index is not None)
        device = property(lambda self: "cpu" if self.index is None else f"cuda:{self.index}")

        def get_device(self) -> int:
            return -1 if self.index is None else self.index

        def is_contiguous(self) -> bool:
            return self.contiguous

        def data_ptr(self) -> int:
            return self.array.ctypes.data + self.offset

        @property
        def __cuda_array_interface__(self) -> Any:
            self.interface_reads += 1
            raise AssertionError("the torch path reads no __cuda_array_interface__")

    module.Tensor = Tensor
    return module


@pytest.fixture
def torch_stand_in(monkeypatch: pytest.MonkeyPatch) -> Any:
    module = fake_torch_module()
    monkeypatch.setitem(sys.modules, "torch", module)
    return module


def test_torch_tensors_are_read_through_their_methods(recorded: Any, torch_stand_in: Any) -> None:
    Tensor = torch_stand_in.Tensor
    x, y = Tensor(np.zeros((4, 100), np.float32)), Tensor(np.zeros((4, 10), np.float32))
    recorded.run_device(x, y, stream=9)
    assert recorded._run_device_function.calls == [
        (4, x.array.ctypes.data, 400, y.array.ctypes.data, 40, 9)]
    x16 = Tensor(np.zeros((100,), np.uint16), dtype=torch_stand_in.bfloat16)
    y16 = Tensor(np.zeros((10,), np.uint16), dtype=torch_stand_in.float16)
    recorded.bind_device(x16, y16)()
    assert recorded._run_device_typed_function.calls == [
        (1, x16.array.ctypes.data, 2, 100, y16.array.ctypes.data, 1, 10, None)]
    # An input that requires grad is only read: accepted.
    recorded.run_device(Tensor(np.zeros((4, 100), np.float32), requires_grad=True), y)
    assert len(recorded._run_device_function.calls) == 2


@pytest.mark.parametrize("which,change,error,message", [
    ("input", dict(device=None), TypeError, r"input is a torch tensor on cpu, not on a GPU"),
    ("input", dict(dtype="float64"), TypeError, r"input has dtype torch.float64"),
    ("output", dict(device=1), ValueError, r"output is on cuda:1, the model on cuda:0"),
    ("input", dict(contiguous=False), ValueError, r"input is not C-contiguous"),
    ("output", dict(requires_grad=True), ValueError, r"output requires grad"),
    ("input", dict(offset=2), ValueError, r"input's data is not aligned to float32"),
])
def test_torch_tensors_are_checked(recorded: Any, torch_stand_in: Any, which: str,
                                   change: Any, error: Any, message: str) -> None:
    if "dtype" in change:
        change = dict(dtype=getattr(torch_stand_in, change["dtype"]))
    kwargs = {"input": {}, "output": {}}
    kwargs[which] = change
    x = torch_stand_in.Tensor(np.zeros((2, 100), np.float32), **kwargs["input"])
    y = torch_stand_in.Tensor(np.zeros((2, 10), np.float32), **kwargs["output"])
    for method in (recorded.run_device, recorded.bind_device):
        with pytest.raises(error, match=message):
            method(x, y)
    assert not recorded._run_device_function.calls


def test_torch_tensors_without_strided_storage_are_a_type_error(recorded: Any,
                                                                 torch_stand_in: Any) -> None:
    class Sparse(torch_stand_in.Tensor):
        def is_contiguous(self) -> bool:
            raise RuntimeError("sparse tensors do not have is_contiguous")

    torch_stand_in.Tensor = Sparse  # what describe() compares type(x) with
    x = Sparse(np.zeros((2, 100), np.float32))
    with pytest.raises(TypeError, match="input is a torch tensor fusednn cannot read.*sparse"):
        recorded.run_device(x, Sparse(np.zeros((2, 10), np.float32)))
    assert not recorded._run_device_function.calls


def test_torch_subclasses_take_the_interface_path(recorded: Any, torch_stand_in: Any) -> None:
    class Parameter(torch_stand_in.Tensor):
        pass

    x = Parameter(np.zeros((2, 100), np.float32))
    with pytest.raises(AssertionError, match="reads no __cuda_array_interface__"):
        recorded.run_device(x, torch_stand_in.Tensor(np.zeros((2, 10), np.float32)))
    assert x.interface_reads == 1


# ------------------------------------------------------------------------------------------------
# Real torch tensors on a GPU
# ------------------------------------------------------------------------------------------------


def test_torch_device_runs_match_the_cpu_backend(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or fusednn.cuda_device_count() == 0:
        pytest.skip("needs a GPU and a CUDA build of libfusednn")
    with fusednn.Model.from_file(SEED_MLP, device="cpu") as cpu_model:
        with fusednn.Model.from_file(SEED_MLP, device="cuda", max_batch=33) as gpu_model:
            context = gpu_model.create_context()
            stream = torch.cuda.Stream()
            for batch in (1, 2, 33):
                inputs: List[Tuple[np.ndarray, Any]] = []
                for _ in range(3):
                    host = rng.standard_normal((batch, 100)).astype(np.float32)
                    inputs.append((host, torch.from_numpy(host).cuda()))
                out = torch.full((batch, 10), float("nan"), device="cuda")
                stream.wait_stream(torch.cuda.current_stream())
                with context.bind_device(inputs[0][1], out, stream=stream) as run:
                    run()
                    stream.synchronize()
                    expected = cpu_model.run(inputs[0][0])
                    assert relative_error(out.cpu().numpy(), expected) <= 1e-5
                    with torch.cuda.stream(stream):  # new data into the bound input
                        inputs[0][1].copy_(inputs[1][1])
                    run()
                    stream.synchronize()
                    expected = cpu_model.run(inputs[1][0])
                    assert relative_error(out.cpu().numpy(), expected) <= 1e-5
                out.fill_(float("nan"))  # on torch's current stream: ordered before the run
                stream.wait_stream(torch.cuda.current_stream())
                context.run_device(inputs[2][1], out, stream=stream)
                stream.synchronize()
                assert relative_error(out.cpu().numpy(), cpu_model.run(inputs[2][0])) <= 1e-5
            context.close()
