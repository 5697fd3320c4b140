"""The garbage collector and the memory of a bulk parse.

:func:`gc_paused` switches the collector off while millions of small objects are made;
:func:`release_memory` hands the freed memory back afterwards.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable
from contextlib import contextmanager

import pyarrow as pa

__all__ = ["gc_paused", "release_memory"]


@contextmanager
def gc_paused():
    """Switch Python's garbage collector off for a bulk parse (many small objects)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def release_memory() -> None:
    """Hand memory freed by a bulk parse back to the operating system.

    Decoding millions of events frees hundreds of MB in many pieces, which the C heap
    (glibc ``malloc``) and Arrow's memory pool keep for reuse; the resident size of the
    process would stay at its high-water mark. ``malloc_trim(0)`` (glibc only; a no-op
    elsewhere) and ``MemoryPool.release_unused`` return it. Costs a few milliseconds.
    """
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl)
        return None
