"""CUDA and HIP graph replays in a Kineto trace: which device tasks a graph launch ran.

A captured graph replayed (``torch.cuda.CUDAGraph.replay``, vLLM's decode graphs) shows on
the host one runtime call per replay, ``cudaGraphLaunch`` (``cuGraphLaunch`` in the driver
API, ``hipGraphLaunch`` on ROCm), and on the device every kernel the graph ran. CUPTI gives
each of those kernels the correlation id of the graph launch (Kineto starts its ``ac2g``
flow at ``cudaGraphLaunch_v10000``: pytorch/kineto ``libkineto/src/CuptiActivity.cpp``,
``RuntimeActivity::flowStart``; the shared id is observed in wolfpld/tracy#1330 and, on
ROCm, AMD-AGI/TraceLens#827: 40 ``hipGraphLaunch`` calls, 41,960 kernels), so the reader
places them like any other launch: each kernel keeps its own name, its step is the one
whose span holds the graph launch, its operator the host operator open around it.
Newer Kineto also writes the graph on each kernel (``graph id``, CUPTI ``graphId``:
pytorch/kineto#1276, #1567).

:func:`_graph_launch_corr` finds the graph launches, :func:`_graph_columns` marks the
tasks they ran (``graph_launch``, ``graph_id``) and :func:`_graph_note` says how many and
how much device time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...format import counted, plural, time_text
from .._common.distinct import numeric, per_distinct
from .kinds import _bool

__all__: list[str] = []  # private to the Kineto reader

GRAPH_LAUNCH = r"^(?:cuda|cu|hip)GraphLaunch"
"""Runtime / driver calls that replay a captured graph (``cudaGraphLaunch``,
``cuGraphLaunch``, ``hipGraphLaunch`` and their ``_ptsz`` / ``_spt`` variants)."""


def _graph_launch_corr(runtime: pd.DataFrame) -> tuple[np.ndarray, str]:
    """Correlation ids of the graph launches of ``runtime`` and the name of the first."""
    if not len(runtime):
        return np.zeros(0, dtype=np.int64), ""
    hit = _bool(per_distinct(runtime["name"], lambda u: u.str.contains(GRAPH_LAUNCH,
                                                                       regex=True)))
    if not hit.any():
        return np.zeros(0, dtype=np.int64), ""
    name = str(runtime["name"].to_numpy()[np.flatnonzero(hit)[0]])
    corr = runtime["correlation"].to_numpy()[hit]
    return pd.to_numeric(pd.Series(corr), errors="coerce").dropna().astype(
        np.int64).to_numpy(), name


def _graph_columns(runtime: pd.DataFrame, dev: pd.DataFrame) -> dict[str, object]:
    """``graph_launch`` (the task's runtime launch is a graph launch) and ``graph_id`` (the
    graph, where the trace records it) of each task; empty for a trace without graphs."""
    corr, _ = _graph_launch_corr(runtime)
    has_id = "graph_id" in dev.columns and dev["graph_id"].notna().any()
    out: dict[str, object] = {}
    if len(corr) or has_id:
        task_corr = pd.to_numeric(dev["correlation"], errors="coerce")
        out["graph_launch"] = task_corr.isin(corr).to_numpy(bool) if len(corr) \
            else np.zeros(len(dev), dtype=bool)
    if has_id:
        out["graph_id"] = numeric(dev["graph_id"])
    return out


def _graph_note(runtime: pd.DataFrame, kernels: pd.DataFrame) -> str | None:
    """What the graph launches of the trace ran, and which tasks no launch explains.

    The unlinked tasks are those whose correlation id no runtime call of the trace has:
    in a trace with graph launches they may be graph replays the profiler did not link,
    so they are counted with their device time and put in no step, never placed by time.
    """
    corr, name = _graph_launch_corr(runtime)
    if not len(corr) or "graph_launch" not in kernels.columns:
        return None
    ran = kernels["graph_launch"].to_numpy(bool)
    n, dur = int(ran.sum()), float(np.nansum(kernels["dur_us"].to_numpy(np.float64)[ran]))
    k = len(np.unique(corr))
    text = (f"kernels: {counted(k, 'graph launch', 'graph launches')} ({name}) "
            f"{plural(k, 'ran', 'ran')} {counted(n, 'GPU task')} "
            f"({time_text(dur)} of device time), linked to "
            f"{plural(k, 'it', 'them')} by correlation id (column graph_launch): each keeps "
            "its own name, its step is the one whose span holds the graph launch and its "
            "operator the host operator open around that launch")
    if not n:
        text = (f"kernels: {counted(k, 'graph launch', 'graph launches')} ({name}) but no "
                "GPU task carries the correlation id of one: the tasks the graphs ran are "
                "not linked to their launch")
    return text


def _unlinked_note(n: int, dur_us: float, runtime: pd.DataFrame) -> str | None:
    """The note for ``n`` tasks without a runtime launch in a trace that has graph launches
    (``dur_us``: their device time, µs); None for a trace without graph launches."""
    corr, name = _graph_launch_corr(runtime)
    if not len(corr):
        return None
    k = len(np.unique(corr))
    return (f"steps: {counted(n, 'GPU task')} ({time_text(dur_us)} of device time) "
            f"{plural(n, 'has', 'have')} no runtime call with "
            f"{plural(n, 'its', 'their')} correlation id in the trace, which holds "
            f"{counted(k, 'graph launch', 'graph launches')} ({name}): "
            f"{plural(n, 'it was', 'they were')} launched before the trace began or "
            "replayed by a graph the profiler did not link to its launch; "
            f"{plural(n, 'it belongs', 'they belong')} to no step and no operator "
            "(not placed by time)")
