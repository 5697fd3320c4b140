"""A device task that ``kernel_details.csv`` writes twice is counted once.

msprof-analyze's ``compute_advice_v2/kernel_details.csv`` (its unit-test input) has 29 rows
for 25 tasks: task 13792 four times, alike in every cell, and task 60763 twice, the second
renamed ``…_varlen`` with other shapes but the same stream, start and duration. Summed as
rows, the operators' time was 10,061.159 µs, 1,969.158 µs too much. The raw file is read
here with ``csv`` and ``Decimal`` (:func:`raw_ascend.distinct_tasks`), never through perfkit.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from raw_ascend import csv_rows, distinct_tasks
from shared_samples import shared_sample

import perfkit as pk
from perfkit.io.ascend.repeated_tasks import drop_repeated

ADVICE_V2 = "ascend/msprof-analyze-tests/compute_advice_v2"
#: The whole exports of the samples: no task written twice.
WHOLE = ["ascend/msprof-analyze-tests/compute_advice_v1/kernel_details.csv",
         "wild/msa_kernel_details/kernel_details.csv",
         *(f"ascend/msinsight-pt-level1/rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/"
           "kernel_details.csv" for r in (0, 1)),
         *(f"ascend/msinsight-pt-gpt3-old/test_rank_{r}/ASCEND_PROFILER_OUTPUT/"
           "kernel_details.csv" for r in (0, 1))]


def _us(rows: list[dict[str, str]]) -> Decimal:
    return sum((Decimal(r["Duration(us)"].strip()) for r in rows), Decimal(0))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.shared_samples
def test_compute_advice_v2_counts_each_task_once():
    folder = shared_sample(ADVICE_V2)
    rows = csv_rows(folder / "kernel_details.csv")
    tasks = distinct_tasks(rows)
    assert (len(rows), len(tasks)) == (29, 25)  # what the module docstring says
    repeated = Counter((r["Stream ID"], r["Task ID"]) for r in rows)
    assert sorted(n for n in repeated.values() if n > 1) == [2, 4]
    p = pk.load(folder, cache=False, progress=False)
    k = p.kernels
    assert len(k) == len(tasks)
    assert k["task_id"].tolist() == [float(r["Task ID"]) for r in tasks]  # the first rows
    assert k["name"].tolist() == [r["Name"] for r in tasks]
    assert Decimal(str(round(k["dur_us"].sum(), 6))) == _us(tasks)  # 8,092.001 µs
    by_type = k.groupby("type")["dur_us"].sum()
    for t in {r["Type"] for r in tasks}:
        assert by_type[t] == pytest.approx(float(_us([r for r in tasks if r["Type"] == t])),
                                           rel=1e-12)
    said = [n for n in p.meta.notes if "more than once" in n]
    extra = _us(rows) - _us(tasks)
    assert len(said) == 1 and said[0].startswith(
        f"kernels: kernel_details.csv records 2 tasks more than once (the same stream, "
        f"Task ID and start time): {len(rows) - len(tasks)} rows dropped, {extra:,.3f} µs "
        "of task time"), said
    # the renamed copy of 60763: the columns it differs in, as the file names them
    a, b = (r for r in rows if r["Task ID"] == "60763")
    differ = [c for c in a if a[c] != b[c]]
    assert "Name" in differ and "Start Time(us)" not in differ
    assert f"1 differs from it in {', '.join(differ[:-1])} and {differ[-1]})" in said[0]
    assert "3 are copies of it in every cell" in said[0]


@pytest.mark.shared_samples
@pytest.mark.parametrize("name", WHOLE)
def test_a_whole_export_keeps_every_row(name):
    path = shared_sample(name)
    rows = csv_rows(path)
    assert len(distinct_tasks(rows)) == len(rows)
    parse_dir = path.parent.parent if path.parent.name == "ASCEND_PROFILER_OUTPUT" \
        else path.parent
    p = pk.load(parse_dir, cache=False, progress=False)
    kernels = p.kernels if not hasattr(p, "ranks") else p[0].kernels
    assert not [n for n in p.meta.notes if "more than once" in n]
    assert len(kernels) == len(rows)


def test_what_is_one_task():
    # rows 1 and 3 repeat rows 0 and 2, and row 7 row 6 (no Task ID, but alike in every
    # cell, start included); the others differ in stream, Task ID, start or context: kept
    k = pd.DataFrame({
        "stream": [2.0, 2.0, 2.0, 2.0, 3.0, 2.0, 2.0, 2.0, np.nan],
        "task_id": [7.0, 7.0, 8.0, 8.0, 7.0, 9.0, np.nan, np.nan, 7.0],
        "start__ns": np.array([5, 5, 9, 9, 5, 5, 12, 12, 5], dtype=np.int64),
        "context_id": pd.array(["N/A", "N/A", "0", "0", "N/A", "N/A", "N/A", "N/A", "N/A"],
                               dtype="string"),
        "dur_us": [1.0, 1.0, 2.0, 2.5, 1.0, 1.0, 3.0, 3.0, 1.0],
        "name": pd.array(list("aabbcdeef"), dtype="string")})
    notes: list[str] = []
    out = drop_repeated(k, notes)
    assert out["name"].tolist() == list("abcdef")
    assert out.index.tolist() == list(range(6))
    assert notes == ["kernels: kernel_details.csv records 1 row without a stream or Task ID "
                     "more than once, alike in every cell (the same start time): dropped, "
                     "3.000 µs of task time, each task counted once",
                     "kernels: kernel_details.csv records 2 tasks more than once (the same "
                     "stream, Task ID and start time): 2 rows dropped, 3.500 µs of task time, "
                     "each task counted once, its first row kept (1 is a copy of it in every "
                     "cell; 1 differs from it in Duration(us))"]
    # rows without a Task ID that differ in any cell are two tasks
    k3 = k.assign(dur_us=[1.0, 1.0, 2.0, 2.5, 1.0, 1.0, 3.0, 3.5, 1.0])
    assert drop_repeated(k3, [])["name"].tolist() == list("abcdeef")
    # another context of the same task is another row of it
    k2 = k3.assign(context_id=pd.array(["0", "1", "0", "1", "N/A", "N/A", "N/A", "N/A",
                                        "N/A"], dtype="string"))
    notes = []
    assert drop_repeated(k2, notes) is k2 and notes == []
