# SPDX-License-Identifier: Apache-2.0

"""Closeable: the context-manager and garbage-collection half of Model, Context and BoundRun."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Closeable"]

Self = TypeVar("Self", bound="Closeable")


class Closeable:
    """Calls ``close()`` (idempotent, defined by the subclass) on leaving a ``with`` block and
    when the object is garbage-collected."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown, or a constructor that failed early
            pass
