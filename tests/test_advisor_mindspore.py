"""The advisor on the two real MindSpore profiles, against the raw files read with json / csv.

- ``wild/mi_run1``: the step trace covers 322 steps, the timeline's device operators only
  steps 1-14; the gaps between the step trace's all-reduce phases of the other steps were
  once the top finding, "the device idles in long gaps" (68 ms a step).
- ``wild/mi_prof``: two ranks whose first all-reduce takes 42-51 ms, the others 9-12 ms;
  the exposed communication was once a median over the steps on one page and a mean on
  another, so that rank 0's finding (9.39 ms) lay below the least exposed rank's figure
  on the Communication tab (12.9 ms).
"""

from __future__ import annotations

import statistics

import pytest
from raw_mindspore import mi_prof, mi_run1, union_gaps
from shared_samples import shared_sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples


def test_gaps_of_steps_without_recorded_tasks_are_no_finding(tmp_path, monkeypatch) -> None:
    """mi_run1: no long-gap finding (steps 1-14 have no gap of a millisecond between their
    events); the short gaps are those of steps 1-14 alone, their mean per step, and the
    evidence names the steps."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    events = raw["tasks"] + raw["phases"]
    gaps = {s: union_gaps(events, *raw["windows"][s]) for s in raw["recorded"]}
    assert not any(g >= 1000 for gs in gaps.values() for g in gs)
    short = statistics.mean(sum(g for g in gs if g < 1000) for gs in gaps.values())
    found = {f.rule: f for f in pk.advise(pk.load(folder, progress=False))}
    assert "host_stalls" not in found and "memory_stalls" not in found
    hb = found["host_bound"]
    assert hb.ms_per_step == pytest.approx(short / 1e3, rel=1e-6)
    assert "counted over the steps whose device tasks were recorded: steps 1–14 of 322" \
        in hb.evidence


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_exposed_communication_is_the_mean_over_the_steps(tmp_path, monkeypatch) -> None:
    """mi_prof: the exposed communication of each rank is the mean over its iterations of
    the raw Overlap Analysis "Communication(Not Overlapped)" track; the finding is that of
    the least exposed rank, says it is a mean, and is the minimum the Communication tab's
    table shows (perfkit.analysis.comm_overlap)."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = shared_sample("wild/mi_prof")
    raw = mi_prof(root)
    exposed = {r: statistics.mean(t.get("Communication(Not Overlapped)", 0.0)
                                  for t in d["tracks"].values()) for r, d in raw.items()}
    least = min(exposed, key=exposed.get)
    c = pk.load(root, progress=False)
    (f,) = [f for f in pk.advise(c) if f.rule == "exposed_communication"]
    assert f.ms_per_step == pytest.approx(exposed[least] / 1e3, rel=1e-6)
    # the profile records no world size: its least exposed rank may wait for ranks not
    # profiled, so it is not said to wait for nobody
    assert f"rank {least}, the least exposed of the ranks loaded, communicates " \
           f"{pk.format.time_text(exposed[least])} per step on average (the mean over its " \
           "10 steps)" in f.evidence
    assert "does not say whether it holds every rank" in f.evidence
    overlap = pk.analysis.comm_overlap(c)
    assert f.ms_per_step * 1e3 == pytest.approx(float(overlap["comm_not_overlapped_us"].min()))
    # the wait for data is said once: it is both the wait before the first device task and
    # the step trace's interval
    (dl,) = [f for f in pk.advise(c) if f.rule == "data_loading"]
    assert "before the first device task" in dl.evidence and "between steps" not in dl.evidence


def _tail_and_reduce_us(folder) -> tuple[float, float]:
    """mi_run1's step trace read with csv: the mean tail per step and the mean time its
    parallel (all-reduce) phases cover inside the tail, from bp_point to end_point (ticks
    of 10 ns)."""
    rows = mi_run1(folder)["rows"]
    tails, reduces = [], []
    for r in rows:
        lo, hi = int(r["bp_point"]), int(r["end_point"])
        spans = sorted((max(int(r[f"{k}_start_point"]), lo), min(int(r[f"{k}_end_point"]), hi))
                       for k in {c.removesuffix("_start_point") for c in r
                             if c.endswith("_parallel_0_start_point")})
        covered, end = 0, lo
        for a, b in spans:
            if b > max(a, end):
                covered += b - max(a, end)
                end = b
        tails.append(int(r["tail"]) / 100)
        reduces.append(covered / 100)
    return statistics.mean(tails), statistics.mean(reduces)


def test_a_long_step_tail_is_found_and_split(tmp_path, monkeypatch) -> None:
    """mi_run1: 42 % of every step is its tail (after the backward pass), half of it the
    gradients' all-reduce; no other rule reported it (the profile records no exposed
    communication). The MindSpore guide's "Long Step Tail" check (step_tail)."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("wild/mi_run1")
    tail, reduce = _tail_and_reduce_us(folder)
    (f,) = [f for f in pk.advise(pk.load(folder, progress=False)) if f.rule == "step_tail"]
    assert f.ms_per_step == pytest.approx(tail / 1e3, rel=1e-6)
    assert f.severity == "high" and "all-reduce" in f.title
    fmt = pk.format.time_text
    assert f"{fmt(reduce)} in communication (the all-reduce of the gradients) and " \
           f"{fmt(tail - reduce)} in the update" in f.evidence
    assert "all_reduce_fusion_config" in f.recommendation


def test_a_split_step_is_left_to_the_communication_finding(tmp_path, monkeypatch) -> None:
    """mi_prof: its tail (about 11 ms of 15) is mostly the all-reduce, and the profile
    splits the step into computing and communication, which the exposed-communication
    finding counts: the step-tail rule stays silent."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = shared_sample("wild/mi_prof")
    found = {f.rule for f in pk.advise(pk.load(root, progress=False))}
    assert "exposed_communication" in found and "step_tail" not in found


def test_gaps_outside_every_profiled_step_are_not_priced_per_step(tmp_path,
                                                                  monkeypatch) -> None:
    """mindinsight-legacy/profiler_misc: its timeline's device tasks all lie outside the 8
    steps its step trace marks (no task has a step), spanning seconds; the long-gap rule
    once priced a 6 s gap "per step" of a 128 ms step (100 %). Gaps that are in no step
    are not per step: no host-gap finding. The step trace's own findings stay."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = shared_sample("ascend/mindinsight-legacy/profiler_misc")
    profile = pk.load(folder, progress=False)
    kernels = profile.kernels
    assert len(kernels) and kernels["step"].isna().all()
    assert profile.steps["step"].notna().any()
    found = {f.rule: f for f in pk.advise(profile)}
    assert not {"host_stalls", "memory_stalls", "host_bound"} & set(found)
    assert "data_loading" in found and "step_tail" in found
    assert all(f.score <= 1.0 and f.ms_per_step * 1e3 <= f.step_ms * 1e3 + 1e-6
               for f in found.values() if f.measured)
