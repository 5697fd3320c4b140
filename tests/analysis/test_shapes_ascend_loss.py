""":func:`read_model` counts the micro-batches of a torch_npu profile from its loss kernels.

A model without an embedding (the CNN of ``ascend/msinsight-pt-level1``) has no lookup to
count, so the micro-batches come from the loss. On torch_npu, ``F.cross_entropy`` runs two
device kernels on one stream: ``LogSoftmaxV2`` (``aclnnLogSoftmax_..._LogSoftmaxV2``), then
``NLLLoss`` (``aclnnNLLLoss_..._NLLLoss``, after a ``MemSet``); the backward runs
``NLLLossGrad`` and ``LogSoftmaxGrad``. As for PyTorch's ``aten::_log_softmax``, a
``LogSoftmaxV2`` is a loss only when ``NLLLoss`` follows it.

The expected counts are read here from the raw files: the forward ``NLLLoss`` kernels
(``Type`` ``NLLLoss``; not ``NLLLossGrad``, nor a kernel of ``aclnnNLLLossBackward``) that
start inside each ``ProfilerStep#`` span of ``trace_view.json`` (csv and json modules), or
inside each ``STEP_TIME`` row of the ``.db`` export (sqlite3).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from shared_samples import PT_DB_LEVEL1, PT_GPT3_OLD, PT_LEVEL1, sample, writable_copy

import perfkit as pk
from perfkit.analysis._util import table
from perfkit.analysis.shapes import read_model
from perfkit.profile import Profile

pytestmark = pytest.mark.shared_samples

_OUT = "ASCEND_PROFILER_OUTPUT"


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _is_forward_nll(head: list[str], row: list[str]) -> bool:
    name, typ = row[head.index("Name")], row[head.index("Type")]
    return typ == "NLLLoss" and "grad" not in name.lower() and "backward" not in name.lower()


def _steps(rank_dir: Path) -> list[tuple[float, float]]:
    """The ``ProfilerStep#`` spans (µs) of ``trace_view.json``, checked against the steps
    that ``step_trace_time.csv`` lists."""
    events = json.loads((rank_dir / _OUT / "trace_view.json").read_text(encoding="utf-8"))
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = {int(e["name"].split("#")[1]): (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
             for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    head, rows = _rows(rank_dir / _OUT / "step_trace_time.csv")
    assert sorted(spans) == sorted(int(r[head.index("Step")]) for r in rows)
    return list(spans.values())


def _nll_per_step_csv(rank_dir: Path) -> list[int]:
    """Forward ``NLLLoss`` kernels of ``kernel_details.csv`` in each step."""
    head, rows = _rows(rank_dir / _OUT / "kernel_details.csv")
    starts = [float(r[head.index("Start Time(us)")].strip()) for r in rows
              if _is_forward_nll(head, r)]
    return [sum(a <= t < b for t in starts) for a, b in _steps(rank_dir)]


def _nll_per_step_db(rank_dir: Path) -> list[int]:
    """Forward ``NLLLoss`` tasks of the ``.db`` export in each ``STEP_TIME`` row."""
    db = next((rank_dir / _OUT).glob("ascend_pytorch_profiler_*.db"))
    with sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True) as conn:
        starts = [s for s, name in conn.execute(
            "SELECT t.startNs, n.value FROM COMPUTE_TASK_INFO c "
            "JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS o ON o.id = c.opType "
            "JOIN TASK t ON t.globalTaskId = c.globalTaskId WHERE o.value = 'NLLLoss'")
            if "grad" not in name.lower() and "backward" not in name.lower()]
        steps = list(conn.execute("SELECT startNs, endNs FROM STEP_TIME"))
    assert steps
    return [sum(a <= t < b for t in starts) for a, b in steps]


def _expected(per_rank: list[list[int]]) -> int | None:
    counts = {n for steps in per_rank for n in steps}
    assert len(counts) == 1  # every rank and step runs the same number
    n = counts.pop()
    return n or None


@pytest.mark.parametrize(("name", "count"), [(PT_LEVEL1, _nll_per_step_csv),
                                             (PT_DB_LEVEL1, _nll_per_step_db)],
                         ids=["text", "db"])
def test_a_cnn_on_torch_npu_reads_its_micro_batches_from_the_loss_kernels(
        name: str, count: object) -> None:
    root = sample(name)
    expected = _expected([count(d) for d in sorted(root.glob("rank*_ascend_pt"))])
    assert expected == 1  # the raw profile: one cross entropy per step on each rank
    r = read_model(pk.load(root, cache=False, progress=False))
    assert r.source == "kernels"
    assert r.get("num_micro_batches") == expected, r.details["num_micro_batches"]
    assert f"{expected} loss kernel per step" in r.details["num_micro_batches"]


def _edit(tmp_path: Path, kind: str) -> Path:
    """Rank 0 of ``msinsight-pt-level1`` with its cross entropy's forward kernels edited:

    * ``"head"``: the ``NLLLoss`` kernel removed (a ``LogSoftmaxV2`` alone: a classifier's
      prediction, or log-probabilities for a custom loss);
    * ``"metric"``: a second ``LogSoftmaxV2`` 20 µs after the ``NLLLoss`` (a metric);
    * ``"twice"``: the ``LogSoftmaxV2`` + ``NLLLoss`` pair run again 30 µs and 60 µs after
      the ``NLLLoss`` (two micro-batches), before the backward begins.
    """
    root = writable_copy(sample(PT_LEVEL1) / "rank0_ascend_pt", tmp_path / "rank0_ascend_pt")
    path = root / _OUT / "kernel_details.csv"
    head, rows = _rows(path)
    typ, start = head.index("Type"), head.index("Start Time(us)")
    lsm = next(r for r in rows if r[typ] == "LogSoftmaxV2")
    nll = next(r for r in rows if _is_forward_nll(head, r))
    at = float(nll[start].strip())

    def moved(row: list[str], by: float) -> list[str]:
        return row[:start] + [f"{at + by:.3f}"] + row[start + 1:]

    if kind == "head":
        rows.remove(nll)
    elif kind == "metric":
        rows.append(moved(lsm, 20))
    else:
        rows += [moved(lsm, 30), moved(nll, 60)]
    rows.sort(key=lambda r: float(r[start].strip()))
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([head, *rows])
    return root


@pytest.mark.parametrize("kind", ["head", "metric", "twice"])
def test_a_log_softmax_kernel_is_a_micro_batch_only_before_an_nll_loss_kernel(
        tmp_path: Path, kind: str) -> None:
    root = _edit(tmp_path, kind)
    head, rows = _rows(root / _OUT / "kernel_details.csv")
    lsm = [r for r in rows if r[head.index("Type")] == "LogSoftmaxV2"]
    assert len(lsm) == (2 if kind != "head" else 1)  # the edit is in the raw file
    expected = _expected([_nll_per_step_csv(root)])
    r = read_model(pk.load(root, cache=False, progress=False))
    assert r.get("num_micro_batches") == expected, r.details["num_micro_batches"]
    if expected is None:
        assert "no embedding lookup or loss kernel" in r.details["num_micro_batches"]


def test_the_gpt3_fixture_still_counts_its_embedding_lookups() -> None:
    """Where the profile has an embedding lookup (``GatherV2`` on the first stage), the
    loss kernels are not what counts: one lookup per step in the raw csv."""
    root = sample(PT_GPT3_OLD)
    per_step = []
    for d in sorted(root.glob("test_rank_*")):
        head, rows = _rows(d / _OUT / "kernel_details.csv")
        gathers = [r for r in rows if r[head.index("Type")] == "GatherV2"]
        per_step += [len(gathers)] if gathers else []
    assert per_step == [1]
    profile = pk.load(root, cache=False, progress=False)
    # its one step's device tasks were recorded only in part: no count per step is read
    # from that fragment (tests/test_job_recorded_steps.py)
    r = read_model(profile)
    assert r.get("num_micro_batches") is None
    assert "not counted per step" in r.details["num_micro_batches"]
    # were the step recorded in full, its one lookup, not the loss kernels, would count
    steps = table(profile, "steps").drop(columns="tasks_recorded")
    whole = Profile(profile.meta, lambda name: steps if name == "steps" else
                    table(profile, name))
    r = read_model(whole)
    assert r.get("num_micro_batches") == 1
    assert "embedding lookup" in r.details["num_micro_batches"]
