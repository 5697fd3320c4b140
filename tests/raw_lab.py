"""Readings of a lab pack's files for the checker-tolerance tests, made without perfkit:
rank 0's row of a student's step_trace_time.csv (csv module), a figure as the pages show
it (three significant digits), how far a share worked out from two shown figures can lie
from the exact one, and a question's entry in a student's check data and sheet."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from perfkit.lab.key import read_check

__all__ = ["rank0_row", "shown", "worst_reading", "carried", "asked", "step_wall"]


def rank0_row(profile: Path) -> dict[str, float]:
    """Rank 0's single row of step_trace_time.csv (rank from profiler_info_<rank>.json)."""
    for d in profile.iterdir():
        if (d / "profiler_info_0.json").is_file():
            with (d / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").open(newline="") as f:
                rows = list(csv.DictReader(f))
            assert len(rows) == 1
            return {k: float(v) for k, v in rows[0].items()}
    raise AssertionError(f"no rank 0 in {profile}")


def shown(value: float) -> float:
    """``value`` to three significant digits, as the step table shows it."""
    return float(f"{value:.3g}")


def worst_reading(part: float, wall: float) -> float:
    """How far, in points, ``part / wall`` worked out from the two figures to three
    significant digits can lie from the exact share (by hand: half a unit of the third
    digit of each, pushing the share up and then down)."""
    def half(v: float) -> float:
        return 0.5 * 10 ** (math.floor(math.log10(v)) - 2)
    exact = 100 * part / wall
    return max(100 * (part + half(part)) / (wall - half(wall)) - exact,
               exact - 100 * (part - half(part)) / (wall + half(wall)))


def carried(pack: Path, student: str, qid: str) -> tuple[dict, dict]:
    """The question's entry in the student's own check data and in their sheet."""
    check = read_check(pack / student)[qid]
    sheet = json.loads((pack / student / "lab.json").read_text())
    return check, next(q for q in sheet["questions"] if q["id"] == qid)


def asked(packs: Iterable[Path], qid: str
          ) -> Iterator[tuple[Path, str, dict[str, Any], dict[str, float]]]:
    """(pack, student, the key's answer entry, rank 0's step row) for every student of
    ``packs`` the key asks question ``qid``."""
    for pack in packs:
        key = json.loads((pack / "instructor" / "key.json").read_text())
        for student, entry in key["entries"].items():
            answer = entry["answers"].get(qid)
            if answer is not None:
                yield pack, student, answer, rank0_row(
                    pack / student / entry["settings"]["job"]["path"])


def step_wall(row: dict[str, float]) -> float:
    """The step's wall time from its step_trace_time.csv row: computing, communication not
    overlapped, free and preparing add up to it."""
    return row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"] + \
        row["Preparing"]
