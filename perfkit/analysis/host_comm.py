"""Device idle time spent waiting for collectives that run on the host.

With the ``gloo`` backend (or any backend that runs its collectives on CPU threads) a
GPU or NPU run has no communication on the device: the gradient all-reduce happens on
the host, and the device sits idle until it returns. The step split then shows the wait
as *free* time, and only the overlap of the device's idle gaps with the host's collective
events says what it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ._frames import is_lazy, per_rank
from ._util import empty_frame, has_values, table, typed

__all__ = ["HOST_RUN_FAMILIES", "host_collective_waits"]

#: Collective families whose work runs on host threads (``comm_ops.family``), not as
#: device tasks: ``gloo`` (PyTorch's CPU backend). ``nccl:*`` and ``hcom_*`` host events
#: only launch device work, so they are not here.
HOST_RUN_FAMILIES: tuple[str, ...] = ("gloo",)

_COLUMNS = {"rank": "Int64", "step": "Int64", "long_gap_us": "float64",
            "host_comm_us": "float64", "collectives": TEXT}


def host_collective_waits(profile: Any, long_gap_us: float = 1000.0,
                          families: tuple[str, ...] = HOST_RUN_FAMILIES) -> pd.DataFrame:
    """Long device gaps, per (rank, step), and how much of them the host spent in collectives.

    The device's busy time is the union of its tasks in each (rank, step); a gap between
    two busy segments of at least ``long_gap_us`` is a *long gap* (as in
    :func:`perfkit.analysis.host_bound`). ``host_comm_us`` is the part of the long gaps
    covered by the union of the rank's host collective events (``comm_ops`` rows of the
    ``families``, from ``start_us`` to ``start_us + elapse_us``): time the device was idle
    while the host communicated. Arithmetic: interval intersection, no model.

    Parameters
    ----------
    profile : Profile or Cluster
    long_gap_us : float
        Shortest gap counted (µs).
    families : tuple of str
        ``comm_ops.family`` values that run on the host (default :data:`HOST_RUN_FAMILIES`).

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``step``, ``long_gap_us``, ``host_comm_us`` (≤ ``long_gap_us``) and
        ``collectives`` (the host collectives' names, most time first). Empty, with the
        reason in ``attrs["notes"]``, when the profile has no host collective or
        no device task.
    """
    if is_lazy(profile):
        return per_rank(profile, host_collective_waits, long_gap_us, families)
    comm = table(profile, "comm_ops")
    if comm.empty or "family" not in comm.columns or not has_values(comm, "elapse_us"):
        return empty_frame(_COLUMNS, "the profile has no collective run on the host")
    comm = comm[comm["family"].astype(TEXT).isin(list(families)).fillna(False)
                .to_numpy(bool)]
    kernels = table(profile, "kernels")
    if comm.empty:
        return empty_frame(_COLUMNS, "the profile has no collective run on the host")
    if kernels.empty or not has_values(kernels, "dur_us"):
        return empty_frame(_COLUMNS, "the profile has no device tasks (kernels table)")
    rows = []
    for rank, k in kernels.groupby("rank", dropna=False, sort=True):
        c = comm[(comm["rank"] == rank).fillna(False).to_numpy(bool)] \
            if pd.notna(rank) else comm[comm["rank"].isna().to_numpy(bool)]
        lo, hi = _union(c["start_us"].to_numpy(np.float64),
                        (c["start_us"] + c["elapse_us"]).to_numpy(np.float64))
        names = (c.assign(t=c["elapse_us"]).groupby("name")["t"].sum()
                 .sort_values(ascending=False).index.astype(str).tolist())
        for step, ks in k.groupby("step", dropna=False, sort=True):
            s = ks["start_us"].to_numpy(np.float64)
            b_lo, b_hi = _union(s, s + np.clip(ks["dur_us"].to_numpy(np.float64), 0, None))
            gap_lo, gap_hi = b_hi[:-1], b_lo[1:]
            long = (gap_hi - gap_lo) >= long_gap_us
            gap_lo, gap_hi = gap_lo[long], gap_hi[long]
            covered = _covered(lo, hi, gap_hi) - _covered(lo, hi, gap_lo)
            rows.append({"rank": rank, "step": step,
                         "long_gap_us": float((gap_hi - gap_lo).sum()),
                         "host_comm_us": float(covered.sum()),
                         "collectives": ", ".join(names)})
    return typed(pd.DataFrame(rows, columns=list(_COLUMNS)), _COLUMNS)


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted segments covering the intervals ``[start, end)`` (NaN dropped)."""
    ok = np.isfinite(start) & np.isfinite(end)
    order = np.argsort(start[ok], kind="mergesort")
    s, e = start[ok][order], end[ok][order]
    if not len(s):
        return s, e
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    at = np.flatnonzero(new)
    return s[at], np.maximum.reduceat(e, at)


def _covered(lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted segments ``[lo, hi)`` that lies before each ``x``."""
    if not len(lo):
        return np.zeros(len(x))
    before = np.r_[0.0, np.cumsum(hi - lo)]  # covered length before segment i
    i = np.searchsorted(lo, x, side="right")  # segments starting at or before x
    last = np.clip(i - 1, 0, len(lo) - 1)
    partial = np.where(i > 0, np.clip(x - lo[last], 0.0, hi[last] - lo[last]), 0.0)
    return before[np.maximum(i - 1, 0)] * (i > 0) + partial
