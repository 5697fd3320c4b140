"""vpp and the vLLM tp rule count only over steps whose device tasks were recorded in full.

A step whose device tasks were cut short holds a fraction of its tasks: counted per step,
it gives a fraction of the count. The micro-batches, layers and recompute were already read
only from steps recorded in full (tests/test_job_recorded_steps.py); here the first
stage's pipeline sends per step (vpp = sends / m + 1, halved) and the all-reduces of
activations that read tp in an inference step.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from raw_ascend import csv_rows, union_us
from shared_samples import PT_GPT3_OLD, sample

import perfkit as pk
from perfkit.analysis._util import table
from perfkit.job.fields import Readings
from perfkit.job.layout import read_vpp
from perfkit.profile import Cluster, Profile, ProfileMeta

OLD = sample(PT_GPT3_OLD)
B200 = "wild/tl_b200_eager"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _vpp(profile, pp: int, m: int | None, stage_of: dict[int, int]):
    out = Readings()
    read_vpp(profile, out.put, pp, m, stage_of)
    return out["vpp"]


# ---- vpp ---------------------------------------------------------------------------------

@pytest.mark.shared_samples
def test_the_sends_of_a_cut_step_give_no_vpp():
    out = OLD / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    # the raw files: rank 0 sends once in step 2 (communication.json's p2p ops), and
    # step 2, its only step, is cut: its tasks in kernel_details.csv cover less than half
    # the busy time step_trace_time.csv gives it
    comm = json.loads((out / "communication.json").read_text(encoding="utf-8"))
    assert list(comm) == ["step2"]
    sends = [k for k in comm["step2"]["p2p"] if k.startswith("hcom_send")]
    assert len(sends) == 1
    tasks = [r for r in csv_rows(out / "kernel_details.csv") if r["Step Id"] == "2"]
    covered = union_us((float(r["Start Time(us)"]),
                        float(r["Start Time(us)"]) + float(r["Duration(us)"])) for r in tasks)
    (step,) = csv_rows(out / "step_trace_time.csv")
    assert covered < 0.5 * (float(step["Computing"])
                            + float(step["Communication(Not Overlapped)"]))
    profile = pk.load(OLD, cache=False, progress=False)
    # were rank 0 the first of 2 stages and m = 1, its one send would read
    # m·(2·vpp − 1) = 1, vpp 1 from the profile: a fragment's count
    got = _vpp(profile, 2, 1, {0: 0, 1: 1})
    assert (got.value, got.source) == (1, "default")
    assert "not counted" in got.detail and "recorded in full" in got.detail
    assert "no step of 1" in got.detail


def _pipeline_rank(recorded: list[bool], sends: list[int]) -> Profile:
    """Rank 0 of a pipeline: one step per item, its sends and whether its device tasks
    were recorded in full."""
    n = len(sends)
    steps = pd.DataFrame({"rank": [0] * n, "step": list(range(1, n + 1)),
                          "tasks_recorded": recorded})
    rows = [(s + 1, 1000.0 * s + i) for s, k in enumerate(sends) for i in range(k)]
    comm = pd.DataFrame({"rank": 0, "step": [s for s, _ in rows], "group": "pp",
                         "name": [f"hcom_send__1_{i}" for i in range(len(rows))],
                         "start_us": [t for _, t in rows], "elapse_us": 1.0})
    return Profile(ProfileMeta("test", rank=0), {"steps": steps, "comm_ops": comm})


def test_vpp_is_read_from_the_recorded_steps_not_the_most_frequent_count():
    # steps 1–2 recorded in full: 3 sends each, m·(2·vpp − 1) = 3 with m = 1 is vpp 2;
    # steps 3–5 cut: 1 send each, which was the most frequent count (vpp 1)
    recorded = [True, True, False, False, False]
    sends = [3, 3, 1, 1, 1]
    got = _vpp(_pipeline_rank(recorded, sends), 2, 1, {0: 0, 1: 1})
    per = 3
    assert (got.value, got.source) == ((per // 1 + 1) // 2, "profile") == (2, "profile")
    assert f"{per} pipeline sends per step" in got.detail
    assert ("first stage (over steps 1–2 of 5, whose device tasks were recorded in full) = "
            in got.detail)


def test_vpp_names_only_what_is_unknown():
    got = _vpp(_pipeline_rank([True], [3]), 2, None, {0: 0, 1: 1})
    assert got.source == "default"
    assert got.detail == "the micro-batches per step are unknown: 1 assumed"


# ---- the vLLM tp rule ---------------------------------------------------------------------

def _with_steps(profile: Profile, parts: list[tuple[pd.DataFrame, pd.DataFrame]],
                recorded: list[bool]) -> Cluster:
    """One rank of ``profile`` whose host operators and collectives are ``parts``, one
    (ops, comm_ops) pair per step (steps 1, 2, ...), with the steps marked ``recorded``."""
    n = len(parts)
    steps = pd.DataFrame({"rank": [profile.meta.rank] * n, "step": list(range(1, n + 1)),
                          "tasks_recorded": recorded})
    frames = {"steps": steps,
              "ops": pd.concat([o.assign(step=i + 1) for i, (o, _) in enumerate(parts)],
                               ignore_index=True),
              "comm_ops": pd.concat([c.assign(step=i + 1) for i, (_, c) in enumerate(parts)],
                                    ignore_index=True)}

    def tables(name: str) -> pd.DataFrame:
        return frames[name] if name in frames else table(profile, name)

    return Cluster([Profile(profile.meta, tables)], profile.meta)


@pytest.fixture(scope="module")
def b200() -> Cluster:
    return pk.load(sample(B200), progress=False)


def _raw_all_reduces() -> int:
    """The outermost host all-reduce calls of the raw trace (tests/test_job_vllm_tp.py
    reads 73: ``vllm::all_reduce``, each running ``symm_mem::multimem_all_reduce_``)."""
    import gzip

    with gzip.open(sample(B200) / "eager_trace.json.gz", "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    calls = [e for e in events if e.get("cat") == "cpu_op" and "all_reduce" in e["name"]]
    return sum(not any(o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"]
                       and e["ts"] + e["dur"] <= o["ts"] + o["dur"] and o["dur"] > e["dur"]
                       for o in calls) for e in calls)


@pytest.mark.shared_samples
def test_tp_is_not_read_from_a_cut_step(b200: Cluster):
    (rank,) = b200.profiles
    ops, comm = table(rank, "ops"), table(rank, "comm_ops")
    whole = pk.infer_job(_with_steps(rank, [(ops, comm)], [True]))
    assert (whole.parallel.tp, whole.source("tp")) == (8, "profile")
    # the same step marked as not recorded in full: its all-reduces are not counted
    job = pk.infer_job(_with_steps(rank, [(ops, comm)], [False]))
    assert job.source("tp") == "default" and job.parallel.tp == 1
    said = job.detail("tp")
    assert "all-reduces of activations are not counted" in said
    assert "no step of 1" in said


@pytest.mark.shared_samples
def test_tp_counts_the_all_reduces_of_the_recorded_steps_only(b200: Cluster):
    (rank,) = b200.profiles
    ops, comm = table(rank, "ops"), table(rank, "comm_ops")
    n = _raw_all_reduces()
    assert n == 73
    # step 2: the first half of the step again (by start), later, and cut
    end = float(np.nanmax(ops["start_us"] + ops["dur_us"].fillna(0)))
    mid = float(ops["start_us"].median())
    shift = end - float(ops["start_us"].min()) + 1000.0
    half = ops[ops["start_us"] <= mid].assign(start_us=lambda f: f["start_us"] + shift)
    cut = comm[comm["start_us"] <= mid].assign(start_us=lambda f: f["start_us"] + shift)
    job = pk.infer_job(_with_steps(rank, [(ops, comm), (half, cut)], [True, False]))
    assert (job.parallel.tp, job.source("tp")) == (8, "profile")
    said = job.detail("tp")
    assert (f"{n} of the {n} all-reduces on rank 0 (over step 1 of 2, whose device tasks "
            "were recorded in full) take activations") in said


# ---- the counts of the model say from which steps -----------------------------------------

@pytest.mark.shared_samples
def test_the_counts_per_step_say_they_were_read_from_a_step_recorded_in_full():
    cluster = pk.load(OLD, cache=False, progress=False)
    ranks = []
    for rank in cluster.profiles:
        # step 2 as recorded in full, and a step 3 after it holding its first 5 tasks, cut
        kernels, steps = table(rank, "kernels"), table(rank, "steps")
        shift = float((kernels["start_us"] + kernels["dur_us"]).max()
                      - kernels["start_us"].min()) + 1000.0
        frag = kernels.sort_values("start_us").head(5)
        frag = frag.assign(step=3, start_us=frag["start_us"] + shift)
        both = pd.concat([kernels, frag], ignore_index=True)
        marks = pd.concat([steps.assign(tasks_recorded=True),
                           steps.assign(step=3, tasks_recorded=False)], ignore_index=True)
        frames = {"kernels": both, "steps": marks}
        ranks.append(Profile(rank.meta, lambda name, r=rank, f=frames:
                             f[name] if name in f else table(r, name)))
    job = pk.infer_job(Cluster(ranks, cluster.meta))
    # step 2, read whole, gives what tests/analysis/test_shapes_ascend_loss.py reads from
    # it with the marks dropped: one embedding lookup, one micro-batch
    assert job.value("num_micro_batches") == 1
    said = job.detail("num_micro_batches")
    assert "embedding lookup" in said
    assert said.endswith("counted in a step whose device tasks were recorded in full "
                         "(device tasks recorded for step 2 of 2)")
