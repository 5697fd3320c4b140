"""Freed memory kept in the process while the advisor runs (glibc's ``malloc``, Linux).

Why: ``perfkit.advise`` on a million device tasks allocates and frees arrays of a few
to some tens of MB, one analysis after another. With glibc's defaults each one large
enough is mapped for itself and handed back to the kernel when freed (its ``mmap``
threshold, which glibc raises on its own only as large blocks are freed, up to 32 MiB),
and free memory at the top of the heap is handed back beyond its ``trim`` threshold; the
next array is then faulted in again, page by page. On the 1 M-task benchmark rank that
was about 110,000 page faults in the first call, 0.26-0.31 s of system time
(``benchmarks/README.md``).

:func:`freed_memory_kept` raises both thresholds to 1 GiB for the length of a call, so
the arrays freed by one analysis serve the next one; the process's peak memory is
about the same (the arrays are reused, not added to). When the last such call ends,
the thresholds are set to 32 MiB (``mmap``) and 64 MiB (``trim``): the values glibc's
own adjustment reaches once arrays of that size have been freed, as they are by
loading a large profile. glibc offers no way back to adjusting them itself, so after the
first call they stay there, at most 64 MiB of free memory held at the top of the heap.
Set ``PERFKIT_MALLOC=keep`` to leave glibc's settings alone. With another C library
(musl, macOS, Windows) nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

from ._switch import ProcessSwitch

__all__ = ["freed_memory_kept", "KEPT_BYTES", "AFTER_MMAP_BYTES", "AFTER_TRIM_BYTES"]

#: Both thresholds inside a block: blocks of up to this size come from the heap, and
#: up to this much free memory stays at its top.
KEPT_BYTES = 1 << 30
#: glibc's largest self-adjusted ``mmap`` threshold on a 64-bit system
#: (``DEFAULT_MMAP_THRESHOLD_MAX`` = 4 MiB x ``sizeof(long)``), and its ``trim``
#: threshold then (twice that): the settings after the last block ends.
AFTER_MMAP_BYTES = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
AFTER_TRIM_BYTES = 2 * AFTER_MMAP_BYTES

_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


@functools.lru_cache(maxsize=1)
def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None with another C library."""
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    return fn


def _set(mmap_bytes: int, trim_bytes: int) -> bool:
    """Set both thresholds; whether glibc accepted them.

    A glibc that caps the ``mmap`` threshold (at half its heap size, 32 MiB on 64-bit)
    and refuses a higher one gets that cap instead.
    """
    mallopt = _mallopt()
    if mallopt is None:
        return False
    if not mallopt(_M_MMAP_THRESHOLD, mmap_bytes) and \
            not mallopt(_M_MMAP_THRESHOLD, min(mmap_bytes, AFTER_MMAP_BYTES)):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, trim_bytes))


def _keep() -> bool:
    """Raise both thresholds; True wherever glibc's ``mallopt`` is, so that the last
    block always sets the after-values, even if glibc refused part of this."""
    if _mallopt() is None:
        return False
    _set(KEPT_BYTES, KEPT_BYTES)
    return True


def _after() -> None:
    _set(AFTER_MMAP_BYTES, AFTER_TRIM_BYTES)


_SWITCH = ProcessSwitch(_keep, _after, "PERFKIT_MALLOC")


def freed_memory_kept() -> AbstractContextManager[None]:
    """Within the block, memory freed by this process stays in it for reuse (glibc).

    Blocks nest and may run in several threads; the last one to end sets the thresholds
    described in the module's notes. A no-op with ``PERFKIT_MALLOC=keep`` and with a C
    library other than glibc.
    """
    return _SWITCH.block()
