# SPDX-License-Identifier: Apache-2.0

"""ctypes declarations of the fusednn C API (include/fusednn/fusednn.h) and library lookup.

Every function of the header is declared here with its argument and result types; every function
that returns ``fdnn_status`` gets an ``errcheck`` that raises the matching
:class:`~fusednn.FusednnError` subclass with the calling thread's message.

The library is looked up, on first use, in this order:

1. the path in the environment variable ``FUSEDNN_LIBRARY``, an override (a development build);
2. the copy bundled inside the package, ``fusednn/lib/libfusednn.so*``, which
   ``pip install ./bindings/python`` builds and installs;
3. the system loader (``LD_LIBRARY_PATH``, the ldconfig cache, ``ctypes.util.find_library``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ._errors import LibraryNotFoundError, error_for_status

ENV_LIBRARY = "FUSEDNN_LIBRARY"
"""Environment variable holding the path of the library to load."""

# The C API this binding is written against: the library must have this major version and at
# least this minor version (FDNN_VERSION_MAJOR / FDNN_VERSION_MINOR in fusednn.h).
API_VERSION_MAJOR = 0
API_VERSION_MINOR = 4

MAX_RANK = 8  # FDNN_MAX_RANK

DTYPE_FLOAT32 = 0  # fdnn_dtype
DTYPE_FLOAT16 = 1
DTYPE_BFLOAT16 = 2

DEVICE_CPU = 0  # fdnn_device
DEVICE_CUDA = 1
DEVICE_AUTO = 2

PRECISION_FP32 = 0  # fdnn_precision
PRECISION_TF32 = 1
PRECISION_FP16 = 2
PRECISION_BF16 = 3

HOST_IO_AUTO = 0  # fdnn_host_io
HOST_IO_STAGED = 1
HOST_IO_MAPPED = 2

# C enums are passed as int on every ABI fusednn supports.
c_status = ctypes.c_int
c_dtype = ctypes.c_int
c_device = ctypes.c_int
c_precision = ctypes.c_int
c_host_io = ctypes.c_int
c_explain_format = ctypes.c_int
EXPLAIN_JSON, EXPLAIN_TEXT = 0, 1  # fdnn_explain_format


class _OpaqueModel(ctypes.Structure):
    """struct fdnn_model (opaque)."""


class _OpaqueContext(ctypes.Structure):
    """struct fdnn_context (opaque)."""


ModelHandle = ctypes.POINTER(_OpaqueModel)
"""``fdnn_model*``; a distinct type, so a context cannot be passed where a model is expected."""

ContextHandle = ctypes.POINTER(_OpaqueContext)
"""``fdnn_context*``."""


class ModelOptions(ctypes.Structure):
    """``fdnn_model_options``."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("max_batch", ctypes.c_int64),
        ("device", c_device),
        ("device_id", ctypes.c_int32),
        ("cpu_threads", ctypes.c_int32),
        ("cuda_graphs", ctypes.c_int32),
        ("precision", c_precision),
        ("max_workspace_bytes", ctypes.c_uint64),
        ("max_weight_bytes", ctypes.c_uint64),
        ("host_io", c_host_io),
    ]


class Shape(ctypes.Structure):
    """``fdnn_shape``."""

    _fields_ = [("rank", ctypes.c_int32), ("dims", ctypes.c_int64 * MAX_RANK)]

    def to_tuple(self) -> Tuple[int, ...]:
        if not 0 <= self.rank <= MAX_RANK:
            raise RuntimeError(f"fusednn returned a shape of rank {self.rank}")
        return tuple(int(self.dims[i]) for i in range(self.rank))


class MemoryInfoStruct(ctypes.Structure):
    """``fdnn_memory_info``."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("parameter_count", ctypes.c_int64),
        ("weight_bytes", ctypes.c_size_t),
        ("context_bytes", ctypes.c_size_t),
        ("flops_per_sample", ctypes.c_double),
        ("bytes_per_sample", ctypes.c_double),
    ]


class LayerInfoStruct(ctypes.Structure):
    """``fdnn_layer_info``."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char_p),
        ("type", ctypes.c_char_p),
        ("output_shape", Shape),
        ("parameter_count", ctypes.c_int64),
    ]


# Host float buffers: numpy checks dtype, C order and (for outputs) writability in from_param.
FloatInput = np.ctypeslib.ndpointer(dtype=np.float32, flags="C_CONTIGUOUS")
FloatOutput = np.ctypeslib.ndpointer(dtype=np.float32, flags=("C_CONTIGUOUS", "WRITEABLE"))


def _decode(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""


class Library:
    """A loaded libfusednn with every C function declared.

    Attributes:
        path: What was loaded (a file path, or the name the system loader resolved).
        cdll: The ``ctypes.CDLL``; its functions raise FusednnError subclasses on failure.
    """

    def __init__(self, cdll: ctypes.CDLL, path: str) -> None:
        self.path = path
        self.cdll = cdll
        # The version first: an older library lacks the functions added since, which
        # _declare() would otherwise trip over with a bare AttributeError.
        cdll.fdnn_version.argtypes, cdll.fdnn_version.restype = [], ctypes.c_uint32
        cdll.fdnn_version_string.argtypes, cdll.fdnn_version_string.restype = [], ctypes.c_char_p
        self.version_number = int(cdll.fdnn_version())
        self.version = _decode(cdll.fdnn_version_string())
        major, minor = self.version_number // 10000, (self.version_number // 100) % 100
        if major != API_VERSION_MAJOR or minor < API_VERSION_MINOR:
            raise LibraryNotFoundError(
                f"{path} is fusednn {self.version}, but this binding needs "
                f"{API_VERSION_MAJOR}.{API_VERSION_MINOR} or a later {API_VERSION_MAJOR}.x; point "
                f"{ENV_LIBRARY} at a matching libfusednn.so")
        self._declare()

    def last_error_message(self) -> str:
        """The calling thread's ``fdnn_last_error_message()``."""
        return _decode(self.cdll.fdnn_last_error_message())

    def _check_status(self, result: int, func: Any, args: Tuple[Any, ...]) -> int:
        if result != 0:
            raise error_for_status(result, self.last_error_message())
        return result

    def raise_for_status(self, status: int) -> None:
        """Raises the FusednnError subclass for a failed status (what errcheck does)."""
        if status != 0:
            raise error_for_status(status, self.last_error_message())

    def _declare(self) -> None:
        lib = self.cdll
        size_t, i32, i64 = ctypes.c_size_t, ctypes.c_int32, ctypes.c_int64
        P = ctypes.POINTER

        def fallible(name: str, *argtypes: Any) -> None:
            function = getattr(lib, name)
            function.argtypes = list(argtypes)
            function.restype = c_status
            function.errcheck = self._check_status

        def plain(name: str, restype: Any, *argtypes: Any) -> None:
            function = getattr(lib, name)
            function.argtypes = list(argtypes)
            function.restype = restype

        # Library
        plain("fdnn_version", ctypes.c_uint32)
        plain("fdnn_version_string", ctypes.c_char_p)
        plain("fdnn_status_string", ctypes.c_char_p, c_status)
        plain("fdnn_last_error_message", ctypes.c_char_p)
        fallible("fdnn_cuda_device_count", P(i32))
        # Models
        fallible("fdnn_model_options_init", P(ModelOptions), size_t)
        fallible("fdnn_model_create_from_file", ctypes.c_char_p, P(ModelOptions), P(ModelHandle))
        fallible("fdnn_model_create_from_spec", ctypes.c_char_p, size_t, P(ModelOptions),
                 P(ModelHandle))
        fallible("fdnn_model_create_from_memory", ctypes.c_char_p, size_t, P(ModelOptions),
                 P(ModelHandle))
        plain("fdnn_model_destroy", None, ModelHandle)
        fallible("fdnn_model_load_weights", ModelHandle, ctypes.c_char_p)
        fallible("fdnn_model_set_weight", ModelHandle, ctypes.c_char_p, c_dtype, ctypes.c_void_p,
                 P(i64), i32)
        fallible("fdnn_model_validate", ModelHandle)
        fallible("fdnn_model_input_shape", ModelHandle, P(Shape))
        fallible("fdnn_model_output_shape", ModelHandle, P(Shape))
        fallible("fdnn_model_max_batch", ModelHandle, P(i64))
        fallible("fdnn_model_device", ModelHandle, P(c_device))
        fallible("fdnn_model_precision", ModelHandle, P(c_precision))
        fallible("fdnn_model_memory_info", ModelHandle, P(MemoryInfoStruct))
        fallible("fdnn_model_layer_count", ModelHandle, P(i32))
        fallible("fdnn_model_layer_info", ModelHandle, i32, P(LayerInfoStruct))
        fallible("fdnn_model_explain", ModelHandle, i64, c_explain_format, ctypes.c_char_p, size_t,
                 P(size_t))
        fallible("fdnn_model_run", ModelHandle, i64, FloatInput, size_t, FloatOutput, size_t)
        fallible("fdnn_model_run_typed", ModelHandle, i64, ctypes.c_void_p, c_dtype, size_t,
                 ctypes.c_void_p, c_dtype, size_t)
        # Execution contexts
        fallible("fdnn_context_create", ModelHandle, P(ContextHandle))
        plain("fdnn_context_destroy", None, ContextHandle)
        fallible("fdnn_context_run", ContextHandle, i64, FloatInput, size_t, FloatOutput, size_t)
        fallible("fdnn_context_host_io", ContextHandle, P(c_host_io))
        fallible("fdnn_context_run_device", ContextHandle, i64, ctypes.c_void_p, size_t,
                 ctypes.c_void_p, size_t, ctypes.c_void_p)
        fallible("fdnn_context_run_typed", ContextHandle, i64, ctypes.c_void_p, c_dtype, size_t,
                 ctypes.c_void_p, c_dtype, size_t)
        fallible("fdnn_context_run_device_typed", ContextHandle, i64, ctypes.c_void_p, c_dtype,
                 size_t, ctypes.c_void_p, c_dtype, size_t, ctypes.c_void_p)

        # The runs once more, for the binding's run methods, which check the arrays themselves
        # first: addresses in, the status out (raise_for_status). numpy's ndpointer checks and
        # the errcheck call cost ~5 us a call, more than a small model's whole run.
        # cdll[name] makes a new function object, so the declarations above keep their checks.
        def unchecked(name: str, *argtypes: Any) -> Any:
            function = lib[name]
            function.argtypes = list(argtypes)
            function.restype = c_status
            return function

        address = ctypes.c_void_p
        self.model_run_unchecked = unchecked("fdnn_model_run", ModelHandle, i64, address, size_t,
                                             address, size_t)
        self.context_run_unchecked = unchecked("fdnn_context_run", ContextHandle, i64, address,
                                               size_t, address, size_t)
        self.context_run_device_unchecked = unchecked(
            "fdnn_context_run_device", ContextHandle, i64, address, size_t, address, size_t,
            address)
        self.context_run_device_typed_unchecked = unchecked(
            "fdnn_context_run_device_typed", ContextHandle, i64, address, c_dtype, size_t,
            address, c_dtype, size_t, address)


def _shared_library_names() -> List[str]:
    if sys.platform == "darwin":
        return ["libfusednn.dylib", f"libfusednn.{API_VERSION_MAJOR}.dylib"]
    if sys.platform == "win32":
        return ["fusednn.dll"]
    return ["libfusednn.so", f"libfusednn.so.{API_VERSION_MAJOR}"]


def _bundled_candidates() -> List[Path]:
    folder = Path(__file__).resolve().parent / "lib"
    if not folder.is_dir():
        return []
    found = [path for pattern in ("libfusednn.so*", "libfusednn*.dylib", "fusednn.dll")
             for path in folder.glob(pattern) if path.is_file()]
    return sorted(found, key=lambda path: (len(path.name), path.name))


def _open(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def _load() -> Library:
    tried: List[str] = []

    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        # An explicit choice is never silently replaced by another library.
        try:
            return Library(_open(explicit), explicit)
        except OSError as exc:
            if isinstance(exc, LibraryNotFoundError):
                raise
            raise LibraryNotFoundError(
                f"{ENV_LIBRARY}={explicit} could not be loaded: {exc}") from exc

    for candidate in _bundled_candidates():
        try:
            return Library(_open(str(candidate)), str(candidate))
        except LibraryNotFoundError:
            raise
        except OSError as exc:
            tried.append(f"{candidate} ({exc})")

    system_names = _shared_library_names()
    found = ctypes.util.find_library("fusednn")
    if found:
        system_names.append(found)
    for name in system_names:
        try:
            return Library(_open(name), name)
        except LibraryNotFoundError:
            raise
        except OSError:
            tried.append(name)

    raise LibraryNotFoundError(
        "libfusednn was not found: this fusednn package has no library bundled in fusednn/lib. "
        "Install it from the repository with `pip install ./bindings/python`, which builds the "
        f"library and bundles it; or set the environment variable {ENV_LIBRARY} to the path of "
        "a libfusednn.so (for a CMake build: `find <build-dir> -name 'libfusednn.so*'`), or add "
        "its folder to LD_LIBRARY_PATH. Tried: " + (", ".join(tried) or "nothing"))


_library: Optional[Library] = None
_library_lock = threading.Lock()


def library() -> Library:
    """The loaded library, loading it on first use (thread-safe).

    Raises:
        LibraryNotFoundError: no usable libfusednn was found; the message says what to set.
    """
    global _library
    if _library is None:
        with _library_lock:
            if _library is None:
                _library = _load()
    return _library


def call(name: str) -> Callable[..., Any]:
    """The declared C function ``name`` of the loaded library."""
    return getattr(library().cdll, name)
