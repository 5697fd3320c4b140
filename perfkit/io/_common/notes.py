"""Repairs the reads report, collected for ``meta.notes``.

:func:`note` reports one to the innermost :func:`collecting_notes` scope; :func:`with_notes`
hands a loader's notes to its ``meta.notes``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["note", "collecting_notes", "with_notes"]

_NOTES: ContextVar[list[str] | None] = ContextVar("perfkit_io_notes", default=None)
_T = TypeVar("_T")


def note(message: str) -> None:
    """Report a repair (``"kernel_details.csv: file ends mid-row: last row dropped"``).

    The message goes to the innermost :func:`collecting_notes` scope; outside one it is
    dropped (the repair itself still happens).
    """
    found = _NOTES.get()
    if found is not None and message not in found:
        found.append(message)


@contextmanager
def collecting_notes() -> Iterator[list[str]]:
    """Collect the :func:`note` messages of the reads done inside the ``with`` block."""
    found: list[str] = []
    token = _NOTES.set(found)
    try:
        yield found
    finally:
        _NOTES.reset(token)


def with_notes(func: Callable[..., _T]) -> Callable[..., _T]:
    """Decorator of a ``parse(...) -> (meta, tables)``: its read notes go to ``meta.notes``."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> _T:
        with collecting_notes() as found:
            result = func(*args, **kwargs)
        meta = result[0]  # type: ignore[index]
        meta.notes.extend(n for n in found if n not in meta.notes)
        return result

    return run
