"""The operator rules read only the steps whose device tasks were recorded in full: checked
against the raw kernel_details.csv and step_trace_time.csv (read here with csv).

``ascend/msinsight-pt-gpt3-old`` keeps 21 and 22 tasks of a step whose busy time they cover
16.8 % and 5.1 % of: an element-wise chain found among them (it used to be reported, 6 µs
per step) is a fragment's, so no operator finding is made, and one ``info`` finding says
why. Where one rank's list is cut and another's is whole (``ascend/msinsight-pt-level1``
with rank 1's list cut to its last 20 tasks), the figures per step are the whole rank's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from raw_ascend import csv_rows, keep_last_tasks, task_union_us
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample, writable_copy

import perfkit as pk

pytestmark = pytest.mark.shared_samples
OLD = sample(PT_GPT3_OLD)
LEVEL1 = sample(PT_LEVEL1)
#: Tasks the cut copy of rank 1 keeps (its last: they hold copies and all-reduces).
_KEEP = 20


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))




def _busy_us(out: Path) -> float:
    """The step's busy time: Computing + Communication(Not Overlapped) of the step trace
    (both lists hold communication tasks)."""
    (step,) = csv_rows(out / "step_trace_time.csv")
    return float(step["Computing"]) + float(step["Communication(Not Overlapped)"])


def test_a_cut_kernel_list_gives_no_operator_finding_and_says_why():
    types = []
    for rank in (0, 1):
        out = OLD / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT"
        tasks = csv_rows(out / "kernel_details.csv")
        assert task_union_us(tasks) < 0.2 * _busy_us(out)  # a fragment of the step
        types.append([r["Type"] for r in tasks])
    # the fragment holds element-wise kernels in a row (a chain the rule would price)
    assert any(t[i:i + 3] == ["Sub", "LogicalNot", "Cast"] for t in types
               for i in range(len(t)))
    found = pk.advise(pk.load(OLD, cache=False, progress=False))
    ops = [f for f in found if f.area == "operators"]
    assert [f.rule for f in ops] == ["cut_task_lists"]
    (f,) = ops
    assert not f.measured and f.severity == "info"
    assert "device tasks recorded in full for no step of 1" in f.evidence


def _with_rank1_cut(tmp_path: Path) -> Path:
    root = writable_copy(LEVEL1, tmp_path / "level1")
    path = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    keep_last_tasks(path, _KEEP)
    return root


def _copies_us(out: Path) -> float:
    return sum(float(r["Duration(us)"]) for r in csv_rows(out / "kernel_details.csv")
               if r["Type"] == "TensorMove")


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_figures_per_step_are_over_the_ranks_whose_tasks_were_recorded(tmp_path):
    outs = [LEVEL1 / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" for r in (0, 1)]
    # the whole export: the copies' time per step is the mean of the two ranks' (one step)
    whole = {f.rule: f for f in pk.advise(pk.load(LEVEL1, cache=False, progress=False))}
    assert whole["redundant_copies"].ms_per_step * 1e3 == pytest.approx(
        (_copies_us(outs[0]) + _copies_us(outs[1])) / 2, rel=1e-9)
    root = _with_rank1_cut(tmp_path)
    cut = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    assert len(csv_rows(cut / "kernel_details.csv")) == _KEEP
    assert any(r["Accelerator Core"] == "HCCL" for r in csv_rows(cut / "kernel_details.csv"))
    assert task_union_us(csv_rows(cut / "kernel_details.csv")) < 0.5 * _busy_us(cut)
    assert _copies_us(cut) > 0  # the fragment holds copies that would count
    found = {f.rule: f for f in pk.advise(pk.load(root, cache=False, progress=False))}
    assert "cut_task_lists" not in found
    copies = found["redundant_copies"]
    # rank 0's copies over rank 0's step alone, not with rank 1's fragment over two
    assert copies.ms_per_step * 1e3 == pytest.approx(_copies_us(outs[0]), rel=1e-9)
    assert "counted over the steps whose device tasks were recorded in full" \
        in copies.evidence


def _tiny_storm(rows: list[dict[str, str]], threshold_us: float = 10.0) -> tuple[float, int]:
    """(share of tiny tasks, longest run of tiny tasks back to back on one stream) of a
    kernel_details.csv's tasks, communication (HCCL) left out: tiny_kernels' storm test,
    worked out here."""
    tasks = [r for r in rows if r["Accelerator Core"] != "HCCL"]
    tiny = [float(r["Duration(us)"]) < threshold_us for r in tasks]
    longest = 0
    for stream in {r["Stream ID"] for r in tasks}:
        run = 0
        for _task, t in sorted(((r, t) for r, t in zip(tasks, tiny, strict=True)
                            if r["Stream ID"] == stream),
                           key=lambda rt: float(rt[0]["Start Time(us)"])):
            run = run + 1 if t else 0
            longest = max(longest, run)
    return sum(tiny) / len(tasks), longest


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_host_finding_reads_no_tiny_kernel_storm_from_a_fragment(tmp_path):
    root = writable_copy(LEVEL1, tmp_path / "level1")
    cut = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    keep_last_tasks(cut / "kernel_details.csv", 8)
    assert task_union_us(csv_rows(cut / "kernel_details.csv")) < 0.5 * _busy_us(cut)
    # the fragment's last 8 tasks are half tiny (a storm by tiny_kernels' test, share >=
    # 0.5); rank 1's whole step is not (share < 0.5, no run of 50)
    share, _run = _tiny_storm(csv_rows(cut / "kernel_details.csv"))
    assert share >= 0.5
    whole = LEVEL1 / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    share, run = _tiny_storm(csv_rows(whole / "kernel_details.csv"))
    assert share < 0.5 and run < 50
    found = {f.rule: f for f in pk.advise(pk.load(root, cache=False, progress=False))}
    host = found["host_bound"]  # the gaps of rank 1's step
    assert "no step of 1 on rank 0; step 50 of 1 on rank 1" in host.evidence
    assert "shorter than 10 µs" not in host.evidence
