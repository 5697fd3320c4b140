"""Independent readings of Ascend text exports for the tests: rows read with ``csv``,
busy time as a union of intervals worked out in plain Python (never through perfkit;
:func:`union_us` serves any trace)."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

__all__ = ["csv_rows", "distinct_tasks", "union_us", "task_union_us", "covered_share",
           "keep_last_tasks", "blank_task_ids",
           "HCCL_SIZES", "REDUCTION", "hccl_reductions", "cann_iterations", "cann_tasks"]

#: Bytes per element of HCCL's type names, written out for the tests.
HCCL_SIZES = {"fp32": 4, "fp16": 2, "bfp16": 2, "fp64": 8}
#: Names of the collectives that reduce (all-reduce, reduce-scatter).
REDUCTION = re.compile(r"all_?reduce|reduce_?scatter", re.I)


def hccl_reductions(root: Path) -> tuple[dict[str, float], Counter]:
    """(bytes moved, collectives) per HCCL type name as the DB stores it, over the
    reductions of every rank's ``ascend_pytorch_profiler_*.db`` under ``root``, read with
    ``sqlite3`` (``COMMUNICATION_OP``'s ``count`` × the type's size)."""
    moved: dict[str, float] = defaultdict(float)
    count: Counter = Counter()
    for db in sorted(root.glob("*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")):
        con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        try:
            rows = con.execute(
                "select s.value, e.name, o.count from COMMUNICATION_OP o "
                "join STRING_IDS s on s.id = o.opName "
                "join ENUM_HCCL_DATA_TYPE e on e.id = o.dataType").fetchall()
        finally:
            con.close()
        for name, dtype, n in rows:
            if REDUCTION.search(name) and dtype.lower() in HCCL_SIZES:
                moved[dtype] += float(n) * HCCL_SIZES[dtype.lower()]
                count[dtype] += 1
    return moved, count


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file, as dicts by header name."""
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def distinct_tasks(rows: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    """The first row of each device task of ``kernel_details.csv`` rows: a stream runs one
    task at a time, so rows with the same Stream ID, Task ID and start time (its text,
    spaces stripped) are one task written again; a row lacking one of them is kept."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for r in rows:
        key = (r["Stream ID"].strip(), r["Task ID"].strip(), r["Start Time(us)"].strip())
        if key[1].isdigit() and key[0] and key[2] and key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


def union_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Time covered by the intervals (overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def task_union_us(rows: Iterable[dict[str, str]]) -> float:
    """Time covered by ``kernel_details.csv`` rows' [start, start + duration]."""
    return union_us((float(r["Start Time(us)"]),
                     float(r["Start Time(us)"]) + float(r["Duration(us)"])) for r in rows)


def covered_share(out: Path) -> float:
    """The union of a one-step export's tasks (``kernel_details.csv`` in ``out``) over its
    step's busy time, Computing + Communication(Not Overlapped) of
    ``step_trace_time.csv``."""
    (step,) = csv_rows(out / "step_trace_time.csv")
    return task_union_us(csv_rows(out / "kernel_details.csv")) / (
        float(step["Computing"]) + float(step["Communication(Not Overlapped)"]))


def keep_last_tasks(path: Path, keep: int) -> None:
    """Cut a ``kernel_details.csv`` (a copy) to its header and its last ``keep`` rows."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:1] + lines[-keep:]), encoding="utf-8")


def blank_task_ids(path: Path) -> None:
    """Rewrite a ``kernel_details.csv`` (a copy) with "N/A" in its Task ID column, so that
    nothing tells a trimmed list to be an excerpt (:mod:`perfkit.io.ascend.excerpt`)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    at = rows[0].index("Task ID")
    for r in rows[1:]:
        if len(r) > at:
            r[at] = "N/A"
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


def _cann_events(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else data["traceEvents"]


def cann_iterations(timeline: Path) -> dict[int, tuple[float, float, float]]:
    """Iteration id -> (start, Iteration Time, Data_aug Bound) µs of a raw CANN
    ``timeline`` folder's ``step_trace_*.json`` files, read with ``json``."""
    out: dict[int, list[float]] = {}
    bound: dict[int, float] = {}
    for f in sorted(timeline.glob("step_trace_*.json")):
        for e in _cann_events(f):
            if e.get("ph") == "X" and e.get("cat") == "Iteration Time":
                out[int(e["args"]["Iteration ID"])] = [float(e["ts"]), float(e["dur"])]
            elif e.get("ph") == "t" and e.get("cat") == "Data_aug Bound":
                bound[int(e["name"].rsplit(" ", 1)[1])] = float(e["args"]["Data_aug Bound(us)"])
    return {i: (a, d, bound.get(i, 0.0)) for i, (a, d) in out.items()}


def cann_tasks(timeline: Path) -> list[dict]:
    """The device tasks (process "Ascend Hardware", with a "Task Type") of a raw CANN
    ``timeline`` folder's ``task_time_*`` and ``msprof_*`` files, each once (the
    ``msprof_`` file of an iteration repeats its ``task_time_`` file's tasks)."""
    seen: dict[tuple, dict] = {}
    for f in sorted(timeline.glob("*.json")):
        if not f.name.startswith(("task_time_", "msprof_")):
            continue
        events = _cann_events(f)
        pids = {e["pid"] for e in events if e.get("name") == "process_name"
                and e["args"].get("name") == "Ascend Hardware"}
        for e in events:
            if e.get("ph") == "X" and e.get("pid") in pids and "Task Type" in e.get("args", {}):
                seen.setdefault((e["tid"], e["ts"], e["name"]), e)
    return list(seen.values())
