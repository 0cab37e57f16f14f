"""Context.run_device through __dlpack__: capsule parsing and checks without a GPU.

The producers here are fakes: they fill a DLManagedTensor over a host numpy array, wrap it in a
PyCapsule named "dltensor" and claim to be on kDLCUDA. The native fdnn_context_run_device call is
replaced by a recorder, so nothing is dereferenced. The last test runs a real torch CUDA tensor
when torch and a GPU are present.
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import fusednn
from fusednn import _dlpack
from conftest import GOLDEN, relative_error

SEED_MLP = GOLDEN / "seed_mlp" / "model.safetensors"  # input (100,), output (10,)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_NAME = b"dltensor"  # referenced for the whole run, as PyCapsule_New requires


class FakeProducer:
    """A DLPack producer over a host array that claims to live on a CUDA device."""

    def __init__(self, array: np.ndarray, device: Tuple[int, int] = (2, 0),
                 strides: Optional[Sequence[int]] = None, byte_offset: int = 0,
                 dtype: Optional[Tuple[int, int, int]] = None,
                 tensor_device: Optional[Tuple[int, int]] = None) -> None:
        self.array = array
        self.device = device
        self.streams: List[Any] = []
        self.capsules: List[Any] = []
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self._strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        managed = _dlpack.DLManagedTensor()
        tensor = managed.dl_tensor
        tensor.data = array.ctypes.data
        tensor.device.device_type, tensor.device.device_id = tensor_device or device
        tensor.ndim = array.ndim
        if dtype is None:
            dtype = (2 if array.dtype.kind == "f" else 0, array.dtype.itemsize * 8, 1)
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = dtype
        tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            tensor.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        tensor.byte_offset = byte_offset
        self.managed = managed  # no deleter: this object owns everything

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self.device

    def __dlpack__(self, *, stream: Any = None) -> Any:
        self.streams.append(stream)
        capsule = _capsule_new(ctypes.addressof(self.managed), _NAME, None)
        self.capsules.append(capsule)
        return capsule


class Recorder:
    """Stands in for fdnn_context_run_device."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> int:
        self.calls.append(args[1:])
        return 0


@pytest.fixture
def context() -> Any:
    with fusednn.Model.from_file(SEED_MLP) as model:
        with model.create_context() as ctx:
            ctx._run_device_function = Recorder()
            yield ctx


def test_pointers_shapes_and_stream_reach_the_native_call(context: Any) -> None:
    x = FakeProducer(np.zeros((3, 100), np.float32))
    y = FakeProducer(np.zeros((3, 10), np.float32))
    context.run_device(x, y, stream=0x1234)
    batch, x_pointer, x_count, y_pointer, y_count, stream = context._run_device_function.calls[0]
    assert (batch, x_count, y_count, stream) == (3, 300, 30, 0x1234)
    assert x_pointer == x.array.ctypes.data and y_pointer == y.array.ctypes.data
    assert x.streams == [0x1234] and y.streams == [0x1234]
    # Left unconsumed: the producer's capsule destructor stays in charge of the deleter.
    assert _capsule_is_valid(x.capsules[0], b"dltensor") == 1


def test_default_stream_and_single_sample(context: Any) -> None:
    x = FakeProducer(np.zeros((100,), np.float32))
    y = FakeProducer(np.zeros((10,), np.float32))
    context.run_device(x, y)
    assert context._run_device_function.calls[0][0] == 1
    assert context._run_device_function.calls[0][-1] is None
    assert x.streams == [None]


def test_byte_offset_and_explicit_c_strides(context: Any) -> None:
    storage = np.zeros(2 * 100 + 4, np.float32)
    x = FakeProducer(storage[:200].reshape(2, 100), strides=(100, 1), byte_offset=16)
    y = FakeProducer(np.zeros((2, 10), np.float32), strides=(10, 1))
    context.run_device(x, y)
    assert context._run_device_function.calls[0][1] == storage.ctypes.data + 16
    # A size-1 extent may carry any stride.
    x1 = FakeProducer(np.zeros((1, 100), np.float32), strides=(7, 1))
    context.run_device(x1, FakeProducer(np.zeros((1, 10), np.float32)))


def test_refuses_non_contiguous_strides(context: Any) -> None:
    x = FakeProducer(np.zeros((2, 100), np.float32), strides=(1, 2))
    with pytest.raises(ValueError, match=r"input is not C-contiguous.*strides \(1, 2\)"):
        context.run_device(x, FakeProducer(np.zeros((2, 10), np.float32)))
    assert not context._run_device_function.calls


def test_refuses_wrong_dtype(context: Any) -> None:
    x = FakeProducer(np.zeros((2, 100), np.float64))
    with pytest.raises(TypeError, match=r"code 2, bits 64, lanes 1.*float32"):
        context.run_device(x, FakeProducer(np.zeros((2, 10), np.float32)))
    x = FakeProducer(np.zeros((2, 100), np.float32), dtype=(2, 32, 4))
    with pytest.raises(TypeError, match="lanes 4"):
        context.run_device(x, FakeProducer(np.zeros((2, 10), np.float32)))
    y = FakeProducer(np.zeros((2, 10), np.int32))
    with pytest.raises(TypeError, match=r"output has DLPack dtype \(code 0, bits 32"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32)), y)


def test_refuses_wrong_shapes(context: Any) -> None:
    with pytest.raises(ValueError, match=r"input shape \(2, 99\)"):
        context.run_device(FakeProducer(np.zeros((2, 99), np.float32)),
                           FakeProducer(np.zeros((2, 10), np.float32)))
    with pytest.raises(ValueError, match=r"output shape \(2, 9\) should be \(2, 10\)"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32)),
                           FakeProducer(np.zeros((2, 9), np.float32)))
    assert not context._run_device_function.calls


def test_refuses_other_devices(context: Any) -> None:
    y = FakeProducer(np.zeros((2, 10), np.float32))
    with pytest.raises(TypeError, match=r"kDLCPU \(device type 1\)"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32), device=(1, 0)), y)
    with pytest.raises(TypeError, match=r"kDLCUDAManaged \(device type 13\)"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32), device=(13, 0)), y)
    with pytest.raises(ValueError, match="CUDA device 1 but the model runs on device 0"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32), device=(2, 1)), y)
    with pytest.raises(ValueError, match=r"__dlpack_device__\(\) said"):
        context.run_device(FakeProducer(np.zeros((2, 100), np.float32),
                                        tensor_device=(2, 3)), y)
    # A real numpy array speaks DLPack too, from the CPU.
    with pytest.raises(TypeError, match="kDLCPU"):
        context.run_device(np.zeros((2, 100), np.float32), y)
    assert not context._run_device_function.calls


def test_refuses_a_capsule_of_another_name(context: Any) -> None:
    class Consumed(FakeProducer):
        def __dlpack__(self, *, stream: Any = None) -> Any:
            return _capsule_new(ctypes.addressof(self.managed), b"used_dltensor", None)

    with pytest.raises(TypeError, match="PyCapsule named 'dltensor'"):
        context.run_device(Consumed(np.zeros((2, 100), np.float32)),
                           FakeProducer(np.zeros((2, 10), np.float32)))


def test_cuda_array_interface_wins_over_dlpack(context: Any) -> None:
    class Both(FakeProducer):
        def __init__(self, array: np.ndarray) -> None:
            super().__init__(array, device=(1, 0))  # the DLPack side would be refused
            self.__cuda_array_interface__ = {"shape": array.shape, "typestr": "<f4",
                                             "strides": None, "version": 3,
                                             "data": (array.ctypes.data, False)}

    x = Both(np.zeros((2, 100), np.float32))
    context.run_device(x, Both(np.zeros((2, 10), np.float32)))
    assert context._run_device_function.calls[0][1] == x.array.ctypes.data
    assert x.streams == []


def test_torch_cuda_tensor_through_dlpack(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or fusednn.cuda_device_count() < 1:
        pytest.skip("needs a CUDA GPU for both torch and fusednn")

    class DLPackOnly:
        """Hides the tensor's __cuda_array_interface__, leaving only DLPack."""

        def __init__(self, tensor: Any) -> None:
            self.tensor = tensor

        def __dlpack__(self, *, stream: Any = None) -> Any:
            return self.tensor.__dlpack__(stream=stream)

        def __dlpack_device__(self) -> Tuple[int, int]:
            return self.tensor.__dlpack_device__()

    x_host = rng.standard_normal((5, 100)).astype(np.float32)
    with fusednn.Model.from_file(SEED_MLP) as cpu_model:
        expected = cpu_model.run(x_host)
    with fusednn.Model.from_file(SEED_MLP, device="cuda") as gpu_model:
        with gpu_model.create_context() as gpu_context:
            x = torch.from_numpy(x_host).cuda()
            out = torch.full((5, 10), float("nan"), device="cuda")
            torch_stream = torch.cuda.current_stream()
            gpu_context.run_device(DLPackOnly(x), DLPackOnly(out), stream=torch_stream)
            torch_stream.synchronize()
            actual = out.cpu().numpy()
    assert relative_error(actual, expected) < 1e-4
