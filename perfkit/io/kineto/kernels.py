"""The ``kernels`` table of a Kineto trace: the device tasks and the step of each.

:func:`_kernels` makes one row per device task (kernel, memcpy, memset) with its kind,
category (a communication library's kernel is ``communication``, with its ``family``),
stream and device; :func:`_kernel_steps` places each task in the host step whose runtime
call launched it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, plural
from .._common.distinct import numeric, text
from ..canonical.categories import comm_family, kineto_kind
from ..chrome.tables import NA_NS, rel, step_index
from .graphs import _graph_columns, _unlinked_note

__all__: list[str] = []  # private to the Kineto reader


def _kernel_steps(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
                  notes: list[str] | None = None) -> np.ndarray:
    """Step of each device event: the host step of the runtime call that launched it.

    A task whose launch is not in the trace (launched before the trace began) belongs to
    no step when the trace records runtime calls; a trace without any runtime call (device
    activity only) places each task by its own start instead, and says so.
    """
    if not len(spans) or not len(dev):
        return np.full(len(dev), np.nan)
    rt = runtime[runtime["correlation"].notna()]
    launch = pd.Series(rt["ts_ns"].to_numpy(),
                       index=rt["correlation"].astype("Int64").to_numpy())
    launch = launch[~launch.index.duplicated()]
    corr = dev["correlation"].astype("Int64")
    launch_ts = launch.reindex(corr.to_numpy()).to_numpy()
    missing = pd.isna(launch_ts)
    if not len(rt):
        out = step_index(dev["ts_ns"].to_numpy(), spans)
        if notes is not None:
            notes.append("steps: the trace records no runtime launch (device activity only): "
                         "each GPU task is placed in the step its own start falls in")
        return out
    launch_ts = np.where(missing, NA_NS, launch_ts).astype(np.int64)
    out = step_index(launch_ts, spans)
    if notes is not None:
        n_before = int(missing.sum())
        n_outside = int((np.isnan(out) & ~missing).sum())
        graph = _unlinked_note(n_before, float(np.nansum(
            dev["dur_us"].to_numpy(np.float64)[missing])), runtime) if n_before else None
        if graph:
            notes.append(graph)
        elif n_before:
            notes.append(f"steps: {counted(n_before, 'GPU task')} "
                         f"{plural(n_before, 'was', 'were')} launched before the trace began "
                         f"(no runtime call with {plural(n_before, 'its', 'their')} "
                         "correlation id in the trace): "
                         f"{plural(n_before, 'it belongs', 'they belong')} to no step")
        if n_outside:
            notes.append(f"steps: {counted(n_outside, 'GPU task')} "
                         f"{plural(n_outside, 'was', 'were')} launched outside every step "
                         f"span: {plural(n_outside, 'it belongs', 'they belong')} to no step")
    return out


def _kernels(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
             origin: int | None, vendor: str | None = None,
             notes: list[str] | None = None) -> pd.DataFrame:
    """The ``kernels`` table: one row per device task of ``dev``."""
    name = text(dev["name"])
    kind = pd.Series(dev["kind"].to_numpy(dtype=object) if "kind" in dev.columns
                     else kineto_kind(dev["cat"]).to_numpy(dtype=object),
                     index=dev.index, dtype=TEXT)
    family = comm_family(dev["name"], vendor)
    comm = family.notna().to_numpy(bool)
    category = np.where(comm, "communication",
                        np.where(kind.isin(["gpu_memcpy", "gpu_memset"]).to_numpy(bool),
                                 "memory", "compute"))
    stream = dev["stream"] if dev["stream"].notna().any() else dev["tid"]
    return pd.DataFrame({
        "step": _kernel_steps(runtime, dev, spans, notes),
        "name": name.array,
        "type": kind.array,
        "category": category,
        "stream": numeric(stream),
        "start_us": rel(dev["ts_ns"].to_numpy(), origin),
        "dur_us": dev["dur_us"].to_numpy(),
        "device": numeric(dev["device"]) if dev["device"].notna().any() else numeric(dev["pid"]),
        "correlation": numeric(dev["correlation"]),
        "family": family.array,
        **_graph_columns(runtime, dev),
    })
