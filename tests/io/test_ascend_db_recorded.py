"""The DB export's steps whose device tasks were recorded only in part: checked against
the databases read here with sqlite3 (no perfkit code).

``ascend/msinsight-pt-db-level1`` is a full export: the union of step 50's tasks (TASK
joined to COMPUTE_TASK_INFO, and COMMUNICATION_OP) covers the busy time that analysis.db's
StepTraceTime gives it (``computing + communication_not_overlapped``) to the nanosecond. A
copy whose TASK table keeps only the step's first 20 compute tasks (the size of
``ascend/msinsight-pt-gpt3-old``'s cut kernel lists) is marked ``tasks_recorded`` False,
with a note giving the figures, as the text export is (:mod:`perfkit.io.ascend.recorded`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from shared_samples import PT_DB_LEVEL1, sample, writable_copy

from perfkit.io.ascend import db as ascend_db

pytestmark = pytest.mark.shared_samples
DB = sample(PT_DB_LEVEL1)
#: Compute tasks the cut copy keeps (those that start first).
_KEEP = 20


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    """Time covered by the intervals (overlaps counted once)."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or b > end:
            total += b - (a if end is None else max(a, end))
            end = b
    return total


def _query(path: Path, sql: str, *args: int) -> list[tuple]:
    """The rows of ``sql`` on the database ``path``, opened read-only and immutable (so
    that nothing is written beside a shared sample: no -shm / -wal files)."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _raw(out: Path, rank: int) -> tuple[int, int, float, float, int]:
    """(time covered by step 50's tasks in ns, the number of its communication ops, its
    Computing and Communication(Not Overlapped) of StepTraceTime in µs, compute tasks)."""
    db = out / f"ascend_pytorch_profiler_{rank}.db"
    ((s0, s1),) = _query(db, "select startNs, endNs from STEP_TIME where id = 50")
    compute = _query(db, "select t.startNs, t.endNs from TASK t join COMPUTE_TASK_INFO c "
                     "on c.globalTaskId = t.globalTaskId where t.startNs between ? and ?",
                     s0, s1)
    comm = _query(db, "select startNs, endNs from COMMUNICATION_OP "
                  "where startNs between ? and ?", s0, s1)
    ((computing, not_overlapped),) = _query(
        out / "analysis.db", "select computing, communication_not_overlapped "
        "from StepTraceTime where step = '50'")
    return _union_ns(compute + comm), len(comm), computing, not_overlapped, len(compute)


def _cut(rank: int, tmp_path: Path) -> Path:
    """A copy of the rank whose TASK table keeps the step's first compute tasks only (and
    whose communication ops after them are gone too): a list cut short."""
    folder = writable_copy(DB / f"rank{rank}_ascend_pt", tmp_path / f"rank{rank}_ascend_pt")
    out = folder / "ASCEND_PROFILER_OUTPUT"
    con = sqlite3.connect(out / f"ascend_pytorch_profiler_{rank}.db")
    try:
        (cutoff,) = con.execute(
            "select t.startNs from TASK t join COMPUTE_TASK_INFO c "
            "on c.globalTaskId = t.globalTaskId order by t.startNs limit 1 offset ?",
            (_KEEP,)).fetchone()
        con.execute("delete from TASK where startNs >= ?", (cutoff,))
        con.execute("delete from COMMUNICATION_OP where startNs >= ?", (cutoff,))
        con.commit()
        # into the file itself, not a write-ahead log beside it (the reader opens the
        # export as immutable, as the profiler left it)
        con.execute("pragma journal_mode=delete")
    finally:
        con.close()
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_a_full_db_export_leaves_its_steps_recorded(rank):
    out = DB / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    covered, n_comm, computing, not_overlapped, _ = _raw(out, rank)
    assert n_comm > 0
    assert covered / 1000 == pytest.approx(computing + not_overlapped, rel=1e-6)
    meta, tables = ascend_db.parse(out / f"ascend_pytorch_profiler_{rank}.db")
    assert "tasks_recorded" not in tables["steps"].columns
    assert not [n for n in meta.notes if "tasks_recorded" in n]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_db_whose_task_table_was_cut_marks_its_step_recorded_in_part(rank, tmp_path):
    out = _cut(rank, tmp_path)
    covered, n_comm, computing, _, n_compute = _raw(out, rank)
    assert n_compute == _KEEP
    assert n_comm == 0  # no communication task left: the busy time is the computing
    busy = computing
    assert covered / 1000 < 0.5 * busy
    meta, tables = ascend_db.parse(out / f"ascend_pytorch_profiler_{rank}.db")
    assert tables["steps"]["step"].tolist() == [50]
    assert tables["steps"]["tasks_recorded"].tolist() == [False]
    said = [n for n in meta.notes if "tasks_recorded" in n]
    assert len(said) == 1
    assert f"ascend_pytorch_profiler_{rank}.db (TASK table)" in said[0]
    assert "analysis.db (StepTraceTime table)" in said[0]
    assert (f"step 50: {covered / 1e6:,.1f} ms of {busy / 1000:,.1f} ms, "
            f"{100 * covered / 1000 / busy:.1f} %") in said[0]
