"""What the host says about each communication kernel of a Kineto trace.

A collective is recorded on the host at several levels, each enclosing the next on the
thread that called it: the ``c10d::allreduce_`` operator the training code called,
``record_param_comms`` (PyTorch >= 2.1 writes the collective's name, process group, group
size, ranks, message sizes and dtype in its args) and the backend's annotation
(``nccl:all_reduce``, ``gloo:broadcast``), inside which the runtime call launches the
kernel. The kernel's own name often does not say which collective it runs: RCCL >= 2.22
and NCCL >= 2.19 launch ``ncclDevKernel_Generic`` for every kind, and an all-to-all is a
group of sends and receives (``ncclKernel_SendRecv``).

:func:`_host_collectives` links every communication kernel to the host events of its
collective: by its launch (the runtime call with the kernel's ``correlation`` id, and the
host collective events open on that thread when it ran), else by time (the innermost host
collective event whose span holds the kernel's start). It returns, per kernel, the host
name (``nccl:all_to_all``) and what ``record_param_comms`` or the kernel's own args
record.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import numeric, text
from ..canonical.categories import host_comm_family
from .nesting import _parents, _thread_codes, last_open

__all__: list[str] = []  # private to the Kineto reader

#: The args of a collective: those of ``record_param_comms`` (or of the kernel).
ARGS = ("collective", "pg_name", "group_size", "pg_ranks", "in_nelems", "out_nelems",
        "msg_dtype")

_OUT = {"host_name": TEXT, "linked_by": TEXT, **{a: "object" for a in ARGS}}


def _empty(n: int) -> pd.DataFrame:
    return pd.DataFrame({c: pd.array([pd.NA] * n, dtype=t) for c, t in _OUT.items()})


def _host_events(cpu: pd.DataFrame) -> pd.DataFrame:
    """Host collective events (``nccl:*``, ``gloo:*``, ``c10d::*``, ``record_param_comms``)
    with their thread code, start and end (ns) and parent among them."""
    fam = host_comm_family(cpu["name"])
    h = cpu[fam.notna().to_numpy(bool) & ~fam.eq("hccl").fillna(False).to_numpy(bool)]
    if not len(h):
        return h
    start = h["ts_ns"].to_numpy(np.int64)
    end = start + np.round(np.nan_to_num(h["dur_us"].to_numpy(np.float64)) * 1000
                           ).astype(np.int64)
    order = np.lexsort((-end, start))
    h = h.iloc[order]
    (thread,) = _thread_codes(h["tid"])
    h = h.assign(_start=start[order], _end=end[order], _thread=thread,
                 _name=text(h["name"]).to_numpy(dtype=object))
    return h.assign(_parent=_parents(h["_start"].to_numpy(), h["_end"].to_numpy(), thread))


def _innermost(h: pd.DataFrame, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Row position in ``h`` of the innermost host collective event open at ``ts`` on
    ``thread`` (``-1``: none; thread ``-2``: any thread)."""
    out = np.full(len(ts), -1, dtype=np.int64)
    st, en, th = h["_start"].to_numpy(), h["_end"].to_numpy(), h["_thread"].to_numpy()
    for t in np.unique(thread):
        sel = np.flatnonzero(thread == t)
        rows = np.arange(len(h)) if t == -2 else np.flatnonzero(th == t)
        if not len(rows) or t == -1:
            continue
        pos = last_open(st[rows], en[rows], ts[sel])
        ok = pos >= 0
        out[sel[ok]] = rows[pos[ok]]
    return out


def _chain_info(h: pd.DataFrame, first: np.ndarray) -> pd.DataFrame:
    """From each innermost host event (row ``first``) up through its parents: the backend's
    annotation or c10d operator that names the collective, and the args of the
    ``record_param_comms`` among them."""
    out = _empty(len(first))
    names = h["_name"].to_numpy()
    parent = h["_parent"].to_numpy()
    has_args = [a for a in ARGS if a in h.columns]
    args = {a: h[a].astype(object).where(h[a].notna(), None).to_numpy() for a in has_args}
    host_name = np.full(len(first), None, dtype=object)
    vals = {a: np.full(len(first), None, dtype=object) for a in ARGS}
    for i, row in enumerate(first):
        backend = c10d = None
        while row >= 0:
            n = str(names[row])
            low = n.lower()
            if backend is None and (low.startswith("nccl:") or low.startswith("gloo:")):
                backend = n
            elif c10d is None and low.startswith("c10d::"):
                c10d = n
            if low.startswith("record_param_comms") or vals["collective"][i] is None:
                for a in has_args:
                    if vals[a][i] is None and args[a][row] is not None:
                        vals[a][i] = args[a][row]
            row = parent[row]
        host_name[i] = backend or c10d
    out["host_name"] = pd.array(host_name, dtype=TEXT)
    for a in ARGS:
        out[a] = vals[a]
    return out


def _host_collectives(comm_dev: pd.DataFrame, runtime: pd.DataFrame,
                      cpu: pd.DataFrame) -> pd.DataFrame:
    """Per communication kernel (rows of ``comm_dev``, in order): what the host records.

    Returns
    -------
    DataFrame
        ``host_name`` (the ``nccl:*`` / ``gloo:*`` annotation, else the ``c10d::*``
        operator, NA when none is linked), ``linked_by`` (``"launch"``: the runtime call
        with the kernel's correlation id ran inside the host events; ``"time"``: no launch
        in the trace, the kernel's start falls inside them; NA) and the collective's args
        (:data:`ARGS`) from ``record_param_comms`` where it records them, else from the
        kernel's own args.
    """
    n = len(comm_dev)
    out = _empty(n)
    h = _host_events(cpu) if n else cpu.iloc[:0]
    if n and len(h):
        corr = numeric(comm_dev["correlation"]) if "correlation" in comm_dev.columns \
            else np.full(n, np.nan)
        rt = runtime[runtime["correlation"].notna()]
        rt_corr = numeric(rt["correlation"])
        first = pd.Series(np.arange(len(rt)), index=rt_corr)
        first = first[~first.index.duplicated()]
        at = first.reindex(corr).to_numpy()
        launched = ~np.isnan(at)
        pos = np.nan_to_num(at).astype(np.int64)
        rt_ts = np.append(rt["ts_ns"].to_numpy(np.int64), 0)  # one more: never empty
        (rt_thread, h_thread) = _thread_codes(rt["tid"], h["tid"])
        rt_thread = np.append(rt_thread, -1)
        ts = np.where(launched, rt_ts[pos], comm_dev["ts_ns"].to_numpy(np.int64))
        h = h.assign(_thread=h_thread)
        thread = np.where(launched, rt_thread[pos], -2)
        inner = _innermost(h, thread, ts)
        out = _chain_info(h, inner)
        linked = inner >= 0
        out["linked_by"] = pd.array(np.where(linked, np.where(launched, "launch", "time"),
                                             None), dtype=TEXT)
    # the kernel's own args where the host records none (PyTorch >= 2.1 writes them on both)
    for a in ARGS:
        if a in comm_dev.columns:
            own = comm_dev[a].astype(object).where(comm_dev[a].notna(), None).to_numpy()
            mine = out[a].to_numpy(dtype=object)
            out[a] = np.where(pd.isna(mine), own, mine)
    return out
