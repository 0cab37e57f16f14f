# SPDX-License-Identifier: Apache-2.0

"""BoundRun: a device run whose buffers were checked once (Context.bind_device)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, Tuple

from ._closeable import Closeable

__all__ = ["BoundRun"]


def _as_ctypes(function: Callable[..., int], arguments: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The arguments as instances of the function's argtypes: ctypes passes those as they are,
    where it converts a Python int on every call (~0.2 us of a 7-argument call)."""
    argtypes = getattr(function, "argtypes", None)
    if not argtypes:
        return arguments
    return tuple(value if isinstance(value, argtype) else argtype(value)
                 for value, argtype in zip(arguments, argtypes))


class BoundRun(Closeable):
    """One device run, queued again by each call with a single native call.

    Made by :meth:`Context.bind_device`, which has checked the buffers, their shapes and dtypes
    and the stream. It holds the buffer objects (and any DLPack tensors consumed from them) until
    :meth:`close`; use it as a context manager, or let it be garbage-collected. The device
    addresses are fixed at binding: a buffer whose storage moves afterwards (torch's
    ``resize_()`` or ``set_()``) must be bound again.
    """

    __slots__ = ("_context", "_function", "_arguments", "_buffers", "_consumed")

    def __init__(self, context: Any, function: Callable[..., int], arguments: Tuple[Any, ...],
                 buffers: Tuple[Any, ...], consumed: Sequence[Any]) -> None:
        self._context = context
        self._function = function
        self._arguments = _as_ctypes(function, arguments)
        self._buffers = buffers
        self._consumed = list(consumed)

    def __call__(self) -> None:
        """Queue the run (what Context.run_device does with the bound buffers and stream).

        Raises:
            ValueError when this object or its context is closed; DeviceError.
        """
        context = self._context
        if context is None or context._handle is None:
            raise ValueError("the bound run or its context is closed")
        status = self._function(*self._arguments)
        if status:
            context._library.raise_for_status(status)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._context is None

    def close(self) -> None:
        """Release the buffers and the DLPack tensors consumed from them. Idempotent. Once the
        stream may still use them, the caller keeps its own references until it has synchronised,
        as for Context.run_device."""
        consumed, self._consumed = self._consumed, []
        self._context = None
        self._buffers = ()
        self._arguments = ()
        for tensor in consumed:
            tensor.release()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"on {self._context!r}"
        return f"<fusednn.BoundRun {state}>"

