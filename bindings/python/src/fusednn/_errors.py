# SPDX-License-Identifier: Apache-2.0

"""Status codes of the C API and the exceptions they become."""

from __future__ import annotations

import enum
from typing import Dict, Type, Union

__all__ = [
    "Status",
    "FusednnError",
    "InvalidArgumentError",
    "FileError",
    "ParseError",
    "InvalidModelError",
    "WeightMismatchError",
    "InvalidStateError",
    "BufferTooSmallError",
    "OutOfMemoryError",
    "UnsupportedError",
    "NonFiniteWeightError",
    "DeviceError",
    "InternalError",
    "LibraryNotFoundError",
    "error_for_status",
]


class Status(enum.IntEnum):
    """``fdnn_status``: the values are pinned by the C API and never change."""

    OK = 0
    INVALID_ARGUMENT = 1
    IO_ERROR = 2
    PARSE_ERROR = 3
    INVALID_MODEL = 4
    WEIGHT_MISMATCH = 5
    INVALID_STATE = 6
    BUFFER_TOO_SMALL = 7
    OUT_OF_MEMORY = 8
    UNSUPPORTED = 9
    NON_FINITE_WEIGHT = 10
    DEVICE_ERROR = 11
    INTERNAL_ERROR = 12


class FusednnError(Exception):
    """A fusednn call failed.

    Attributes:
        status: The :class:`Status` the C call returned (a plain int for a value this binding
            does not know, from a newer library).
        message: The library's message for the failure (``fdnn_last_error_message``).
    """

    status: Union[Status, int]
    message: str

    def __init__(self, status: Union[Status, int], message: str) -> None:
        self.status = status
        self.message = message
        name = status.name if isinstance(status, Status) else f"status {int(status)}"
        super().__init__(f"{message} [{name}]" if message else f"[{name}]")


class InvalidArgumentError(FusednnError):
    """FDNN_STATUS_INVALID_ARGUMENT: a NULL pointer, a bad value or an out-of-range batch."""


class FileError(FusednnError):
    """FDNN_STATUS_IO_ERROR: a file or directory is missing or cannot be read."""


class ParseError(FusednnError):
    """FDNN_STATUS_PARSE_ERROR: a file is malformed (JSON syntax, safetensors layout)."""


class InvalidModelError(FusednnError):
    """FDNN_STATUS_INVALID_MODEL: the spec is wrong (unknown layer, bad dimensions, shapes)."""


class WeightMismatchError(FusednnError):
    """FDNN_STATUS_WEIGHT_MISMATCH: a weight is missing, extra, mis-shaped or mis-typed."""


class InvalidStateError(FusednnError):
    """FDNN_STATUS_INVALID_STATE: the call is not allowed now (run before weights load...)."""


class BufferTooSmallError(FusednnError):
    """FDNN_STATUS_BUFFER_TOO_SMALL: an output buffer cannot hold the result."""


class OutOfMemoryError(FusednnError):
    """FDNN_STATUS_OUT_OF_MEMORY: host or device memory could not be allocated."""


class UnsupportedError(FusednnError):
    """FDNN_STATUS_UNSUPPORTED: the feature is not available in this build or device."""


class NonFiniteWeightError(FusednnError):
    """FDNN_STATUS_NON_FINITE_WEIGHT: validation found a NaN or Inf weight."""


class DeviceError(FusednnError):
    """FDNN_STATUS_DEVICE_ERROR: the GPU runtime reported an error."""


class InternalError(FusednnError):
    """FDNN_STATUS_INTERNAL_ERROR: a bug in fusednn; please report the message."""


class LibraryNotFoundError(OSError):
    """libfusednn.so could not be found or loaded; the message says what to set."""


_ERROR_CLASSES: Dict[Status, Type[FusednnError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.IO_ERROR: FileError,
    Status.PARSE_ERROR: ParseError,
    Status.INVALID_MODEL: InvalidModelError,
    Status.WEIGHT_MISMATCH: WeightMismatchError,
    Status.INVALID_STATE: InvalidStateError,
    Status.BUFFER_TOO_SMALL: BufferTooSmallError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.UNSUPPORTED: UnsupportedError,
    Status.NON_FINITE_WEIGHT: NonFiniteWeightError,
    Status.DEVICE_ERROR: DeviceError,
    Status.INTERNAL_ERROR: InternalError,
}


def error_for_status(status: int, message: str) -> FusednnError:
    """The exception for a non-zero status: its own subclass, or FusednnError for unknown ones."""
    try:
        known = Status(status)
    except ValueError:
        return FusednnError(status, message)
    return _ERROR_CLASSES.get(known, FusednnError)(known, message)
