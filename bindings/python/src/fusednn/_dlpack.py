"""Reading a DLPack capsule (the ``__dlpack__`` protocol) with ctypes, for Context.run_device.

Only the unversioned protocol is used: ``__dlpack__`` is called without ``max_version``, so a
conforming producer returns a PyCapsule named "dltensor" over a DLManagedTensor (dlpack.h v0.x
layout, which later versions keep for that capsule name).
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

__all__ = ["DLDataType", "DLDevice", "DLManagedTensor", "DLTensor", "KDL_CUDA", "device_buffer"]

KDL_CPU = 1
KDL_CUDA = 2
KDL_FLOAT = 2

# Device type codes of dlpack.h, for messages.
_DEVICE_TYPE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
                      8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
                      13: "kDLCUDAManaged", 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon"}

CAPSULE_NAME = b"dltensor"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", DELETER)]

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_type_name(device_type: int) -> str:
    return f"{_DEVICE_TYPE_NAMES.get(device_type, 'unknown')} (device type {device_type})"


def has_dlpack(obj: Any) -> bool:
    return callable(getattr(obj, "__dlpack__", None)) and \
        callable(getattr(obj, "__dlpack_device__", None))


def device_buffer(obj: Any, stream: Optional[int], device_id: int, where: str,
                  what: str) -> Tuple[int, Tuple[int, ...], Any]:
    """(data pointer, shape, capsule) of a float32 C-contiguous CUDA tensor given by DLPack.

    `stream` is the cudaStream_t the run is queued on, handed to the producer so that it orders
    its pending work before it (None when the run uses the context's own stream: the producer
    then assumes the legacy default stream, as the DLPack spec says). The capsule must be kept
    alive until the run is queued. It is left unconsumed (still named "dltensor"): the spec
    has the producer's capsule destructor call the deleter for a capsule it still owns, so
    nothing leaks and the memory is never freed twice; a consumer renames it "used_dltensor"
    only when it keeps the tensor beyond the capsule, which run_device does not (the caller
    keeps its tensor alive while the stream runs, as with __cuda_array_interface__).
    """
    device = obj.__dlpack_device__()
    device_type, device_index = int(device[0]), int(device[1])
    if device_type != KDL_CUDA:
        raise TypeError(f"{where}: the {what} is a DLPack tensor on "
                        f"{device_type_name(device_type)}; run_device takes CUDA device memory "
                        "(kDLCUDA, 2) through __dlpack__ or __cuda_array_interface__; use run() "
                        "for host arrays")
    if device_index != device_id:
        raise ValueError(f"{where}: the {what} is on CUDA device {device_index} but the model "
                         f"runs on device {device_id}; move it there first")
    # A stream of 0 is ambiguous in the spec and not allowed; None means the legacy default.
    capsule = obj.__dlpack__(stream=stream if stream else None)
    if not _capsule_is_valid(capsule, CAPSULE_NAME):
        raise TypeError(f"{where}: the {what}'s __dlpack__() did not return a PyCapsule named "
                        "'dltensor' (already consumed?)")
    managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, CAPSULE_NAME))
    tensor = managed.dl_tensor
    if (tensor.device.device_type, tensor.device.device_id) != (device_type, device_index):
        raise ValueError(f"{where}: the {what}'s DLTensor is on "
                         f"{device_type_name(tensor.device.device_type)} device "
                         f"{tensor.device.device_id}, but __dlpack_device__() said "
                         f"{device_type_name(device_type)} device {device_index}")
    dtype = tensor.dtype
    if (dtype.code, dtype.bits, dtype.lanes) != (KDL_FLOAT, 32, 1):
        raise TypeError(f"{where}: the {what} has DLPack dtype (code {dtype.code}, bits "
                        f"{dtype.bits}, lanes {dtype.lanes}); fusednn takes float32 (code 2 "
                        "kDLFloat, bits 32, lanes 1); convert with .float() / .astype('float32')")
    if tensor.ndim < 0:
        raise ValueError(f"{where}: the {what} has a negative ndim {tensor.ndim}")
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    if tensor.strides:
        # DLPack strides count elements, not bytes; a size-1 extent may have any stride.
        expected = 1
        for i in range(tensor.ndim - 1, -1, -1):
            if shape[i] > 1 and tensor.strides[i] != expected:
                strides = tuple(int(tensor.strides[j]) for j in range(tensor.ndim))
                raise ValueError(f"{where}: the {what} is not C-contiguous (shape {shape}, "
                                 f"strides {strides} in elements); make a contiguous copy")
            expected *= shape[i]
    if not tensor.data:
        raise ValueError(f"{where}: the {what}'s DLTensor has a NULL data pointer")
    pointer = int(tensor.data) + int(tensor.byte_offset)
    if pointer % 4:
        raise ValueError(f"{where}: the {what}'s data is not aligned to float32")
    return pointer, shape, capsule
