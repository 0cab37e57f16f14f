# SPDX-License-Identifier: Apache-2.0

"""Consuming a DLPack capsule (the ``__dlpack__`` protocol) with ctypes, for Context.run_device.

Both forms of the protocol are read (dlpack.h, and the array API's ``__dlpack__``):

* versioned: ``__dlpack__(stream=..., max_version=(1, 0))`` returns a PyCapsule named
  "dltensor_versioned" over a DLManagedTensorVersioned (version, manager_ctx, deleter, flags,
  then the DLTensor);
* unversioned: a producer that does not take ``max_version`` raises TypeError and is called again
  as ``__dlpack__(stream=...)``; it returns a capsule named "dltensor" over a DLManagedTensor (the
  DLTensor, manager_ctx, deleter). A producer may also answer the versioned call with this form.

Consuming a capsule renames it "used_dltensor_versioned" / "used_dltensor", so the producer's
capsule destructor leaves the tensor alone, and makes the consumer responsible for the tensor's
deleter: :class:`ConsumedTensor` calls it exactly once, when the run is queued or when a check
refuses the tensor.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

__all__ = ["ConsumedTensor", "DLDataType", "DLDevice", "DLManagedTensor",
           "DLManagedTensorVersioned", "DLPackVersion", "DLTensor", "KDL_CUDA", "device_buffer"]

KDL_CPU = 1
KDL_CUDA = 2
KDL_FLOAT = 2
KDL_BFLOAT = 4

# DLPack dtypes (code, bits, lanes) runs take, by fdnn dtype name.
DTYPE_BY_DLPACK = {(KDL_FLOAT, 32, 1): "float32", (KDL_FLOAT, 16, 1): "float16",
                   (KDL_BFLOAT, 16, 1): "bfloat16"}

# Device type codes of dlpack.h, for messages.
_DEVICE_TYPE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan",
                      8: "kDLMetal", 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev",
                      13: "kDLCUDAManaged", 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon"}

# Capsule names. PyCapsule_SetName keeps the pointer it is given, so these module-level bytes
# objects (alive as long as the module) are what every renamed capsule points to.
CAPSULE_NAME = b"dltensor"
USED_CAPSULE_NAME = b"used_dltensor"
VERSIONED_CAPSULE_NAME = b"dltensor_versioned"
USED_VERSIONED_CAPSULE_NAME = b"used_dltensor_versioned"

# The newest DLManagedTensorVersioned layout this module reads; a capsule of another major
# version has another layout past its flags and is refused (after its deleter is called).
MAX_VERSION = (1, 0)
FLAG_READ_ONLY = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
FLAG_IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED


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


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_type_name(device_type: int) -> str:
    return f"{_DEVICE_TYPE_NAMES.get(device_type, 'unknown')} (device type {device_type})"


def has_dlpack(obj: Any) -> bool:
    return callable(getattr(obj, "__dlpack__", None)) and \
        callable(getattr(obj, "__dlpack_device__", None))


class ConsumedTensor:
    """A managed tensor taken out of its capsule; :meth:`release` calls its deleter once.

    Attributes:
        versioned: Whether it is a DLManagedTensorVersioned (else a DLManagedTensor).
        tensor: Its DLTensor, valid until :meth:`release`.
        flags: The versioned form's flags (0 for the unversioned form).
    """

    def __init__(self, address: int, versioned: bool) -> None:
        self._address: Optional[int] = address
        self.versioned = versioned
        self.flags = 0
        self.tensor: Optional[DLTensor] = None

    def _managed_type(self) -> Any:
        return DLManagedTensorVersioned if self.versioned else DLManagedTensor

    def release(self) -> None:
        """Calls the producer's deleter (when it gave one); later calls do nothing."""
        address, self._address = self._address, None
        self.tensor = None
        if address is None:
            return
        managed_type = self._managed_type()
        deleter = managed_type.from_address(address).deleter
        if deleter:
            deleter(ctypes.cast(address, ctypes.POINTER(managed_type)))

    def __del__(self) -> None:
        # A safety net: every path of device_buffer / run_device releases explicitly.
        try:
            self.release()
        except Exception:
            pass


def _export(obj: Any, stream: Optional[int]) -> Any:
    """The capsule of ``obj.__dlpack__``: the versioned call first, the unversioned on TypeError."""
    try:
        return obj.__dlpack__(stream=stream, max_version=MAX_VERSION)
    except TypeError:
        # A producer from before the versioned protocol takes no max_version keyword.
        return obj.__dlpack__(stream=stream)


def _consume(capsule: Any, where: str, what: str) -> ConsumedTensor:
    """Takes the tensor out of its capsule, renaming the capsule "used_..." (the protocol)."""
    if _capsule_is_valid(capsule, VERSIONED_CAPSULE_NAME):
        address = _capsule_get_pointer(capsule, VERSIONED_CAPSULE_NAME)
        if _capsule_set_name(capsule, USED_VERSIONED_CAPSULE_NAME) != 0:
            raise RuntimeError(f"{where}: could not rename the {what}'s DLPack capsule")
        consumed = ConsumedTensor(address, versioned=True)
        # The layout up to the flags is the same in every major version; past them it is not.
        version = DLPackVersion.from_address(address)
        if version.major != MAX_VERSION[0]:
            consumed.release()
            raise TypeError(f"{where}: the {what}'s DLPack capsule is version {version.major}."
                            f"{version.minor}; fusednn reads version {MAX_VERSION[0]}.x (it asked "
                            f"for max_version={MAX_VERSION})")
        managed = DLManagedTensorVersioned.from_address(address)
        consumed.flags = int(managed.flags)
        consumed.tensor = managed.dl_tensor
        return consumed
    if _capsule_is_valid(capsule, CAPSULE_NAME):
        address = _capsule_get_pointer(capsule, CAPSULE_NAME)
        if _capsule_set_name(capsule, USED_CAPSULE_NAME) != 0:
            raise RuntimeError(f"{where}: could not rename the {what}'s DLPack capsule")
        consumed = ConsumedTensor(address, versioned=False)
        consumed.tensor = DLManagedTensor.from_address(address).dl_tensor
        return consumed
    raise TypeError(f"{where}: the {what}'s __dlpack__() did not return a PyCapsule named "
                    "'dltensor_versioned' or 'dltensor' (already consumed?)")


def _check_tensor(consumed: ConsumedTensor, device_type: int, device_index: int, writable: bool,
                  where: str, what: str) -> Tuple[int, Tuple[int, ...], str]:
    """(data pointer, shape, dtype name) of a C-contiguous float32, float16 or bfloat16 tensor;
    raises on anything else."""
    tensor = consumed.tensor
    assert tensor is not None
    if writable and consumed.flags & FLAG_READ_ONLY:
        raise ValueError(f"{where}: the {what} is read-only (its DLPack producer set "
                         "DLPACK_FLAG_BITMASK_READ_ONLY); pass a writable tensor")
    if writable and consumed.flags & FLAG_IS_COPIED:
        raise ValueError(f"{where}: the {what} is a copy its DLPack producer made "
                         "(DLPACK_FLAG_BITMASK_IS_COPIED), so results written there would be "
                         "lost; pass the tensor itself")
    if (tensor.device.device_type, tensor.device.device_id) != (device_type, device_index):
        raise ValueError(f"{where}: the {what}'s DLTensor is on "
                         f"{device_type_name(tensor.device.device_type)} device "
                         f"{tensor.device.device_id}, but __dlpack_device__() said "
                         f"{device_type_name(device_type)} device {device_index}")
    dtype = tensor.dtype
    name = DTYPE_BY_DLPACK.get((dtype.code, dtype.bits, dtype.lanes))
    if name is None:
        raise TypeError(f"{where}: the {what} has DLPack dtype (code {dtype.code}, bits "
                        f"{dtype.bits}, lanes {dtype.lanes}); fusednn takes float32 (code 2 "
                        "kDLFloat, bits 32), float16 (code 2, bits 16) or bfloat16 (code 4 "
                        "kDLBfloat, bits 16), lanes 1; convert with .float() / "
                        ".astype('float32')")
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
    if pointer % (dtype.bits // 8):
        raise ValueError(f"{where}: the {what}'s data is not aligned to {name}")
    return pointer, shape, name


def device_buffer(obj: Any, stream: Optional[int], device_id: int, where: str, what: str,
                  writable: bool) -> Tuple[int, Tuple[int, ...], str, ConsumedTensor]:
    """(data pointer, shape, dtype name, consumed tensor) of a C-contiguous float32, float16 or
    bfloat16 CUDA tensor from DLPack.

    `stream` is the cudaStream_t the run is queued on, handed to the producer so that it orders
    its pending work before it (None when the run uses the context's own stream: the producer
    then assumes the legacy default stream, as the DLPack spec says). `writable`: the tensor is
    an output, so one its producer flags read-only (or copied) is refused.

    The caller must call ``release()`` on the returned tensor once the run is queued (the
    pointer stays valid until then); on any error raised here it has already been released.
    As with __cuda_array_interface__, the caller keeps its own tensor alive while the stream
    still uses it: the deleter only drops the producer's export.
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
    capsule = _export(obj, stream if stream else None)
    consumed = _consume(capsule, where, what)
    try:
        pointer, shape, name = _check_tensor(consumed, device_type, device_index, writable, where,
                                             what)
    except BaseException:
        consumed.release()
        raise
    return pointer, shape, name, consumed
