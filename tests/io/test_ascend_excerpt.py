"""A ``kernel_details.csv`` read without its step trace that keeps a few of a step's tasks.

``ascend/msprof-analyze-tests/compute_advice_v2`` (msprof-analyze's unit-test data) keeps
a few rows of step 19, spread over 2.86 s: read as a whole step, it was a 2.86 s step
99.7 % idle, and a finding priced its gaps at 2.84 s a step. The tasks' ids say it is an
excerpt (:mod:`perfkit.io.ascend.excerpt`): counted here with ``csv`` from the file, the
rows keep 2 % of the tasks their stream ran between the first and the last of them, where
a whole file keeps most (``compute_advice_v1``, read the same way, 76 %).
"""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import sample

import perfkit as pk
import perfkit.analysis as A
from perfkit.cli.profile_text import profile_info_text
from perfkit.io.ascend.excerpt import MAX_KEPT, ids_run

TESTS = sample("ascend/msprof-analyze-tests")


def _kept_and_run(path: Path) -> tuple[int, int, float]:
    """(distinct tasks, tasks their streams ran from the first to the last, span µs) of a
    ``kernel_details.csv``'s one step, read with ``csv``: per stream, in order of start,
    1 plus each rise of the Task ID (a fall is a wrap: nothing counted)."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert len({r["Step Id"] for r in rows}) == 1
    streams: dict[str, set[tuple[Decimal, int]]] = {}
    ends, starts = [], []  # exact: epoch µs with ns digits do not fit a float
    for r in rows:
        start = Decimal(r["Start Time(us)"].strip())
        starts.append(start)
        ends.append(start + Decimal(r["Duration(us)"].strip()))
        if r["Task ID"].strip().isdigit():
            streams.setdefault(r["Stream ID"], set()).add((start, int(r["Task ID"])))
    kept = run = 0
    for tasks in streams.values():
        ids = [i for _, i in sorted(tasks)]
        kept += len(ids)
        run += 1 + sum(b - a for a, b in zip(ids, ids[1:], strict=False) if b > a)
    return kept, run, float(max(ends) - min(starts))


@pytest.mark.shared_samples
def test_an_excerpt_of_a_step_is_said_and_its_time_withheld() -> None:
    folder = TESTS / "compute_advice_v2"
    kept, run, span = _kept_and_run(folder / "kernel_details.csv")
    assert kept / run < MAX_KEPT and span > 2.8e6  # 25 of 1,238 over 2.86 s
    p = pk.load(folder, cache=False, progress=False)
    assert p.steps["tasks_recorded"].tolist() == [False]
    said = [n for n in p.meta.notes if "is an excerpt" in n]
    assert len(said) == 1 and f"{kept} tasks of the {run:,}" in said[0], said
    # the step's time and parts are withheld, not a 2.86 s step 99.7 % idle
    s = A.step_breakdown(p)
    assert s["step_us"].isna().all() and s["free_share"].isna().all()
    text = profile_info_text(p)
    assert ("measured step time: unknown (the time of step 19 is withheld: its device "
            "tasks are an excerpt") in text and "99.7 %" not in text
    rules = {f.rule for f in pk.advise(p)}
    assert not rules & {"long_gaps", "host_bound"}  # no gap is priced as idle time
    assert "cut_task_lists" in rules


@pytest.mark.shared_samples
def test_a_whole_file_keeps_its_step() -> None:
    folder = TESTS / "compute_advice_v1"
    kept, run, span = _kept_and_run(folder / "kernel_details.csv")
    assert kept / run > 0.5  # 572 of 752
    p = pk.load(folder, cache=False, progress=False)
    assert "tasks_recorded" not in p.steps.columns
    assert not [n for n in p.meta.notes if "is an excerpt" in n]
    s = A.step_breakdown(p)
    assert float(s["step_us"].iloc[0]) == pytest.approx(span, abs=0.01)


def test_a_fall_of_the_task_id_counts_no_task() -> None:
    # stream 2: ids 10, 12 (2 run), a wrap to 3 (unknown: nothing), 5 (2 run); stream 3:
    # one task (1 run); the row repeated counts once
    k = pd.DataFrame({"step": 1, "stream": [2, 2, 2, 2, 2, 3],
                      "task_id": [10.0, 12.0, 3.0, 5.0, 5.0, 7.0],
                      "start_us": [0.0, 1.0, 2.0, 3.0, 3.0, 0.5]})
    got = ids_run(k)
    assert got["kept"].tolist() == [5] and got["run"].tolist() == [1 + 2 + 2 + 1]
    assert np.isfinite(got["run"]).all()
