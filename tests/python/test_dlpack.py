# SPDX-License-Identifier: Apache-2.0

"""Context.run_device through __dlpack__: capsule parsing and checks without a GPU.

The producers here are fakes: they fill a DLManagedTensor (FakeProducer, the unversioned
protocol, no deleter) or a DLManagedTensorVersioned / DLManagedTensor with a counting deleter
(ManagedProducer) over a host numpy array, wrap it in a PyCapsule named "dltensor_versioned" or
"dltensor" and claim to be on kDLCUDA. The native fdnn_context_run_device call is replaced by a
recorder, so nothing is dereferenced. The last test runs a real torch CUDA tensor when torch and
a GPU are present.
"""

from __future__ import annotations

import ctypes
import gc
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
    # Consumed, as the protocol requires (this producer gave no deleter to call).
    assert _capsule_is_valid(x.capsules[0], b"used_dltensor") == 1
    assert _capsule_is_valid(y.capsules[0], b"used_dltensor") == 1


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

    with pytest.raises(TypeError, match="PyCapsule named 'dltensor_versioned' or 'dltensor'"):
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


# ------------------------------------------------------------------------------------------------
# The versioned protocol, consumption and deleters
# ------------------------------------------------------------------------------------------------

_VERSIONED_NAME = b"dltensor_versioned"  # referenced for the whole run, as PyCapsule_New requires
_READ_ONLY = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
_IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED

# Separate function objects from the ones above: a capsule destructor gets a raw PyObject* of an
# object being deallocated, which must not be turned back into a Python reference.
_raw_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_raw_is_valid.restype = ctypes.c_int
_raw_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_raw_get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_raw_get_pointer.restype = ctypes.c_void_p
_raw_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _producer_capsule_destructor(capsule: int) -> None:
    """What a real producer's capsule destructor does: delete a tensor nobody consumed."""
    for name, managed_type in ((_VERSIONED_NAME, _dlpack.DLManagedTensorVersioned),
                               (_NAME, _dlpack.DLManagedTensor)):
        if _raw_is_valid(capsule, name):
            address = _raw_get_pointer(capsule, name)
            deleter = managed_type.from_address(address).deleter
            if deleter:
                deleter(ctypes.cast(address, ctypes.POINTER(managed_type)))


class ManagedProducer:
    """A producer with a deleter that counts its calls and a capsule destructor like a real one.

    takes_max_version: whether __dlpack__ accepts the versioned protocol's keywords (a producer
    from before it raises TypeError for them). versioned: whether it then answers with a
    DLManagedTensorVersioned (of `version`, with `flags`) rather than a DLManagedTensor.
    """

    def __init__(self, array: np.ndarray, takes_max_version: bool = True, versioned: bool = True,
                 flags: int = 0, version: Tuple[int, int] = (1, 0)) -> None:
        self.array = array
        self.takes_max_version = takes_max_version
        self.versioned = versioned
        self.deleted = 0
        self.max_versions: List[Any] = []
        self.capsules: List[Any] = []
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)

        def count(_: Any) -> None:
            self.deleted += 1

        self._versioned_deleter = _dlpack.VERSIONED_DELETER(count)
        self._deleter = _dlpack.DELETER(count)
        self.managed_versioned = _dlpack.DLManagedTensorVersioned()
        self.managed_versioned.version.major, self.managed_versioned.version.minor = version
        self.managed_versioned.flags = flags
        self.managed_versioned.deleter = self._versioned_deleter
        self.managed = _dlpack.DLManagedTensor()
        self.managed.deleter = self._deleter
        for tensor in (self.managed_versioned.dl_tensor, self.managed.dl_tensor):
            tensor.data = array.ctypes.data
            tensor.device.device_type, tensor.device.device_id = 2, 0
            tensor.ndim = array.ndim
            tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = (
                2 if array.dtype.kind == "f" else 0, array.dtype.itemsize * 8, 1)
            tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, *, stream: Any = None, **keywords: Any) -> Any:
        if keywords and not self.takes_max_version:
            raise TypeError(f"__dlpack__() got unexpected keyword arguments {sorted(keywords)}")
        max_version = keywords.get("max_version")
        self.max_versions.append(max_version)
        destructor = ctypes.cast(_producer_capsule_destructor, ctypes.c_void_p)
        if self.versioned and max_version is not None and max_version[0] >= 1:
            capsule = _capsule_new(ctypes.addressof(self.managed_versioned), _VERSIONED_NAME,
                                   destructor)
        else:
            capsule = _capsule_new(ctypes.addressof(self.managed), _NAME, destructor)
        self.capsules.append(capsule)
        return capsule

    def drop_capsules(self) -> None:
        """Lets the capsules go, running their destructors."""
        self.capsules.clear()
        gc.collect()


def test_fake_producer_deletes_an_unconsumed_capsule() -> None:
    # The check behind "exactly once" below: a capsule nobody consumed is deleted by the
    # producer's own destructor.
    for versioned in (True, False):
        producer = ManagedProducer(np.zeros((2, 100), np.float32), versioned=versioned)
        producer.__dlpack__(max_version=(1, 0))
        assert producer.deleted == 0
        producer.drop_capsules()
        assert producer.deleted == 1


def test_versioned_capsule_is_consumed_and_deleted_once(context: Any) -> None:
    x = ManagedProducer(np.zeros((3, 100), np.float32))
    y = ManagedProducer(np.zeros((3, 10), np.float32))
    context.run_device(x, y, stream=0x5678)
    batch, x_pointer, _, y_pointer, _, stream = context._run_device_function.calls[0]
    assert (batch, stream) == (3, 0x5678)
    assert x_pointer == x.array.ctypes.data and y_pointer == y.array.ctypes.data
    for producer in (x, y):
        assert producer.max_versions == [(1, 0)]
        assert _capsule_is_valid(producer.capsules[0], b"used_dltensor_versioned") == 1
        assert producer.deleted == 1
        producer.drop_capsules()  # the renamed capsule's destructor must not delete again
        assert producer.deleted == 1


def test_producer_without_max_version_is_called_again_unversioned(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32), takes_max_version=False)
    y = ManagedProducer(np.zeros((2, 10), np.float32), takes_max_version=False)
    context.run_device(x, y)
    assert len(context._run_device_function.calls) == 1
    for producer in (x, y):
        assert producer.max_versions == [None]
        assert _capsule_is_valid(producer.capsules[0], b"used_dltensor") == 1
        assert producer.deleted == 1
        producer.drop_capsules()
        assert producer.deleted == 1


def test_versioned_call_may_be_answered_with_an_unversioned_capsule(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32), versioned=False)
    y = ManagedProducer(np.zeros((2, 10), np.float32))
    context.run_device(x, y)
    assert x.max_versions == [(1, 0)]
    assert _capsule_is_valid(x.capsules[0], b"used_dltensor") == 1
    assert _capsule_is_valid(y.capsules[0], b"used_dltensor_versioned") == 1
    assert (x.deleted, y.deleted) == (1, 1)


def test_read_only_output_is_refused_and_both_deleted_once(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 10), np.float32), flags=_READ_ONLY)
    with pytest.raises(ValueError, match=r"output is read-only.*DLPACK_FLAG_BITMASK_READ_ONLY"):
        context.run_device(x, y)
    assert not context._run_device_function.calls
    assert (x.deleted, y.deleted) == (1, 1)
    x.drop_capsules()
    y.drop_capsules()
    assert (x.deleted, y.deleted) == (1, 1)


def test_read_only_input_is_accepted(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32), flags=_READ_ONLY)
    y = ManagedProducer(np.zeros((2, 10), np.float32))
    context.run_device(x, y)
    assert len(context._run_device_function.calls) == 1
    assert (x.deleted, y.deleted) == (1, 1)


def test_copied_output_is_refused(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 10), np.float32), flags=_IS_COPIED)
    with pytest.raises(ValueError, match="output is a copy.*would be lost"):
        context.run_device(x, y)
    assert (x.deleted, y.deleted) == (1, 1)


def test_failed_checks_delete_each_consumed_tensor_once(context: Any) -> None:
    # A wrong output dtype: refused while reading the output's capsule.
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 10), np.float64))
    with pytest.raises(TypeError, match="bits 64"):
        context.run_device(x, y)
    assert (x.deleted, y.deleted) == (1, 1)
    # A wrong output shape: refused after both capsules were read.
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 9), np.float32), takes_max_version=False)
    with pytest.raises(ValueError, match=r"output shape \(2, 9\)"):
        context.run_device(x, y)
    assert (x.deleted, y.deleted) == (1, 1)
    # A refused output device: the input was already consumed.
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    with pytest.raises(TypeError, match="kDLCPU"):
        context.run_device(x, FakeProducer(np.zeros((2, 10), np.float32), device=(1, 0)))
    assert x.deleted == 1
    assert not context._run_device_function.calls


def test_native_failure_still_deletes_once(context: Any) -> None:
    def failing(*args: Any) -> int:
        raise fusednn.DeviceError(fusednn.Status.DEVICE_ERROR, "simulated")

    context._run_device_function = failing
    x = ManagedProducer(np.zeros((2, 100), np.float32))
    y = ManagedProducer(np.zeros((2, 10), np.float32))
    with pytest.raises(fusednn.DeviceError):
        context.run_device(x, y)
    assert (x.deleted, y.deleted) == (1, 1)


def test_unknown_major_version_is_deleted_and_refused(context: Any) -> None:
    x = ManagedProducer(np.zeros((2, 100), np.float32), version=(2, 0))
    with pytest.raises(TypeError, match=r"version 2\.0; fusednn reads version 1\.x"):
        context.run_device(x, ManagedProducer(np.zeros((2, 10), np.float32)))
    assert x.deleted == 1
    x.drop_capsules()
    assert x.deleted == 1
    # A newer minor version only adds enum values: accepted.
    x = ManagedProducer(np.zeros((2, 100), np.float32), version=(1, 3))
    context.run_device(x, ManagedProducer(np.zeros((2, 10), np.float32)))
    assert x.deleted == 1


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
