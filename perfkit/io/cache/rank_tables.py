"""A bounded in-memory store of rank tables read from cache entries, one per process.

A lazy cluster (:mod:`perfkit.io.engines.dask`) builds each partition of a table from a
rank's cache entry: read the Parquet file, conform it, put it on the cluster's clock.
Every analysis computes its own Dask graph, so without a store each one reads the same
files again on every worker (for a small job, most of the time an analysis takes). Here a
worker keeps the tables it built, least recently used first out, within a byte budget:
``$PERFKIT_RANK_TABLES_MB`` (default 256 MB per process; 0 turns it off). Entries are
immutable once written; a table is keyed by its entry file's identity (path, size,
modification time, inode), so a rewritten entry is read afresh.

Every caller gets a shallow copy (pandas copy-on-write): adding a column to it never
changes the stored table.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path

import pandas as pd

__all__ = ["cached_table", "budget_bytes", "clear"]

_LOCK = threading.Lock()
_STORE: OrderedDict[Hashable, tuple[pd.DataFrame, int]] = OrderedDict()
_SIZE = [0]


def budget_bytes() -> int:
    """The byte budget of this process's store (``$PERFKIT_RANK_TABLES_MB``, default 256)."""
    try:
        mb = float(os.environ.get("PERFKIT_RANK_TABLES_MB", "256"))
    except ValueError:
        mb = 256.0
    return max(0, int(mb * (1 << 20)))


def clear() -> None:
    """Forget every stored table."""
    with _LOCK:
        _STORE.clear()
        _SIZE[0] = 0


def cached_table(file: Path, key: Hashable, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``build()``, or the table built before for the same ``file`` (unchanged) and ``key``.

    Parameters
    ----------
    file : Path
        The entry file the table is read from; its identity is part of the key.
    key : hashable
        What else the table depends on (table name, clock shift, rank maps).
    build : callable
        Reads and shapes the table.
    """
    budget = budget_bytes()
    try:
        st = file.stat()
        ident = (str(file), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        return build()  # the read will say what is wrong with the file
    full = (ident, key)
    if budget:
        with _LOCK:
            hit = _STORE.get(full)
            if hit is not None:
                _STORE.move_to_end(full)
                return hit[0].copy(deep=False)
    frame = build()
    if not budget:
        return frame
    size = int(frame.memory_usage(deep=False).sum())
    if size > budget // 4:  # a table this large is not kept (it would push out the rest)
        return frame
    with _LOCK:
        if full not in _STORE:
            _STORE[full] = (frame, size)
            _SIZE[0] += size
            while _SIZE[0] > budget and _STORE:
                _, (_, old) = _STORE.popitem(last=False)
                _SIZE[0] -= old
    return frame.copy(deep=False)
