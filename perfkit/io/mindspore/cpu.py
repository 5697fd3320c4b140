"""MindSpore CPU profiles: host operators, their shapes, graph-run steps and memory.

``mindspore.profiler.profile`` on the CPU (MindSpore 2.4 and later, checked with 2.10)
writes an ``*_ascend_ms`` folder like the Ascend export, but its
``ASCEND_PROFILER_OUTPUT/`` holds only ``trace_view.json`` (the host operators, process
``CPU OP``, and a ``Scope Layer`` process), and ``FRAMEWORK/`` holds the CPU profiler's own
files, read here:

* ``cpu_framework_{rank}.txt``: one line per operator launch, in launch order:
  ``op_type;op_name;graph_id;input_1:[2, 24];input_2:[64];input_3:NoShape;`` — the
  operator inputs' shapes (no data types);
* ``cpu_ms_memory_record_{rank}.txt``: ``Timestamp(ns),Total Allocated(Byte),
  Total Reserved(Byte),Total Active(Byte)`` samples of the CPU memory pool;
* ``cpu_op_execute_timestamp_{rank}.txt``, ``cpu_op_detail_info_{rank}.csv`` and
  ``cpu_op_type_info_{rank}.csv`` repeat what ``trace_view.json`` has, aggregated.

There is no device, no communication file, and no step marker: MindSpore records its
``ProfilerStep#N`` ranges in the ``op_range`` data that its CPU analysis skips. Steps are
recovered from the graph instead (:func:`graph_runs`): in graph mode every node of the
compiled training graph (``Default/MatMul-op3``, ``Gradients/.../MatMul-op12``) runs
exactly once per step, in the same order, the optimizer's update nodes last.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError
from ...format import counted
from ..chrome.tables import HOST_COMM_PATTERN, host_steps

__all__ = ["is_cpu_profile", "cpu_tables", "graph_runs", "shapes_text", "self_time",
           "OPTIMIZER_PATTERN"]

FRAMEWORK_DIR = "FRAMEWORK"

#: Operators of an optimizer update: a training step's graph ends with them.
OPTIMIZER_PATTERN = r"(?i)(?:adam|lamb|sgd|momentum|applyrmsprop|adagrad|adafactor)"

_NODE = re.compile(r"-op\d+$")
_DIMS = re.compile(r"^input_\d+:\[([0-9, ]*)\]$")


def _framework_file(rank_dir: Path, stem: str) -> Path | None:
    folder = rank_dir / FRAMEWORK_DIR
    if not folder.is_dir():
        return None
    found = sorted(folder.glob(f"{stem}_*"))
    return found[0] if found else None


def is_cpu_profile(rank_dir: Path) -> bool:
    """True for a MindSpore CPU profile: ``FRAMEWORK/cpu_op_execute_timestamp_*.txt`` and
    no device data (no ``kernel_details.csv``, no ``PROF_*`` folder)."""
    if _framework_file(rank_dir, "cpu_op_execute_timestamp") is None:
        return False
    if (rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").exists():
        return False
    return not any(p.is_dir() for p in rank_dir.glob("PROF_*"))


def shapes_text(fields: list[str]) -> str:
    """``input_N:[a, b]`` fields of a ``cpu_framework`` line as the kernels' shape text
    (``a,b;c;``); ``NoShape``, ``TupleShape(...)`` and scalars ``[]`` give an empty entry."""
    parts = []
    for f in fields:
        f = f.strip()
        if not f.startswith("input_"):
            continue
        m = _DIMS.match(f)
        parts.append(",".join(d.strip() for d in m.group(1).split(",") if d.strip())
                     if m else "")
    return ";".join(parts)


def graph_runs(names: np.ndarray) -> tuple[np.ndarray, str]:
    """Step number (1, 2, ...; NaN outside complete runs) of each operator launch.

    Parameters
    ----------
    names : numpy.ndarray of str
        Full operator names in launch order.

    Returns
    -------
    (steps, how)
        ``how`` says how the runs were cut, or why there are none.

    Notes
    -----
    A compiled training graph of ``P`` distinct nodes runs them all once per step, so the
    launches are ``P``-periodic. A run ends after the optimizer's update
    (:data:`OPTIMIZER_PATTERN`): the first launch that follows an optimizer node starts a
    run. An optimizer node is one whose own name (after the last ``/``) is an optimizer's:
    its scope is not enough, as the optimizer's step counter
    (``Default/optimizer-AdamWeightDecay/AssignAdd-op0``) runs at the start of the step.
    Without optimizer nodes the runs are aligned with the end of the recording (the
    profiler stops at a step boundary). Launches before the first complete run (the
    profiler started mid-step) and after the last one keep no step.
    """
    n = len(names)
    out = np.full(n, np.nan)
    if not n:
        return out, "no operators"
    if not all(_NODE.search(str(x)) for x in names):
        return out, ("operators are not graph nodes (PyNative mode?): the steps cannot be "
                     "told apart")
    counts = pd.Series(names).value_counts()
    period = len(counts)
    if counts.min() < 1 or n < period:
        return out, "no complete run of the graph"
    own = pd.Series(names).astype(TEXT).str.rsplit("/", n=1).str[-1]
    opt = own.str.contains(OPTIMIZER_PATTERN, regex=True).fillna(False).to_numpy(bool)
    ends = np.nonzero(opt[:-1] & ~opt[1:])[0] + 1
    if len(ends):
        first = int(ends[0] % period)
        how = "runs start after the optimizer update (" + str(names[ends[0] - 1]) + ")"
    else:
        first = n % period
        how = "no optimizer node: runs aligned with the end of the recording"
    step = 0
    for start in range(first, n - period + 1, period):
        window = names[start:start + period]
        if len(set(window)) != period:
            return np.full(n, np.nan), (f"the launches are not {period}-periodic from "
                                        f"position {start}: not one graph run per step")
        step += 1
        out[start:start + period] = step
    if not step:
        return out, "no complete run of the graph"
    return out, f"{counted(step, 'complete run')} of the {period}-node graph; {how}"


def _framework_shapes(path: Path, ops: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Attach ``type`` and ``input_shapes`` from ``cpu_framework_{rank}.txt`` (line ``i``
    is the ``i``-th launch)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise ProfileError(path, f"cannot read file: {exc.strerror or exc}") from None
    rows = [ln.split(";") for ln in lines if ln.strip()]
    order = np.argsort(ops["start_us"].to_numpy(np.float64), kind="stable")
    short = ops["name"].astype(TEXT).fillna("").str.rsplit("/", n=1).str[-1].to_numpy()
    if len(rows) != len(ops) or any(len(r) < 2 or r[1] != short[i]
                                    for r, i in zip(rows, order, strict=False)):
        return ops, (f"{path.name}: {len(rows)} lines do not match the {len(ops)} operators "
                     "of trace_view.json one for one; no shapes")
    typ = np.empty(len(ops), dtype=object)
    shp = np.empty(len(ops), dtype=object)
    for r, i in zip(rows, order, strict=True):
        typ[i] = r[0]
        shp[i] = shapes_text(r[3:])
    ops = ops.copy()
    ops["type"] = pd.array(typ, dtype=TEXT)
    ops["input_shapes"] = pd.array(shp, dtype=TEXT)
    return ops, None


def self_time(ops: pd.DataFrame) -> np.ndarray:
    """Self time (µs) of each host operator: its duration less its nested children's.

    A child is an operator of the same thread that starts and ends inside its parent; only
    direct children are subtracted (theirs are subtracted from them). Operators that do
    not nest (the usual case for MindSpore's CPU kernels) keep their duration.
    """
    dur = ops["dur_us"].to_numpy(np.float64)
    out = dur.copy()
    if not len(ops):
        return out
    start = ops["start_us"].to_numpy(np.float64)
    end = start + np.nan_to_num(dur)
    thread = ops["thread"].to_numpy() if "thread" in ops else np.zeros(len(ops))
    order = np.lexsort((-end, start, pd.factorize(thread)[0]))
    s, e, t = start[order], end[order], pd.factorize(thread)[0][order]
    later = np.zeros(len(s), dtype=bool)
    later[1:] = (t[1:] == t[:-1]) & (s[1:] < np.maximum.accumulate(e)[:-1])
    if not later.any():  # nothing starts inside an earlier operator of its thread
        return out
    stack: list[int] = []
    for k in range(len(s)):  # only profiles whose operators nest get here
        while stack and (t[stack[-1]] != t[k] or s[k] >= e[stack[-1]]):
            stack.pop()
        if stack and e[k] <= e[stack[-1]] and np.isfinite(dur[order[k]]):
            out[order[stack[-1]]] -= dur[order[k]]
        stack.append(k)
    return np.maximum(out, 0.0)


def _memory(path: Path, origin: int | None) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ProfileError(path, f"cannot read the CPU memory record: {exc}") from None
    need = ["Timestamp(ns)", "Total Allocated(Byte)", "Total Reserved(Byte)"]
    if any(c not in frame.columns for c in need):
        raise ProfileError(path, f"expected columns {need}, found {list(frame.columns)}")
    ts = pd.to_numeric(frame["Timestamp(ns)"], errors="coerce").to_numpy(np.float64)
    return pd.DataFrame({
        "component": pd.Series(["MindSpore"] * len(frame), dtype=TEXT),
        "ts_us": (ts - origin) / 1000.0 if origin is not None else np.full(len(ts), np.nan),
        "allocated_bytes": pd.to_numeric(frame["Total Allocated(Byte)"], errors="coerce"),
        "reserved_bytes": pd.to_numeric(frame["Total Reserved(Byte)"], errors="coerce"),
        "active_bytes": pd.to_numeric(frame.get("Total Active(Byte)"), errors="coerce")
        if "Total Active(Byte)" in frame else np.nan,
    })


def cpu_tables(rank_dir: Path, ops: pd.DataFrame, origin: int | None
               ) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The ``ops`` (with shapes and steps), ``steps`` and ``memory`` of a CPU profile.

    Parameters
    ----------
    rank_dir : Path
        The ``*_ascend_ms`` folder.
    ops : DataFrame
        The host operators read from ``trace_view.json`` (``name``, ``start_us``,
        ``dur_us``), times relative to ``origin``.
    origin : int or None
        The profile's origin in epoch ns.

    Returns
    -------
    (tables, notes)
    """
    notes = ["a MindSpore CPU profile: host operators only (no device tasks, no "
             "communication tables, no data types)"]
    tables: dict[str, pd.DataFrame] = {}
    f = _framework_file(rank_dir, "cpu_framework")
    if f is not None and len(ops):
        ops, why = _framework_shapes(f, ops)
        if why:
            notes.append("ops.input_shapes: " + why)
    else:
        notes.append("ops.input_shapes: FRAMEWORK/cpu_framework_*.txt not found")
    if len(ops):
        order = np.argsort(ops["start_us"].to_numpy(np.float64), kind="stable")
        names = ops["name"].astype(TEXT).fillna("").to_numpy(dtype=object)[order]
        run, how = graph_runs(names)
        step = np.full(len(ops), np.nan)
        step[order] = run
        ops = ops.copy()
        ops["step"] = step
        known = ~np.isnan(step)
        if known.any():
            start = ops["start_us"].to_numpy(np.float64)
            end = start + np.nan_to_num(ops["dur_us"].to_numpy(np.float64))
            win = pd.DataFrame({"step": step[known], "s": start[known], "e": end[known]})
            win = win.groupby("step").agg(start_ns=("s", "min"), end_ns=("e", "max"))
            spans = pd.DataFrame({"step": win.index.astype(np.int64),
                                  "start_ns": np.round(win["start_ns"].to_numpy() * 1000)
                                  .astype(np.int64),
                                  "end_ns": np.round(win["end_ns"].to_numpy() * 1000)
                                  .astype(np.int64)})
            is_comm = ops["name"].astype(TEXT).str.contains(
                HOST_COMM_PATTERN, regex=True).fillna(False).to_numpy(bool)
            ns_start = np.round(start * 1000).astype(np.int64)
            ns_end = np.round(end * 1000).astype(np.int64)
            steps = host_steps(ns_start, ns_end, is_comm, spans, host_computes=True)
            steps["step_start_us"] = steps.pop("step_start_ns").to_numpy(np.float64) / 1000.0
            tables["steps"] = steps
            notes.append("steps: no step markers in a MindSpore CPU profile; " + how
                         + "; each step spans its graph run, from the first to the last "
                         "operator (steps numbered in the order they ran)")
        else:
            notes.append("steps: none (" + how + ")")
    if len(ops):
        ops = ops.copy()
        ops["self_us"] = self_time(ops)
        notes.append("ops.self_us: each operator's time less that of the operators nested "
                     "inside it on its thread (graph-mode CPU kernels do not nest: their "
                     "duration)")
    tables["ops"] = ops
    f = _framework_file(rank_dir, "cpu_ms_memory_record")
    if f is not None:
        tables["memory"] = _memory(f, origin)
    else:
        notes.append("memory: FRAMEWORK/cpu_ms_memory_record_*.txt not found "
                     "(profile_memory=False)")
    return tables, notes

