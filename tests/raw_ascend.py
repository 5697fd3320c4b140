"""Independent readings of Ascend text exports for the tests: rows read with ``csv``,
busy time as a union of intervals worked out in plain Python (never through perfkit)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

__all__ = ["csv_rows", "union_us", "task_union_us"]


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
