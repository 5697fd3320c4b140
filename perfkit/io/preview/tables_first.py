"""A rank's tables handed over before its slowest file is read: the first answer.

An Ascend rank's ``trace_view.json`` is its largest file (520 MB beside a 345 MB
``kernel_details.csv`` in the benchmark rank) and gives only the host operators
(``ops``). The job (:func:`perfkit.infer_job`: batch, sequence, model, layout), and so
the throughput and MFU, are read from the other tables. Where someone listens (:func:`listen`),
:func:`perfkit.io.ascend.text.parse` reads the small files first, then only the columns of
``kernel_details.csv`` the job is read from (:data:`perfkit.io.ascend.csv.JOB_COLUMNS`),
and hands those tables over through :func:`offer` before it reads the rest: the listener
(the dashboard, which works out the job from them, :mod:`perfkit.widgets.background`)
has the machine to itself meanwhile, and the whole ``kernel_details.csv`` and
``trace_view.json`` are read once it is done (docs/loading.md, "The tables before the
trace").

What is handed over is the rank as :func:`perfkit.io.ascend.text.parse` assembles it, by the
same code, without the trace: every table but ``ops`` (the kernels with the job's columns
only), its times on the origin of the
files read so far (the trace may hold an earlier timestamp, which moves the full load's
origin: durations, shapes and counts are the same), then checked as
:func:`perfkit.io.detect.sources.parse_source` checks every rank (:func:`relay`). The full load
goes on as if nobody listened: the tables handed over are copies (their frames share
columns with the load's, never written to).

A listener that fails is ignored: the full load, which follows anyway, says what is
wrong.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["listen", "offer", "relay", "listening"]

Listener = Callable[[Any, dict[str, Any]], None]

_LISTENER: contextvars.ContextVar[Listener | None] = contextvars.ContextVar(
    "perfkit_tables_first", default=None)


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Within the block, a rank read in this thread hands ``listener`` its tables
    ``(meta, tables)`` before its trace (module docstring)."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def listening() -> bool:
    """Whether someone listens in this context (a reader builds nothing otherwise)."""
    return _LISTENER.get() is not None


def offer(make: Callable[[], tuple[Any, dict[str, Any]]]) -> None:
    """Hand ``make()``'s ``(meta, tables)`` to the listener, if any; ``make`` is not
    called when nobody listens, and nothing it or the listener raises gets out."""
    listener = _LISTENER.get()
    if listener is None:
        return
    try:
        meta, tables = make()
        listener(meta, tables)
    except Exception:  # noqa: BLE001 - the full load says what is wrong, as always
        return


@contextmanager
def relay(finish: Callable[[Any, dict[str, Any]], tuple[Any, dict[str, Any]]]
          ) -> Iterator[None]:
    """Within the block, tables offered reach the listener through ``finish`` (the checks
    a reader's output gets before it is a rank); nothing changes when nobody listens."""
    outer = _LISTENER.get()
    if outer is None:
        yield
        return

    def finished(meta: Any, tables: dict[str, Any]) -> None:
        outer(*finish(meta, tables))
    token = _LISTENER.set(finished)
    try:
        yield
    finally:
        _LISTENER.reset(token)
