# SPDX-License-Identifier: Apache-2.0

"""Device arrays as (data pointer, shape, dtype name) for Context.run_device and bind_device.

Three ways in, tried in this order:

* a torch tensor is read through its own methods (``data_ptr()``, ``is_contiguous()``, ...):
  torch builds ``__cuda_array_interface__`` in Python, ~1.9 us a tensor on the GPU machine, more
  than half of a small model's whole run (docs/performance.md, twelfth session);
* ``__cuda_array_interface__`` (CuPy, Numba, and torch tensors of subclasses that override it);
* ``__dlpack__`` / ``__dlpack_device__``, whose consumed tensor the caller releases once the run
  is queued (_dlpack.ConsumedTensor).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Mapping, Optional, Tuple

from . import _dlpack

__all__ = ["ITEM_BYTES", "describe", "stream_pointer"]

ITEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}

# The __cuda_array_interface__ typestrs runs take. bfloat16 has none: such arrays come through
# DLPack (torch tensors through their own methods).
_DTYPE_BY_TYPESTR = {"<f4": "float32", "=f4": "float32", "<f2": "float16", "=f2": "float16"}

# (torch module, its dtype objects -> dtype names), made from the torch the caller imported.
_torch_dtypes: Tuple[Any, Dict[Any, str]] = (None, {})

Described = Tuple[int, Any, str, Optional[_dlpack.ConsumedTensor]]


def _torch_tensor_type() -> Any:
    """torch.Tensor if the caller has imported torch (fusednn never imports it), else None."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None)


def _torch_dtype_name(dtype: Any) -> Optional[str]:
    global _torch_dtypes
    torch = sys.modules["torch"]
    module, names = _torch_dtypes
    if module is not torch:
        names = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
        _torch_dtypes = (torch, names)
    return names.get(dtype)


def _torch_buffer(tensor: Any, where: str, what: str, writable: bool,
                  device_id: int) -> Described:
    """A torch tensor, checked as __cuda_array_interface__ would be, through its own methods;
    torch's RuntimeError for tensors without strided storage (sparse, nested) becomes a
    TypeError naming the argument."""
    try:
        return _strided_torch_buffer(tensor, where, what, writable, device_id)
    except RuntimeError as error:
        raise TypeError(f"{where}: the {what} is a torch tensor fusednn cannot read as one "
                        f"dense C-contiguous buffer ({error})") from error


def _strided_torch_buffer(tensor: Any, where: str, what: str, writable: bool,
                          device_id: int) -> Described:
    if not tensor.is_cuda:
        raise TypeError(f"{where}: the {what} is a torch tensor on {tensor.device}, not on a GPU; "
                        "use run() for host arrays")
    dtype = _torch_dtype_name(tensor.dtype)
    if dtype is None:
        raise TypeError(f"{where}: the {what} has dtype {tensor.dtype}; fusednn takes "
                        "torch.float32, torch.float16 or torch.bfloat16")
    if tensor.get_device() != device_id:
        raise ValueError(f"{where}: the {what} is on {tensor.device}, the model on "
                         f"cuda:{device_id}")
    if not tensor.is_contiguous():
        raise ValueError(f"{where}: the {what} is not C-contiguous; make a contiguous copy")
    if writable and tensor.requires_grad:
        raise ValueError(f"{where}: the {what} requires grad, and fusednn would write it behind "
                         "autograd's back; pass a tensor that does not (torch.empty(...))")
    pointer = tensor.data_ptr()
    if pointer % ITEM_BYTES[dtype]:
        raise ValueError(f"{where}: the {what}'s data is not aligned to {dtype}")
    return pointer, tensor.shape, dtype, None


def _cuda_array_interface(array: Any) -> Any:
    """The object's __cuda_array_interface__, or None; a producer that raises for what it cannot
    describe (torch: bfloat16, tensors that require grad) goes through DLPack if it can."""
    try:
        return getattr(array, "__cuda_array_interface__", None)
    except (TypeError, RuntimeError, KeyError):
        if _dlpack.has_dlpack(array):
            return None
        raise


def _interface_buffer(interface: Any, array: Any, where: str, what: str,
                      writable: bool) -> Described:
    """A C-contiguous float32 or float16 array in __cuda_array_interface__ form."""
    if not isinstance(interface, Mapping):
        raise TypeError(f"{where}: the {what} must be a device array exposing "
                        "__cuda_array_interface__ (a CUDA torch tensor, CuPy or Numba array), "
                        f"got {type(array).__name__}; use run() for host arrays")
    shape = tuple(int(d) for d in interface["shape"])
    dtype = _DTYPE_BY_TYPESTR.get(interface.get("typestr"))
    if dtype is None:
        raise TypeError(f"{where}: the {what} has typestr {interface.get('typestr')!r}; fusednn "
                        "takes float32 ('<f4') or float16 ('<f2'), and bfloat16 through "
                        "__dlpack__")
    pointer, read_only = interface["data"]
    if pointer and pointer % ITEM_BYTES[dtype]:
        raise ValueError(f"{where}: the {what}'s data is not aligned to {dtype}")
    strides = interface.get("strides")
    if strides is not None:
        contiguous = [ITEM_BYTES[dtype]] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            contiguous[i] = contiguous[i + 1] * shape[i + 1]
        if any(extent > 1 and stride != want
               for extent, stride, want in zip(shape, strides, contiguous)):
            raise ValueError(f"{where}: the {what} is not C-contiguous; make a contiguous copy")
    if interface.get("mask") is not None:
        raise ValueError(f"{where}: masked arrays are not supported")
    if writable and read_only:
        raise ValueError(f"{where}: the {what} is read-only")
    return pointer, shape, dtype, None


def describe(array: Any, where: str, what: str, writable: bool, stream: Optional[int],
             device_id: int) -> Described:
    """(data pointer, shape, dtype name, consumed DLPack tensor or None) of a device array.

    The caller must release() a consumed tensor once the run is queued or refused.
    """
    tensor_type = _torch_tensor_type()
    if tensor_type is not None and type(array) is tensor_type:  # subclasses may override
        return _torch_buffer(array, where, what, writable, device_id)
    interface = _cuda_array_interface(array)
    if interface is None and _dlpack.has_dlpack(array):
        return _dlpack.device_buffer(array, stream, device_id, where, what, writable)
    return _interface_buffer(interface, array, where, what, writable)


def stream_pointer(stream: Any) -> Optional[int]:
    """The cudaStream_t of an int or of a torch / CuPy stream object; None for the context's."""
    if stream is None or isinstance(stream, int):
        return stream or None
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value or None
    raise TypeError(f"stream must be None, an int cudaStream_t or a torch / CuPy stream, got "
                    f"{type(stream).__name__}")
