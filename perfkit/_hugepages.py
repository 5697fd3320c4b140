"""Transparent huge pages off while perfkit loads and analyses a profile (Linux).

Why: Arrow's memory pool (mimalloc in the PyPI wheels) asks the kernel for transparent
huge pages for its large blocks (``madvise``). With THP enabled and the kernel's default
``defrag`` setting (``madvise``), the first touch of each 2 MiB page can stall while
the kernel compacts memory to find one, and how long depends on what else the machine
did. On the 858 MB benchmark rank (2 vCPU, 2026-11-22) reading ``kernel_details.csv``
took 0.6 to 2.3 s with the same code, 0.1 to 3.1 s of it in the kernel; with huge pages
off for the process, ``perfkit.load`` took 4.4-5.4 s instead of 5.8-6.9 s, peaked at 1.27 GB instead
of 1.41-1.57 GB, and its cost per MB no longer grew with the input size
(``benchmarks/README.md``).

:func:`small_pages` switches them off for the process with ``prctl(PR_SET_THP_DISABLE)``
for the length of a call and puts the previous setting back afterwards. Memory already
mapped keeps its pages; processes forked meanwhile (the loader's workers) inherit the
setting. Set ``PERFKIT_HUGE_PAGES=keep`` to leave the kernel's choice alone. Elsewhere
than Linux, or where ``prctl`` is refused (a sandbox), nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ._switch import ProcessSwitch

__all__ = ["small_pages", "with_small_pages", "huge_pages_disabled"]

_PR_SET_THP_DISABLE = 41
_PR_GET_THP_DISABLE = 42

F = TypeVar("F", bound=Callable[..., Any])


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, or None off Linux or when it cannot be found."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong]
    return fn


def huge_pages_disabled() -> bool | None:
    """Whether transparent huge pages are off for this process (None: cannot tell)."""
    prctl = _prctl()
    if prctl is None:
        return None
    got = prctl(_PR_GET_THP_DISABLE, 0, 0, 0, 0)
    return None if got < 0 else bool(got)


def _set(disabled: bool) -> bool:
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_THP_DISABLE, int(disabled), 0, 0, 0) == 0


def _switch_off() -> bool:
    return huge_pages_disabled() is False and _set(True)


_SWITCH = ProcessSwitch(_switch_off, lambda: _set(False), "PERFKIT_HUGE_PAGES")


def small_pages() -> AbstractContextManager[None]:
    """Within the block, new memory of this process is not backed by huge pages.

    Blocks nest and may run in several threads: the outermost one switches huge pages
    off (when they were on) and the last one to end switches them back on. A no-op when
    ``PERFKIT_HUGE_PAGES=keep``, off Linux, or when the kernel refuses.
    """
    return _SWITCH.block()


def with_small_pages(fn: F) -> F:
    """Decorator: run ``fn`` inside :func:`small_pages`."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with small_pages():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]

