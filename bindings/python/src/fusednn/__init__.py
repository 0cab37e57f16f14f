# SPDX-License-Identifier: Apache-2.0

"""fusednn: run small PyTorch-trained networks through libfusednn.

    import numpy as np
    import fusednn

    with fusednn.Model.from_file("mlp.safetensors", device="auto") as model:
        y = model.run(np.zeros((8,) + model.input_shape, dtype=np.float32))

:class:`Model` and :class:`Context` wrap the C API's handles; failures raise
:class:`FusednnError` subclasses carrying ``.status`` and ``.message``. Bundles are written from
PyTorch with :mod:`fusednn.export` (which needs torch; nothing else here does).

The native library is found through the environment variable ``FUSEDNN_LIBRARY``, then a copy
bundled in this package, then the system loader; it is loaded on first use, so importing this
package (or :mod:`fusednn.export`) never needs it.
"""

from __future__ import annotations

from typing import Any

from ._errors import (
    BufferTooSmallError,
    DeviceError,
    FileError,
    FusednnError,
    InternalError,
    InvalidArgumentError,
    InvalidModelError,
    InvalidStateError,
    LibraryNotFoundError,
    NonFiniteWeightError,
    OutOfMemoryError,
    ParseError,
    Status,
    UnsupportedError,
    WeightMismatchError,
)
from ._model import BoundRun, Context, LayerInfo, MemoryInfo, Model, cuda_device_count
from ._native import ENV_LIBRARY

__all__ = [
    "BoundRun",
    "BufferTooSmallError",
    "Context",
    "DeviceError",
    "ENV_LIBRARY",
    "FileError",
    "FusednnError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidModelError",
    "InvalidStateError",
    "LayerInfo",
    "LibraryNotFoundError",
    "MemoryInfo",
    "Model",
    "NonFiniteWeightError",
    "OutOfMemoryError",
    "ParseError",
    "Status",
    "UnsupportedError",
    "WeightMismatchError",
    "cuda_device_count",
    "library_path",
    "status_string",
    "version",
]


def version() -> str:
    """The native library's version, "major.minor.patch" (loads the library)."""
    from ._native import library

    return library().version


def library_path() -> str:
    """The libfusednn that was loaded (loads it if needed)."""
    from ._native import library

    return library().path


def status_string(status: int) -> str:
    """The C name of a status code ("FDNN_STATUS_OK"), from the library."""
    from ._native import library

    raw = library().cdll.fdnn_status_string(int(status))
    return raw.decode("ascii") if raw else ""


def __getattr__(name: str) -> Any:
    # __version__ is the library's, read lazily so that importing fusednn needs no library.
    if name == "__version__":
        return version()
    raise AttributeError(f"module 'fusednn' has no attribute {name!r}")
