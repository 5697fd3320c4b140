"""Independent readings of Ascend text exports for the tests: rows read with ``csv``,
busy time as a union of intervals worked out in plain Python (never through perfkit;
:func:`union_us` serves any trace)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

__all__ = ["csv_rows", "union_us", "task_union_us", "covered_share", "keep_last_tasks"]


def csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file, as dicts by header name."""
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


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
