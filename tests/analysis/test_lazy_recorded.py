"""A lazy (Dask) cluster reads only the steps whose device tasks were recorded in full, and
only the AI CPU tasks inside steps, as the eager cluster does: checked against the raw
kernel_details.csv and step_trace_time.csv (read here with csv).

- ``ascend/msinsight-pt-gpt3-old`` keeps 21 and 22 tasks of a step that they cover a small
  part of: the lazy cluster's operator rules priced an element-wise chain of that fragment,
  where the eager cluster's give one ``cut_task_lists`` info finding.
- ``ascend/msinsight-pt-level1`` with rank 1's list cut to its last 20 tasks: the tasks the
  operator analyses read are rank 0's alone, and so are their notes (the emptied rank 1
  said "no device tasks" of the lazy cluster), the steps recompute_evidence names, and the
  operator totals per (rank, step) that compare_profiles and the journal read.
- ``ascend/msinsight-pt-gpt3-old`` (without its step trace) with rank 0's task list (two
  AI CPU Cast tasks in step 2) given no step: the lazy cluster listed those tasks of no
  step as AI CPU operators (its top_operators keeps the tasks of a rank with no step at
  all); and the other way round, rank 1 running rank 0's list with no step beside rank 0.
  Where every AI CPU task is left out (of no step, or in gpt3-old's cut step) the first
  note counts them, rather than saying the profile has none.
"""

from __future__ import annotations

import csv
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from raw_ascend import blank_task_ids, csv_rows, keep_last_tasks, task_union_us
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample, writable_copy

import perfkit as pk
from perfkit import analysis as A
from perfkit.analysis.compare import operator_totals
from perfkit.analysis.recorded import recorded_profile

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = [pytest.mark.slow, pytest.mark.shared_samples]
OLD = sample(PT_GPT3_OLD)
LEVEL1 = sample(PT_LEVEL1)
_OUT = "ASCEND_PROFILER_OUTPUT"


def _both(path: Path, client: Any) -> tuple[Any, Any]:
    """(eager, lazy) cluster of ``path``."""
    lazy = pk.load(path, engine="dask", client=client, progress=False)
    assert lazy.lazy
    return pk.load(path, cache=False, progress=False), lazy


def _busy_us(out: Path) -> float:
    (step,) = csv_rows(out / "step_trace_time.csv")
    return float(step["Computing"]) + float(step["Communication(Not Overlapped)"])


def _ops(found: list[Any]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.evidence) for f in found if f.area == "operators"]


def test_lazy_cluster_leaves_cut_steps_out_of_the_operator_rules(dask_client):
    for rank in (0, 1):  # each rank's one step is a fragment: no step recorded in full
        out = OLD / f"test_rank_{rank}" / _OUT
        assert task_union_us(csv_rows(out / "kernel_details.csv")) < 0.2 * _busy_us(out)
    eager, lazy = _both(OLD, dask_client)
    tasks = recorded_profile(lazy)
    assert tasks.lazy and len(tasks.kernels.compute()) == 0
    assert len(lazy.kernels.compute()) == sum(  # the cluster itself keeps every task
        len(csv_rows(OLD / f"test_rank_{r}" / _OUT / "kernel_details.csv")) for r in (0, 1))
    found = _ops(pk.advise(lazy))
    assert [f[0] for f in found] == ["cut_task_lists"]
    assert found == _ops(pk.advise(eager))


def _level1_rank1_cut(tmp_path: Path) -> Path:
    """A copy of msinsight-pt-level1 whose rank 1 keeps the last 20 tasks of its list."""
    root = writable_copy(LEVEL1, tmp_path / "level1")
    keep_last_tasks(root / "rank1_ascend_pt" / _OUT / "kernel_details.csv", 20)
    return root


def test_lazy_cluster_reads_the_whole_rank_beside_a_cut_one(tmp_path, dask_client):
    root = _level1_rank1_cut(tmp_path)
    whole = csv_rows(LEVEL1 / "rank0_ascend_pt" / _OUT / "kernel_details.csv")
    eager, lazy = _both(root, dask_client)
    for cluster in (eager, lazy):
        tasks = recorded_profile(cluster)
        kept = tasks.kernels.compute() if cluster.lazy else tasks.kernels
        assert len(kept) == len(whole) and set(kept["rank"]) == {0}
        # what the per-rank analyses read (map_ranks on the lazy cluster) too
        chains = A.elementwise_chains(tasks)
        assert chains.empty or set(chains["rank"]) == {0}
    copies_us = sum(float(r["Duration(us)"]) for r in whole if r["Type"] == "TensorMove")
    found = {f.rule: f for f in pk.advise(lazy)}
    assert found["redundant_copies"].ms_per_step * 1e3 == pytest.approx(copies_us, rel=1e-9)
    assert _ops(found.values()) == _ops(pk.advise(eager))


def _ai_cpu_raw(path: Path) -> tuple[int, float]:
    """(count, total µs) of the AI CPU tasks with a step in a kernel_details.csv."""
    rows = [r for r in csv_rows(path) if r["Accelerator Core"] == "AI_CPU" and r["Step Id"]]
    return len(rows), sum(float(r["Duration(us)"]) for r in rows)


@pytest.mark.parametrize("no_step", [0, 1])
def test_ai_cpu_operators_count_only_tasks_in_steps_on_a_lazy_cluster(tmp_path, dask_client,
                                                                      no_step):
    root = writable_copy(OLD, tmp_path / "gpt3",
                         ignore=shutil.ignore_patterns("step_trace_time.csv"))
    # rank ``no_step`` runs rank 0's tasks, none of them in a step; the other rank its own
    lines = (OLD / "test_rank_0" / _OUT / "kernel_details.csv").read_text(
        encoding="utf-8").splitlines(keepends=True)
    lines[1:] = [line[line.index(","):] for line in lines[1:]]  # the Step Id left empty
    (root / f"test_rank_{no_step}" / _OUT / "kernel_details.csv").write_text(
        "".join(lines), encoding="utf-8")
    paths = [root / f"test_rank_{r}" / _OUT / "kernel_details.csv" for r in (0, 1)]
    for path in paths:  # rank 0's list is trimmed: without Task IDs it reads as whole
        blank_task_ids(path)
    raw = [_ai_cpu_raw(p) for p in paths]
    count, total = raw[0][0] + raw[1][0], raw[0][1] + raw[1][1]
    assert raw[no_step] == (0, 0.0)
    # rank 0's two Cast tasks on the AI CPU in step 2; rank 1 has none
    assert count == (2 if no_step == 1 else 0)
    pairs = len({(r, row["Step Id"]) for r, p in enumerate(paths) for row in csv_rows(p)
                 if row["Step Id"]})
    eager, lazy = _both(root, dask_client)
    for cluster in (eager, lazy):
        ai = A.ai_cpu_operators(cluster)
        if count == 0:  # the AI CPU tasks of no step are not listed, and the note says so
            n_cpu = sum(r["Accelerator Core"] == "AI_CPU" for p in paths for r in csv_rows(p))
            assert ai.empty and ai.attrs["notes"][0] == (
                f"no AI CPU operator among the tasks counted: the profile's {n_cpu} AI CPU "
                f"tasks are left out, {n_cpu} of no step (launched before the trace began "
                "or outside every step)")
            continue
        assert ai["key"].tolist() == ["Cast"]
        assert int(ai["count"].iloc[0]) == count
        assert ai["total_us"].iloc[0] == pytest.approx(total, rel=1e-9)
        # per (rank, step) pair with tasks: rank 0's step 2, the only one
        assert ai["per_step_us"].iloc[0] == pytest.approx(total / pairs, rel=1e-9)
        assert ai["calls_per_step"].iloc[0] == pytest.approx(count / pairs, rel=1e-9)


def _level1_rank0_without_steps(tmp_path: Path) -> Path:
    """A copy of msinsight-pt-level1 whose rank 0 has no step (see the module docstring)."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        gone = ("step_trace_time.csv", "trace_view.json")
        return [n for n in names if n in gone] if "rank0_ascend_pt" in folder else []

    root = writable_copy(LEVEL1, tmp_path / "level1", ignore=ignore)
    path = root / "rank0_ascend_pt" / _OUT / "kernel_details.csv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0].startswith("Step Id,")
    lines[1:] = [line[line.index(","):] for line in lines[1:]]  # the Step Id left empty
    path.write_text("".join(lines), encoding="utf-8")
    return root


def test_lazy_cluster_leaves_out_a_rank_with_no_step_as_the_eager_one(tmp_path, dask_client):
    root = _level1_rank0_without_steps(tmp_path)
    rows = [csv_rows(root / f"rank{r}_ascend_pt" / _OUT / "kernel_details.csv")
            for r in (0, 1)]
    assert rows[0] and not any(r["Step Id"] for r in rows[0])
    assert rows[1] and all(r["Step Id"] for r in rows[1])
    # independently: rank 1's tasks in its steps, communication (HCCL) left out
    want: dict[str, list[float]] = defaultdict(list)
    for r in rows[1]:
        if r["Step Id"] and r["Accelerator Core"] != "HCCL":
            want[r["Type"]].append(float(r["Duration(us)"]))
    eager, lazy = _both(root, dask_client)
    tops = {}
    for name, cluster in (("eager", eager), ("lazy", lazy)):
        top = A.top_operators(cluster, n=None)
        tops[name] = top
        assert int(top["count"].sum()) == sum(len(v) for v in want.values()), name
        got = dict(zip(top["key"], zip(top["count"], top["total_us"], strict=True),
                       strict=True))
        assert set(got) == set(want), name
        for key, durs in want.items():
            assert got[key][0] == len(durs), (name, key)
            assert got[key][1] == pytest.approx(sum(durs), rel=1e-9), (name, key)
        # rank 0's tasks are named as left out, all of them
        assert f"{len(rows[0])} device tasks of no step on rank 0" in " ".join(
            top.attrs["notes"]), name
    assert tops["lazy"]["key"].tolist() == tops["eager"]["key"].tolist()
    # the analyses run rank by rank on the lazy cluster count what the eager ones count
    for func in (A.tiny_kernels, A.unfused_patterns, A.elementwise_chains):
        e, z = func(eager), func(lazy)
        assert len(z) == len(e), func.__name__
        assert z.attrs.get("notes", []) == e.attrs.get("notes", []), func.__name__
    found = [(f.rule, f.severity, f.evidence) for f in pk.advise(lazy)]
    assert found and found == [(f.rule, f.severity, f.evidence) for f in pk.advise(eager)]


def _notes(frame: Any) -> list[str]:
    return [str(n) for n in frame.attrs.get("notes", None) or []]


def _level1_cut_steps(root: Path) -> str:
    """The steps recorded in full in words, from the raw files of a :func:`_level1_rank1_cut`
    copy: rank 0's tasks cover its step's busy time, rank 1's do not."""
    texts = []
    for rank in (0, 1):
        out = root / f"rank{rank}_ascend_pt" / _OUT
        (step,) = {r["Step Id"] for r in csv_rows(out / "kernel_details.csv")}
        n_steps = len(csv_rows(out / "step_trace_time.csv"))
        whole = task_union_us(csv_rows(out / "kernel_details.csv")) >= 0.5 * _busy_us(out)
        assert whole == (rank == 0)
        texts.append((f"step {step} of {n_steps}" if whole else f"no step of {n_steps}")
                      + f" on rank {rank}")
    return "; ".join(texts)


def test_lazy_analyses_of_the_recorded_steps_note_what_the_eager_ones_note(tmp_path,
                                                                          dask_client):
    # rank 1's every task is in its cut step: the lazy analyses run rank by rank said of
    # the cluster what only that emptied rank says ("the profile has no device tasks",
    # "no input shapes in this profile"), where the eager ones read rank 0's tasks alone
    root = _level1_rank1_cut(tmp_path)
    rows = csv_rows(root / "rank0_ascend_pt" / _OUT / "kernel_details.csv")
    in_scope = [float(r["Duration(us)"]) for r in rows if r["Accelerator Core"] != "HCCL"]
    eager, lazy = _both(root, dask_client)
    te, tz = recorded_profile(eager), recorded_profile(lazy)
    for func in (A.tiny_kernels, A.unfused_patterns, A.unfused_savings, A.elementwise_chains,
                 A.attention_chains, A.operator_costs, A.recompute_evidence):
        e, z = func(te), func(tz)
        assert len(z) == len(e), func.__name__
        assert _notes(z) == _notes(e), func.__name__
        assert not any("no device tasks" in n or "no input shapes" in n for n in _notes(z))
    tiny = A.tiny_kernels(tz)  # rank 0's tasks alone, counted in the raw file
    assert tiny["rank"].tolist() == [0]
    assert int(tiny["kernels"].iloc[0]) == len(in_scope)
    assert int(tiny["tiny_kernels"].iloc[0]) == sum(d < 10.0 for d in in_scope)
    assert float(tiny["tiny_total_us"].iloc[0]) == pytest.approx(
        sum(d for d in in_scope if d < 10.0), rel=1e-9)


def test_lazy_recompute_evidence_names_the_steps_of_the_cluster(tmp_path, dask_client):
    # each rank noted its own steps: the lazy cluster said "no step of 1" (rank 1's),
    # where rank 0's step was counted
    root = _level1_rank1_cut(tmp_path)
    want = ("attention passes counted over the steps whose device tasks were recorded in "
            f"full: {_level1_cut_steps(root)}")
    assert want.endswith("step 50 of 1 on rank 0; no step of 1 on rank 1")
    eager, lazy = _both(root, dask_client)
    e, z = A.recompute_evidence(eager), A.recompute_evidence(lazy)
    assert e.empty and z.empty  # msinsight-pt-level1 (a ResNet) runs no attention
    assert _notes(z) == _notes(e) == [
        "no attention task to count forward and backward passes", want]


def test_lazy_recompute_evidence_keeps_the_note_of_the_steps_beside_its_counts(tmp_path,
                                                                              dask_client):
    root = _level1_rank1_cut(tmp_path)
    # rank 0 runs one attention forward and one backward: two of its MatMulV2 tasks
    # renamed (their times kept, so its tasks still cover its step)
    path = root / "rank0_ascend_pt" / _OUT / "kernel_details.csv"
    rows = csv_rows(path)
    mm = [i for i, r in enumerate(rows) if r["Type"] == "MatMulV2"][:2]
    for i, name in zip(mm, ("FlashAttentionScore", "FlashAttentionScoreGrad"), strict=True):
        rows[i]["Type"] = rows[i]["Name"] = name
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    raw = csv_rows(path)
    forward = sum(r["Type"] == "FlashAttentionScore" for r in raw)
    backward = sum(r["Type"] == "FlashAttentionScoreGrad" for r in raw)
    assert (forward, backward) == (1, 1)
    want = ("attention passes counted over the steps whose device tasks were recorded in "
            f"full: {_level1_cut_steps(root)}")
    eager, lazy = _both(root, dask_client)
    for cluster in (eager, lazy):
        ev = A.recompute_evidence(cluster)
        assert ev["rank"].tolist() == [0]
        assert (int(ev["forward"].iloc[0]), int(ev["backward"].iloc[0])) == (forward, backward)
        assert ev["ratio"].iloc[0] == pytest.approx(forward / backward)
        assert _notes(ev) == [want], cluster.lazy


def test_operator_totals_are_of_the_steps_recorded_in_full(tmp_path, dask_client):
    # the operator diff and the journal's totals per (rank, step): rank 1's fragment of
    # its step added its 20 tasks and its (rank, step) pair to rank 0's whole step
    root = _level1_rank1_cut(tmp_path)
    rows = csv_rows(root / "rank0_ascend_pt" / _OUT / "kernel_details.csv")
    assert {r["Step Id"] for r in rows} == {"50"}  # one (rank, step) pair: rank 0's
    want: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        want[r["Name"]].append(float(r["Duration(us)"]))
    eager, lazy = _both(root, dask_client)
    for cluster in (eager, lazy):
        totals = operator_totals(cluster, by="name")
        assert set(totals.index) == set(want), cluster.lazy
        for name, durs in want.items():
            assert totals.loc[name, "count"] == len(durs), (cluster.lazy, name)
            assert totals.loc[name, "us"] == pytest.approx(sum(durs), rel=1e-9)
        assert "steps whose device tasks were recorded in full: step 50 of 1 on rank 0; " \
               "no step of 1 on rank 1" in " ".join(_notes(totals))
        diff = A.compare_profiles(cluster, cluster, by="name")
        assert diff["base_us"].sum() == pytest.approx(sum(map(sum, want.values())), rel=1e-9)
        assert any(n.startswith("new: figures per step") for n in _notes(diff))
    # no step recorded in full anywhere: nothing to total, and the note says why
    eager, lazy = _both(OLD, dask_client)
    for cluster in (eager, lazy):
        totals = operator_totals(cluster)
        assert totals.empty and "no step of 1" in " ".join(_notes(totals)), cluster.lazy


def test_ai_cpu_operators_say_their_tasks_were_in_cut_steps(dask_client):
    rows = [csv_rows(OLD / f"test_rank_{r}" / _OUT / "kernel_details.csv") for r in (0, 1)]
    for rank in (0, 1):  # both lists cut: no step recorded in full
        out = OLD / f"test_rank_{rank}" / _OUT
        assert task_union_us(rows[rank]) < 0.5 * _busy_us(out)
    n_cpu = sum(r["Accelerator Core"] == "AI_CPU" and bool(r["Step Id"])
                for part in rows for r in part)
    assert n_cpu == 2  # rank 0's two Cast tasks, in its step 2
    eager, lazy = _both(OLD, dask_client)
    for cluster in (eager, lazy):
        ai = A.ai_cpu_operators(cluster)
        assert ai.empty
        # said first (an empty table shows its first note), not "no AI CPU operator in
        # this profile", which the profile's two tasks contradict
        assert ai.attrs["notes"][0] == (
            f"no AI CPU operator among the tasks counted: the profile's {n_cpu} AI CPU tasks "
            f"are left out, {n_cpu} in steps whose device tasks were recorded only in part")
