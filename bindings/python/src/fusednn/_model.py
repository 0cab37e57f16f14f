# SPDX-License-Identifier: Apache-2.0

"""Model and Context: Python objects over fdnn_model and fdnn_context."""

from __future__ import annotations

import ctypes
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type, Union

import numpy as np

from . import _device_buffers, _native
from ._bound_run import BoundRun
from ._closeable import Closeable
from ._native import ContextHandle, LayerInfoStruct, MemoryInfoStruct, ModelHandle, Shape

__all__ = ["BoundRun", "Context", "LayerInfo", "MemoryInfo", "Model", "cuda_device_count"]

PathLike = Union[str, "os.PathLike[str]"]

_DEVICE_BY_NAME = {"cpu": _native.DEVICE_CPU, "cuda": _native.DEVICE_CUDA,
                   "auto": _native.DEVICE_AUTO}
_DEVICE_NAMES = {value: name for name, value in _DEVICE_BY_NAME.items()}

_PRECISION_BY_NAME = {"fp32": _native.PRECISION_FP32, "tf32": _native.PRECISION_TF32,
                      "fp16": _native.PRECISION_FP16, "bf16": _native.PRECISION_BF16}
_PRECISION_NAMES = {value: name for name, value in _PRECISION_BY_NAME.items()}

_HOST_IO_BY_NAME = {"auto": _native.HOST_IO_AUTO, "staged": _native.HOST_IO_STAGED,
                    "mapped": _native.HOST_IO_MAPPED}
_HOST_IO_NAMES = {value: name for name, value in _HOST_IO_BY_NAME.items()}

# The element types runs take (fdnn_dtype). numpy has no bfloat16: bfloat16 arrays are uint16
# arrays holding the bits (with dtype="bfloat16"), or ml_dtypes' bfloat16 arrays.
_DTYPE_BY_NAME = {"float32": _native.DTYPE_FLOAT32, "float16": _native.DTYPE_FLOAT16,
                  "bfloat16": _native.DTYPE_BFLOAT16}
# Host arrays each dtype name accepts, besides an ml_dtypes bfloat16 array for "bfloat16".
_HOST_DTYPES = {"float32": (np.dtype(np.float32),),
                "float16": (np.dtype(np.float16), np.dtype(np.uint16)),
                "bfloat16": (np.dtype(np.uint16),)}


@dataclass(frozen=True)
class MemoryInfo:
    """Memory a model uses (``fdnn_memory_info``).

    Attributes:
        parameter_count: Scalars in all weights as the spec declares them.
        weight_bytes: Bytes the backend holds for the (folded) weights.
        context_bytes: Scratch bytes each execution context allocates (for max_batch).
        flops_per_sample: Floating-point operations one sample costs (a multiply-add counts 2).
        bytes_per_sample: Bytes of activations one sample moves (float32, weights excluded).
    """

    parameter_count: int
    weight_bytes: int
    context_bytes: int
    flops_per_sample: float
    bytes_per_sample: float


@dataclass(frozen=True)
class LayerInfo:
    """One layer as written in the spec, before any folding (``fdnn_layer_info``).

    Attributes:
        name: The layer's name.
        type: The layer type as in the spec ("Linear").
        output_shape: Per-sample shape of the layer's output.
        parameter_count: Scalars in this layer's weights.
    """

    name: str
    type: str
    output_shape: Tuple[int, ...]
    parameter_count: int


def cuda_device_count() -> int:
    """Number of GPUs fusednn can use (0 for a CPU-only build or a machine without one)."""
    count = ctypes.c_int32(0)
    _native.call("fdnn_cuda_device_count")(ctypes.byref(count))
    return int(count.value)


def _path_bytes(path: PathLike) -> bytes:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a path (str or os.PathLike), got {type(path).__name__}")
    return os.fsencode(path)


def _options(max_batch: Optional[int], device: str, device_id: int, cpu_threads: Optional[int],
             cuda_graphs: Optional[bool], precision: str, max_workspace_bytes: Optional[int],
             max_weight_bytes: Optional[int], host_io: str = "auto") -> _native.ModelOptions:
    # The library writes no further than the size given: the fields this binding knows.
    options = _native.ModelOptions()
    _native.call("fdnn_model_options_init")(ctypes.byref(options),
                                            ctypes.sizeof(_native.ModelOptions))
    if max_batch is not None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive int, got {max_batch!r}")
        options.max_batch = max_batch
    if device not in _DEVICE_BY_NAME:
        raise ValueError(f"device must be one of {sorted(_DEVICE_BY_NAME)}, got {device!r}")
    options.device = _DEVICE_BY_NAME[device]
    if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
        raise ValueError(f"device_id must be a non-negative int, got {device_id!r}")
    options.device_id = device_id
    if cpu_threads is not None:
        if isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or cpu_threads < 0:
            raise ValueError("cpu_threads must be a non-negative int (0: one per hardware "
                             f"thread), got {cpu_threads!r}")
        options.cpu_threads = cpu_threads
    if cuda_graphs is not None:
        options.cuda_graphs = 1 if cuda_graphs else 0
    if not isinstance(precision, str) or precision not in _PRECISION_BY_NAME:
        raise ValueError(f"precision must be one of {sorted(_PRECISION_BY_NAME)}, got "
                         f"{precision!r}")
    options.precision = _PRECISION_BY_NAME[precision]
    for name, limit in (("max_workspace_bytes", max_workspace_bytes),
                        ("max_weight_bytes", max_weight_bytes)):
        if limit is None:
            continue
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit < 2**64:
            raise ValueError(f"{name} must be a non-negative int (0: no limit), got {limit!r}")
        setattr(options, name, limit)
    if not isinstance(host_io, str) or host_io not in _HOST_IO_BY_NAME:
        raise ValueError(f"host_io must be one of {sorted(_HOST_IO_BY_NAME)}, got {host_io!r}")
    options.host_io = _HOST_IO_BY_NAME[host_io]
    return options


def _is_ml_bfloat16(dtype: np.dtype) -> bool:
    return dtype.name == "bfloat16" and dtype.itemsize == 2


def _dtype_name(dtype: Any, argument: str, where: str) -> Optional[str]:
    """"float32", "float16" or "bfloat16" for a name or a numpy dtype; None stays None."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(f"{where}: {argument} must be 'float32', 'float16' or 'bfloat16', "
                            f"got {dtype!r}") from None
    if name not in _DTYPE_BY_NAME:
        raise ValueError(f"{where}: {argument} is {dtype!r}; use 'float32', 'float16' or "
                         "'bfloat16'")
    return name


def _host_input_dtype(x: np.ndarray, dtype: Optional[str], where: str) -> str:
    """The fdnn dtype name of a host input: from `dtype` when given, else from the array's."""
    if dtype is None:
        if x.dtype == np.float32:
            return "float32"
        if x.dtype == np.float16:
            return "float16"
        if _is_ml_bfloat16(x.dtype):
            return "bfloat16"
        if x.dtype == np.uint16:
            raise TypeError(f"{where}: input dtype is uint16; pass dtype='bfloat16' (or "
                            "'float16') to say which 16-bit format its bits hold")
        raise TypeError(f"{where}: input dtype is {x.dtype}, fusednn takes float32, float16 or "
                        "bfloat16 (uint16 bits with dtype='bfloat16'); convert with "
                        "x.astype(np.float32)")
    if x.dtype in _HOST_DTYPES[dtype] or (dtype == "bfloat16" and _is_ml_bfloat16(x.dtype)):
        return dtype
    accepted = " or ".join(str(d) for d in _HOST_DTYPES[dtype])
    raise TypeError(f"{where}: input dtype is {x.dtype} but dtype={dtype!r} takes {accepted} "
                    "arrays (native byte order)")


def _check_input(x: Any, input_shape: Tuple[int, ...], max_batch: int, where: str,
                 dtype: Optional[str] = None) -> Tuple[int, bool, str]:
    """Validate a run's input before any native call; returns (batch, single sample, dtype)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{where}: expected a numpy.ndarray, got {type(x).__name__}; convert "
                        "with np.asarray(x, dtype=np.float32)")
    name = _host_input_dtype(x, dtype, where)
    if not x.flags.c_contiguous:
        raise ValueError(f"{where}: input is not C-contiguous (a transposed or strided view?); "
                         "pass np.ascontiguousarray(x)")
    if not x.flags.aligned:
        raise ValueError(f"{where}: input is not aligned to {name}; pass a copy (x.copy())")
    if x.shape == input_shape:
        return 1, True, name
    if x.ndim != len(input_shape) + 1 or x.shape[1:] != input_shape:
        raise ValueError(f"{where}: input shape {x.shape} is neither (batch, *{input_shape}) nor "
                         f"a single sample {input_shape}")
    batch = x.shape[0]
    if batch < 1:
        raise ValueError(f"{where}: the batch is empty; pass at least one sample")
    if batch > max_batch:
        raise ValueError(f"{where}: batch {batch} exceeds the model's max_batch {max_batch}; "
                         "split the input or create the model with a larger max_batch")
    return batch, False, name


def _run(library: _native.Library, function: Callable[..., int],
         typed_function: Callable[..., int], handle: Any, x: np.ndarray,
         input_shape: Tuple[int, ...], output_shape: Tuple[int, ...], max_batch: int, where: str,
         dtype: Any, out_dtype: Any) -> np.ndarray:
    """A host run. `function` is the unchecked float32 run (Library.*_run_unchecked): the input
    is checked here and the output made here, so its addresses go in as they are."""
    batch, single, in_name = _check_input(x, input_shape, max_batch, where,
                                          _dtype_name(dtype, "dtype", where))
    out_name = _dtype_name(out_dtype, "out_dtype", where) or in_name
    if in_name == out_name == "float32":  # the float32 call, as before the typed ones existed
        output = np.empty((batch,) + output_shape, dtype=np.float32)
        status = function(handle, batch, x.ctypes.data, x.size, output.ctypes.data, output.size)
        if status != 0:
            library.raise_for_status(status)
    else:
        if out_name == "bfloat16":  # the input's bfloat16 dtype if it has one, else the bits
            numpy_dtype = x.dtype if _is_ml_bfloat16(x.dtype) else np.dtype(np.uint16)
        else:
            numpy_dtype = np.dtype(np.float32 if out_name == "float32" else np.float16)
        output = np.empty((batch,) + output_shape, dtype=numpy_dtype)
        typed_function(handle, batch, x.ctypes.data, _DTYPE_BY_NAME[in_name], x.size,
                       output.ctypes.data, _DTYPE_BY_NAME[out_name], output.size)
    return output[0] if single else output



class Model(Closeable):
    """A network with its weights, ready to run on the CPU or a GPU (``fdnn_model``).

    Create one with :meth:`from_file` (a bundle, or a JSON spec whose weights follow) or
    :meth:`from_spec`. Use it as a context manager, or call :meth:`close`; a model that is only
    garbage-collected is closed then.

    Thread-safety (from the C API): once its weights are loaded, :meth:`run` may be called from
    many threads at once (ctypes releases the GIL during the call). Loading weights and
    :meth:`close` must not overlap any other call on the same model.
    """

    _handle: Optional[Any] = None  # set last in __init__, so __del__ is safe if it fails
    _device_id = 0  # the GPU ordinal asked for; from_file / from_spec set it

    def __init__(self, handle: Any) -> None:
        """Wrap a native handle; use :meth:`from_file` or :meth:`from_spec` instead."""
        library = _native.library()
        self._library = library
        self._destroy = library.cdll.fdnn_model_destroy
        self._run_function = library.model_run_unchecked
        self._run_typed_function = library.cdll.fdnn_model_run_typed
        try:
            self._input_shape = self._query_shape(handle, "fdnn_model_input_shape")
            self._output_shape = self._query_shape(handle, "fdnn_model_output_shape")
            max_batch = ctypes.c_int64(0)
            library.cdll.fdnn_model_max_batch(handle, ctypes.byref(max_batch))
            device = ctypes.c_int(0)
            library.cdll.fdnn_model_device(handle, ctypes.byref(device))
        except BaseException:
            self._destroy(handle)
            raise
        self._max_batch = int(max_batch.value)
        self._device = _DEVICE_NAMES.get(device.value, f"device {device.value}")
        self._handle = handle

    @staticmethod
    def _query_shape(handle: Any, function: str) -> Tuple[int, ...]:
        shape = Shape()
        _native.call(function)(handle, ctypes.byref(shape))
        return shape.to_tuple()

    # --- creation ------------------------------------------------------------------------------

    @classmethod
    def from_file(cls: Type["Model"], path: PathLike, *, max_batch: Optional[int] = None,
                  device: str = "cpu", device_id: int = 0, cpu_threads: Optional[int] = None,
                  cuda_graphs: Optional[bool] = None, precision: str = "fp32",
                  max_workspace_bytes: Optional[int] = None,
                  max_weight_bytes: Optional[int] = None, host_io: str = "auto") -> "Model":
        """Create a model from a bundle (spec and weights) or a JSON spec file.

        Args:
            path: A ``.safetensors`` bundle, or a JSON spec whose weights are then given with
                :meth:`load_weights` / :meth:`set_weight`.
            max_batch: Largest batch a run may use; scratch memory is sized for it. None keeps the
                library's default (1024).
            device: "cpu", "cuda", or "auto" (the GPU when one can be used, else the CPU).
            device_id: GPU ordinal for "cuda" and "auto".
            cpu_threads: Threads one CPU run may use; 0 picks one per hardware thread, 1 runs on
                the calling thread. None keeps the library's default (0).
            cuda_graphs: GPU only: capture each run into a CUDA graph per context and batch size
                and replay it (the lowest launch overhead). None keeps the library's default
                (on).
            precision: The least precise arithmetic the model may use: "fp32" (exact, the
                default), "tf32", "fp16" or "bf16". Inputs and outputs stay float32. A bound on
                the error (tf32 1e-3, fp16 and bf16 1e-2 relative to an fp32 run), never a
                promise of less accuracy: the CPU always computes in fp32. :attr:`precision`
                says what the model runs in; see docs/precision.md.
            max_workspace_bytes: The most scratch memory one execution context may take; a
                model needing more raises OutOfMemoryError naming the option when it is
                prepared (first run or context). 0: no limit. None keeps the library's default
                (64 GiB). Lower it for models from untrusted sources.
            max_weight_bytes: The most memory the model's weights may take (checked against the
                spec's declared weights at creation, before any is read). 0: no limit. None
                keeps the library's default (256 GiB).
            host_io: GPU only: how host-array runs move the input and output: "auto" (mapped on
                an integrated GPU such as a Jetson, staged copies on a discrete one), "staged"
                or "mapped" (the kernels read and write the host arrays in place, forced also on
                a discrete GPU). Ignored on the CPU. :attr:`Context.host_io` says which a
                context uses; see docs/jetson.md.

        Raises:
            FileError, ParseError, InvalidModelError, WeightMismatchError, UnsupportedError (the
            device cannot be used), OutOfMemoryError; ValueError for a bad option.
        """
        options = _options(max_batch, device, device_id, cpu_threads, cuda_graphs, precision,
                           max_workspace_bytes, max_weight_bytes, host_io)
        handle = ModelHandle()
        _native.call("fdnn_model_create_from_file")(_path_bytes(path), ctypes.byref(options),
                                                    ctypes.byref(handle))
        model = cls(handle)
        model._device_id = device_id
        return model

    @classmethod
    def from_bytes(cls: Type["Model"], data: Union[bytes, bytearray, memoryview], *,
                   max_batch: Optional[int] = None, device: str = "cpu", device_id: int = 0,
                   cpu_threads: Optional[int] = None, cuda_graphs: Optional[bool] = None,
                   precision: str = "fp32", max_workspace_bytes: Optional[int] = None,
                   max_weight_bytes: Optional[int] = None, host_io: str = "auto") -> "Model":
        """Create a model from a model file's bytes: a bundle (spec and weights) or a JSON spec.

        The same content as :meth:`from_file` takes, already in memory (e.g. embedded in a
        package). The library copies what it needs; ``data`` may change afterwards.

        Args:
            data: The file's bytes (any bytes-like object).
            max_batch, device, device_id, cpu_threads, cuda_graphs, precision,
                max_workspace_bytes, max_weight_bytes, host_io: As for :meth:`from_file`.

        Raises:
            ParseError (empty, truncated, neither format), InvalidModelError,
            WeightMismatchError, UnsupportedError, OutOfMemoryError; TypeError for data that is
            not bytes-like; ValueError for a bad option.
        """
        if isinstance(data, str) or not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes-like, got {type(data).__name__}")
        raw = bytes(data)
        options = _options(max_batch, device, device_id, cpu_threads, cuda_graphs, precision,
                           max_workspace_bytes, max_weight_bytes, host_io)
        return cls._created_from("fdnn_model_create_from_memory", raw, options, device_id)

    @classmethod
    def from_spec(cls: Type["Model"], spec: Union[str, bytes, Mapping[str, Any]], *,
                  max_batch: Optional[int] = None, device: str = "cpu", device_id: int = 0,
                  cpu_threads: Optional[int] = None, cuda_graphs: Optional[bool] = None,
                  precision: str = "fp32", max_workspace_bytes: Optional[int] = None,
                  max_weight_bytes: Optional[int] = None, host_io: str = "auto") -> "Model":
        """Create a model from a spec held in memory; its weights come next.

        Args:
            spec: The spec as JSON text (str or UTF-8 bytes) or as a dict.
            max_batch, device, device_id, cpu_threads, cuda_graphs, precision,
                max_workspace_bytes, max_weight_bytes, host_io: As for :meth:`from_file`.

        Raises:
            ParseError, InvalidModelError, UnsupportedError, OutOfMemoryError; TypeError for a
            spec of another type; ValueError for a bad option.
        """
        if isinstance(spec, Mapping):
            text = json.dumps(spec).encode("utf-8")
        elif isinstance(spec, str):
            text = spec.encode("utf-8")
        elif isinstance(spec, bytes):
            text = spec
        else:
            raise TypeError(f"spec must be JSON text or a dict, got {type(spec).__name__}")
        options = _options(max_batch, device, device_id, cpu_threads, cuda_graphs, precision,
                           max_workspace_bytes, max_weight_bytes, host_io)
        return cls._created_from("fdnn_model_create_from_spec", text, options, device_id)

    @classmethod
    def _created_from(cls: Type["Model"], function: str, data: bytes,
                      options: _native.ModelOptions, device_id: int) -> "Model":
        """A model from one of the create calls that take bytes (a file's, or a spec's text)."""
        handle = ModelHandle()
        _native.call(function)(data, len(data), ctypes.byref(options), ctypes.byref(handle))
        model = cls(handle)
        model._device_id = device_id
        return model

    # --- weights -------------------------------------------------------------------------------

    def load_weights(self, path: PathLike) -> None:
        """Load weights from a ``.safetensors`` file or a folder of ``<name>.bin`` / ``.txt``.

        Nothing is loaded when any tensor is wrong. Tensors the file lacks may come from later
        calls.

        Raises:
            FileError, ParseError, WeightMismatchError, InvalidStateError (the model has run:
            its weights are frozen).
        """
        _native.call("fdnn_model_load_weights")(self._live_handle(), _path_bytes(path))

    def set_weight(self, name: str, value: np.ndarray) -> None:
        """Set one weight tensor from an array (copied).

        Args:
            name: The tensor's state_dict name ("fc1.weight").
            value: Its values, shaped as the spec expects. float32, float16 and bfloat16
                (``ml_dtypes``) are passed as they are; other real floating types are converted
                to float32.

        Raises:
            WeightMismatchError (unknown name, wrong shape), InvalidStateError (weights frozen);
            TypeError for a non-float array; ValueError for too many dimensions.
        """
        handle = self._live_handle()
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        array = np.asarray(value)
        if array.dtype == np.float32:
            dtype = _native.DTYPE_FLOAT32
        elif array.dtype == np.float16:
            dtype = _native.DTYPE_FLOAT16
        elif array.dtype.name == "bfloat16":
            dtype = _native.DTYPE_BFLOAT16
        elif np.issubdtype(array.dtype, np.floating):
            array, dtype = array.astype(np.float32), _native.DTYPE_FLOAT32
        else:
            raise TypeError(f"weight '{name}' has dtype {array.dtype}; fusednn takes float32, "
                            "float16 or bfloat16")
        if array.ndim > _native.MAX_RANK:
            raise ValueError(f"weight '{name}' has {array.ndim} dimensions; at most "
                             f"{_native.MAX_RANK} are supported")
        array = np.ascontiguousarray(array)
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        _native.call("fdnn_model_set_weight")(
            handle, name.encode("utf-8"), dtype, array.ctypes.data_as(ctypes.c_void_p),
            shape, array.ndim)

    def validate(self) -> None:
        """Check that every weight is present and finite.

        Raises:
            WeightMismatchError naming missing tensors; NonFiniteWeightError naming each tensor
            with NaN or Inf and its first bad index.
        """
        _native.call("fdnn_model_validate")(self._live_handle())

    # --- description ---------------------------------------------------------------------------

    @property
    def input_shape(self) -> Tuple[int, ...]:
        """Per-sample input shape (without the batch)."""
        return self._input_shape

    @property
    def output_shape(self) -> Tuple[int, ...]:
        """Per-sample output shape (without the batch)."""
        return self._output_shape

    @property
    def max_batch(self) -> int:
        """The largest batch :meth:`run` accepts."""
        return self._max_batch

    @property
    def device(self) -> str:
        """Where the model runs: "cpu" or "cuda" ("auto" is resolved at creation)."""
        return self._device

    @property
    def precision(self) -> str:
        """The precision the model runs its matrix work in: "fp32", "tf32", "fp16" or "bf16".

        The one asked for at creation or a more precise one; always "fp32" on the CPU. For a
        GPU model that has not run yet, the first query sets up the backend (as
        :attr:`memory_info` does), so it may raise OutOfMemoryError or DeviceError.
        """
        value = ctypes.c_int(0)
        _native.call("fdnn_model_precision")(self._live_handle(), ctypes.byref(value))
        return _PRECISION_NAMES.get(value.value, f"precision {value.value}")

    @property
    def memory_info(self) -> MemoryInfo:
        """Parameter count, weight bytes and per-context scratch bytes."""
        info = MemoryInfoStruct()
        info.struct_size = ctypes.sizeof(MemoryInfoStruct)
        _native.call("fdnn_model_memory_info")(self._live_handle(), ctypes.byref(info))
        return MemoryInfo(int(info.parameter_count), int(info.weight_bytes),
                          int(info.context_bytes), float(info.flops_per_sample),
                          float(info.bytes_per_sample))

    @property
    def layers(self) -> List[LayerInfo]:
        """The layers as written in the spec, in order."""
        handle = self._live_handle()
        count = ctypes.c_int32(0)
        _native.call("fdnn_model_layer_count")(handle, ctypes.byref(count))
        layer_info = _native.call("fdnn_model_layer_info")
        layers = []
        for index in range(count.value):
            info = LayerInfoStruct()
            info.struct_size = ctypes.sizeof(LayerInfoStruct)
            layer_info(handle, index, ctypes.byref(info))
            layers.append(LayerInfo(_native._decode(info.name), _native._decode(info.type),
                                    info.output_shape.to_tuple(), int(info.parameter_count)))
        return layers

    def explain(self, batch: int = 1) -> Dict[str, Any]:
        """How a run of ``batch`` samples would go, step by step (``fdnn_model_explain``).

        Returns the parsed JSON document: the backend's batch-wide choices (``"backend"``), and
        under ``"steps"`` one entry per kernel the backend runs, with the spec layers it covers,
        the activations fused into it, the kernel form chosen at this batch and the reason, where
        its output lives, and its nominal FLOPs and bytes per sample and at this batch
        (docs/bindings.md, "Explaining the plan"). Works before the weights are loaded and
        freezes nothing. Raises InvalidArgumentError for a batch outside 1..max_batch.
        """
        return json.loads(self._explain(batch, _native.EXPLAIN_JSON))

    def explain_text(self, batch: int = 1) -> str:
        """The same as :meth:`explain`, as the table ``fusednn info MODEL --plan`` prints."""
        return self._explain(batch, _native.EXPLAIN_TEXT)

    def _explain(self, batch: int, form: int) -> str:
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)):
            raise TypeError(f"batch must be an int, not {type(batch).__name__}")
        handle = self._live_handle()
        function = _native.call("fdnn_model_explain")
        size = ctypes.c_size_t(0)
        function(handle, int(batch), form, None, 0, ctypes.byref(size))
        buffer = ctypes.create_string_buffer(size.value)
        function(handle, int(batch), form, buffer, size.value, ctypes.byref(size))
        return buffer.value.decode("utf-8", errors="replace")

    # --- running -------------------------------------------------------------------------------

    def run(self, x: np.ndarray, dtype: Any = None, out_dtype: Any = None) -> np.ndarray:
        """Run the model on a batch and return a new array (float32 for a float32 input).

        Args:
            x: C-contiguous, of shape ``(batch, *input_shape)`` with ``1 <= batch <=
                max_batch``, or a single sample of shape ``input_shape``: float32, float16, an
                ml_dtypes bfloat16 array, or uint16 holding bfloat16 (or float16) bits with
                ``dtype`` saying which.
            dtype: The input's element type, "float32", "float16" or "bfloat16" (or a numpy
                dtype); None (the default) takes it from ``x.dtype``.
            out_dtype: The output's element type, likewise; None (the default) is the input's.
                A float16 output is a float16 array; a bfloat16 output has the input's
                bfloat16 dtype when it has one, else it is a uint16 array of bfloat16 bits.

        A 16-bit input is widened to float32 exactly, the model runs in its precision, and a
        16-bit output is rounded to nearest even (``fdnn_model_run_typed``); float32 in and out
        is the plain float32 call (``fdnn_model_run``).

        Returns:
            ``(batch, *output_shape)``, or ``output_shape`` for a single sample.

        Raises:
            TypeError / ValueError for a wrong input, before any native call; InvalidStateError
            (weights missing), OutOfMemoryError, DeviceError from the library.
        """
        return _run(self._library, self._run_function, self._run_typed_function,
                    self._live_handle(), x, self._input_shape, self._output_shape,
                    self._max_batch, "Model.run", dtype, out_dtype)

    def create_context(self) -> "Context":
        """A new execution context for this model; see :class:`Context`."""
        return Context(self)

    # --- lifetime ------------------------------------------------------------------------------

    def _live_handle(self) -> Any:
        if self._handle is None:
            raise ValueError("the model is closed")
        return self._handle

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._handle is None

    def close(self) -> None:
        """Release the native model. Idempotent. Contexts created from it stay usable."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._destroy(handle)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"on {self._device}"
        return (f"<fusednn.Model {getattr(self, '_input_shape', '?')} -> "
                f"{getattr(self, '_output_shape', '?')} {state}, "
                f"max_batch={getattr(self, '_max_batch', '?')}>")


class Context(Closeable):
    """An execution context: the scratch memory (and, on a GPU, the stream) of one run in flight.

    :meth:`Model.run` borrows a context from the model's pool on every call; a Context of your
    own avoids that and allocates nothing per run. One context serves one thread at a time;
    create one per thread. It keeps the model's weights alive, so the Model may be closed first.
    Creating it freezes the model's weights.
    """

    _handle: Optional[Any] = None

    def __init__(self, model: Model) -> None:
        """Create a context for a model whose weights are all loaded.

        Raises:
            InvalidStateError (weights missing), OutOfMemoryError, DeviceError; ValueError for a
            closed model.
        """
        library = _native.library()
        self._library = library
        self._destroy = library.cdll.fdnn_context_destroy
        self._run_function = library.context_run_unchecked
        self._run_typed_function = library.cdll.fdnn_context_run_typed
        self._run_device_function = library.context_run_device_unchecked
        self._run_device_typed_function = library.context_run_device_typed_unchecked
        self._input_shape = model.input_shape
        self._output_shape = model.output_shape
        self._max_batch = model.max_batch
        self._device = model.device
        self._device_id = model._device_id
        handle = ContextHandle()
        library.cdll.fdnn_context_create(model._live_handle(), ctypes.byref(handle))
        self._handle = handle

    @property
    def input_shape(self) -> Tuple[int, ...]:
        """Per-sample input shape of the model."""
        return self._input_shape

    @property
    def output_shape(self) -> Tuple[int, ...]:
        """Per-sample output shape of the model."""
        return self._output_shape

    @property
    def max_batch(self) -> int:
        """The largest batch :meth:`run` accepts."""
        return self._max_batch

    @property
    def device(self) -> str:
        """Where the model runs: "cpu" or "cuda"."""
        return self._device

    @property
    def host_io(self) -> str:
        """How this context's host-array runs move the data on a GPU: "staged" or "mapped"
        (``fdnn_context_host_io``).

        Raises:
            UnsupportedError: the model runs on the CPU, which reads the arrays directly.
        """
        if self._handle is None:
            raise ValueError("the context is closed")
        value = _native.c_host_io(-1)
        _native.call("fdnn_context_host_io")(self._handle, ctypes.byref(value))
        return _HOST_IO_NAMES.get(value.value, f"host_io {value.value}")

    def run(self, x: np.ndarray, dtype: Any = None, out_dtype: Any = None) -> np.ndarray:
        """Run on a batch with this context; same contract as :meth:`Model.run`
        (``fdnn_context_run`` / ``fdnn_context_run_typed``).

        Not thread-safe for one context: use one context per thread.
        """
        if self._handle is None:
            raise ValueError("the context is closed")
        return _run(self._library, self._run_function, self._run_typed_function, self._handle,
                    x, self._input_shape, self._output_shape, self._max_batch, "Context.run",
                    dtype, out_dtype)

    def run_device(self, x: Any, out: Any, stream: Any = None) -> None:
        """Run on GPU buffers on a CUDA stream, without copies (``fdnn_context_run_device``).

        Args:
            x: The input in device memory: a CUDA torch tensor, any object with
                ``__cuda_array_interface__`` (a CuPy or Numba array) or, failing that,
                ``__dlpack__`` and ``__dlpack_device__`` on kDLCUDA; on the model's device,
                C-contiguous, shaped like the input of :meth:`run`; float32, float16
                (typestr ``"<f2"``, or DLPack kDLFloat 16 bits) or bfloat16 (torch.bfloat16,
                or DLPack kDLBfloat 16 bits), each element aligned to its size. A DLPack
                producer is handed ``stream`` so it orders its pending work before the run
                (with ``stream=None`` it is told the legacy default stream, which does not
                order the context's own non-blocking stream: pass the producer's stream when it
                has work in flight); torch tensors and ``__cuda_array_interface__`` arrays are
                not synchronised: queue their producer's work on ``stream``. The versioned
                DLPack protocol is asked for (``max_version=(1, 0)``) and the unversioned one
                used when the producer does not take it; the capsule is consumed (renamed
                "used_dltensor[_versioned]") and the tensor's deleter called once the run is
                queued. Nothing is copied: keep ``x`` alive until the stream has used it.
            out: The output in device memory, written in place: C-contiguous, shape
                ``(batch, *output_shape)`` (or ``output_shape`` for a single sample), float32,
                float16 or bfloat16 whatever the input's dtype (a 16-bit output is rounded to
                nearest even on the GPU; ``fdnn_context_run_device_typed``). One its producer
                flags read-only (or as a copy), or a torch tensor that requires grad, is
                refused.
            stream: The ``cudaStream_t`` to queue the work on: an int, or an object with a
                ``cuda_stream`` (torch) or ``ptr`` (CuPy) attribute. None uses the context's own
                stream and waits for the results; otherwise the call returns at once and the
                results are ready when the stream reaches this point.

        Raises:
            TypeError / ValueError for a wrong buffer, before any native call;
            UnsupportedError when the model runs on the CPU; DeviceError.

        In a tight loop over the same buffers, :meth:`bind_device` checks them once instead of
        on every call.
        """
        if self._handle is None:
            raise ValueError("the context is closed")
        function, arguments, consumed = self._device_call("Context.run_device", x, out, stream)
        try:
            status = function(*arguments)
            if status:
                self._library.raise_for_status(status)
        finally:
            for tensor in consumed:
                tensor.release()

    def bind_device(self, x: Any, out: Any, stream: Any = None) -> BoundRun:
        """Check a device run's buffers and stream once; the returned :class:`BoundRun` queues
        that run again on each call, with one native call and no further checks.

        Takes what :meth:`run_device` takes and holds ``x`` and ``out`` (and any DLPack tensor
        consumed from them) until it is closed. A DLPack producer orders its pending work once,
        here; what is written into ``x`` later must be ordered before each call on ``stream``,
        as for any other producer. The context must outlive the calls (a call on a closed
        context raises ValueError).

        Example::

            run = context.bind_device(x, y, stream=torch.cuda.current_stream())
            for batch in loader:
                x.copy_(batch, non_blocking=True)
                run()   # y holds the results once the stream gets there
        """
        if self._handle is None:
            raise ValueError("the context is closed")
        function, arguments, consumed = self._device_call("Context.bind_device", x, out, stream)
        return BoundRun(self, function, arguments, (x, out), consumed)

    def _device_call(self, where: str, x: Any, out: Any,
                     stream: Any) -> Tuple[Callable[..., int], Tuple[Any, ...], List[Any]]:
        """The native function and arguments of a device run after checking its buffers against
        the model, and the DLPack tensors consumed on the way (released by the caller; here, if
        a check fails)."""
        stream_pointer = _device_buffers.stream_pointer(stream)
        consumed: List[Any] = []
        try:
            x_pointer, x_shape, x_dtype, x_tensor = _device_buffers.describe(
                x, where, "input", False, stream_pointer, self._device_id)
            if x_tensor is not None:
                consumed.append(x_tensor)
            out_pointer, out_shape, out_dtype, out_tensor = _device_buffers.describe(
                out, where, "output", True, stream_pointer, self._device_id)
            if out_tensor is not None:
                consumed.append(out_tensor)
            if x_shape == self._input_shape:
                batch, expected_out = 1, self._output_shape
            elif len(x_shape) == len(self._input_shape) + 1 and x_shape[1:] == self._input_shape:
                batch, expected_out = x_shape[0], (x_shape[0],) + self._output_shape
            else:
                raise ValueError(f"{where}: input shape {tuple(x_shape)} is neither (batch, "
                                 f"*{self._input_shape}) nor a single sample {self._input_shape}")
            if not 1 <= batch <= self._max_batch:
                raise ValueError(f"{where}: batch {batch} is outside 1 to max_batch "
                                 f"{self._max_batch}")
            if out_shape != expected_out:
                raise ValueError(f"{where}: output shape {tuple(out_shape)} should be "
                                 f"{expected_out}")
        except BaseException:
            for tensor in consumed:
                tensor.release()
            raise
        if x_dtype == out_dtype == "float32":  # the float32 call (zero-copy)
            return (self._run_device_function,
                    (self._handle, batch, x_pointer, math.prod(x_shape), out_pointer,
                     math.prod(out_shape), stream_pointer), consumed)
        return (self._run_device_typed_function,
                (self._handle, batch, x_pointer, _DTYPE_BY_NAME[x_dtype], math.prod(x_shape),
                 out_pointer, _DTYPE_BY_NAME[out_dtype], math.prod(out_shape), stream_pointer),
                consumed)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._handle is None

    def close(self) -> None:
        """Release the context. Idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._destroy(handle)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"on {self._device}"
        return f"<fusednn.Context {self._input_shape} -> {self._output_shape} {state}>"
