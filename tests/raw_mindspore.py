"""Independent readings of the two real MindSpore profiles of ``shared/samples/wild``
(``json`` and ``csv``, no perfkit code), shared by the tests that check perfkit's steps,
gaps, timeline and findings against them.

- ``wild/mi_run1`` (MindInsight-era ``profiler/``): the step trace's windows on the
  timeline's clock (``min_cycle_counter_1.txt`` is the counter at time 0; ticks are 10 ns),
  the timeline's device operators (every event but pid 10000) and its pid 10000 events
  (MindInsight writes the step trace's all-reduce phases there, one per stream and step);
- ``wild/mi_prof`` (raw CANN ``PROF_*``, two devices): per rank, each iteration's mark
  ("Iteration Time"), the wait for data before it ("Data_aug Bound") and the Overlap
  Analysis tracks of its ``msprof_`` file;
- ``ascend/mindinsight-legacy/cluster_propose`` (legacy MindInsight cluster, CSV): per rank,
  each step's row of ``ascend_cluster_analyse_*_{rank}.csv`` (ms) and the step trace's
  ``total`` (10 ns ticks) of ``step_trace_raw_{rank}_detail_time.csv``.
"""

from __future__ import annotations

import collections
import csv
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["mi_run1", "mi_prof", "union_gaps", "legacy_cluster"]


def mi_run1(folder: Path) -> dict[str, Any]:
    """``wild/mi_run1`` read with json / csv.

    Returns
    -------
    dict
        ``windows`` {step: (start µs, end µs)} on the timeline's clock; ``tasks`` and
        ``phases`` (events of the other pids and of pid 10000); ``recorded`` the steps whose
        window lies inside the span of the device operators (first start to last end).
    """
    prof = folder / "profiler" if (folder / "profiler").is_dir() else folder
    events = json.loads((prof / "timeline_display_1.json").read_text(encoding="utf-8"))
    x = [e for e in events if e.get("ph") == "X"]
    tasks = [e for e in x if e["pid"] != 10000]
    phases = [e for e in x if e["pid"] == 10000]
    zero = float((prof / "min_cycle_counter_1.txt").read_text(encoding="utf-8").split()[0])
    with (prof / "step_trace_raw_1_detail_time.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()
                and int(r["step_num"]) > 0]
    windows = {int(r["step_num"]): ((int(r["start_point"]) - zero) / 100,
                                    (int(r["end_point"]) - zero) / 100) for r in rows}
    first = min(e["ts"] for e in tasks)
    last = max(e["ts"] + e["dur"] for e in tasks)
    recorded = sorted(s for s, (a, b) in windows.items() if a >= first and b <= last)
    return {"windows": windows, "tasks": tasks, "phases": phases, "recorded": recorded,
            "rows": rows}


def union_gaps(events: list[dict], lo: float, hi: float) -> list[float]:
    """The gaps between the merged busy intervals of the events that start in [lo, hi)."""
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if lo <= e["ts"] < hi)
    gaps, end = [], None
    for a, b in spans:
        if end is not None and a > end:
            gaps.append(a - end)
        end = b if end is None else max(end, b)
    return gaps


def mi_prof(root: Path) -> dict[int, dict[str, Any]]:
    """``wild/mi_prof`` read with json, per rank (``rank_id`` of ``info.json``).

    Returns
    -------
    dict
        {rank: {``iters`` {iteration: its "Iteration Time" event}, ``bounds`` {iteration:
        Data_aug Bound µs}, ``tracks`` {iteration: {Overlap Analysis track: µs summed}},
        ``tasks`` the device tasks of ``task_time_*``}}.
    """
    out = {}
    for device in sorted(root.glob("PROF_*/device_*")):
        info = json.loads(next(device.glob("info.json.[0-9]*")).read_text(encoding="utf-8"))
        tl = device / "timeline"
        iters: dict[int, dict] = {}
        bounds: dict[int, float] = {}
        for f in sorted(tl.glob("step_trace_*.json")):
            for e in json.loads(f.read_text(encoding="utf-8")):
                if e.get("cat") == "Iteration Time":
                    iters[int(e["args"]["Iteration ID"])] = e
                if e.get("cat") == "Data_aug Bound" and e.get("ph") == "t":
                    bounds[int(e["name"].rsplit(" ", 1)[1])] = e["args"]["Data_aug Bound(us)"]
        tracks: dict[int, dict[str, float]] = {}
        for f in sorted(tl.glob("msprof_*.json")):
            it = int(re.search(r"_(\d+)\.json$", f.name).group(1))
            ev = json.loads(f.read_text(encoding="utf-8"))
            pid = {e["pid"] for e in ev if e.get("name") == "process_name"
                   and e["args"]["name"] == "Overlap Analysis"}
            sums: dict[str, float] = collections.defaultdict(float)
            for e in ev:
                if e.get("ph") == "X" and e["pid"] in pid:
                    sums[e["name"]] += e["dur"]
            tracks[it] = dict(sums)
        tasks = [e for f in sorted(tl.glob("task_time_*.json"))
                 for e in json.loads(f.read_text(encoding="utf-8")) if e.get("ph") == "X"]
        out[int(info["rank_id"])] = {"iters": iters, "bounds": bounds, "tracks": tracks,
                                     "tasks": tasks}
    return out


def legacy_cluster(folder: Path) -> dict[int, list[dict[str, float]]]:
    """A legacy MindInsight cluster folder read with csv, per rank (the file name's suffix).

    Returns
    -------
    dict
        {rank: one dict per step, in order: the columns of
        ``ascend_cluster_analyse_*_{rank}.csv`` in ms (its last row, MindSpore's mean over
        the steps above it, left out), ``total_ms``, the step trace's ``total`` of that
        step (``step_trace_raw_{rank}_detail_time.csv``, 10 ns ticks; its rows of step
        ``-`` or 0 left out), and ``interval_ms``, its ``fp_point`` less its
        ``start_point`` (the step interval: from the previous step's end to the forward
        pass's start)}.
    """
    out: dict[int, list[dict[str, float]]] = {}
    for f in sorted(folder.glob("ascend_cluster_analyse_*.csv")):
        rank = int(f.stem.rsplit("_", 1)[1])
        with f.open(newline="", encoding="utf-8") as fh:
            rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
        rows = rows[:-1] if len(rows) > 1 else rows
        with (folder / f"step_trace_raw_{rank}_detail_time.csv").open(
                newline="", encoding="utf-8") as fh:
            trace = [r for r in csv.DictReader(fh)
                     if r["step_num"].strip().isdigit() and int(r["step_num"]) > 0]
        for row, t in zip(rows, trace, strict=True):
            row["total_ms"] = float(t["total"]) * 1e-5
            row["interval_ms"] = (int(t["fp_point"]) - int(t["start_point"])) * 1e-5
        out[rank] = rows
    return out
