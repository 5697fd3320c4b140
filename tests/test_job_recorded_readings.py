"""The readings that decide from what a step holds read only the steps recorded in full.

A step whose device tasks were cut short holds a fraction of its operators and collectives:
the model's counts from the host operators, "no backward operator" (an inference step),
"the dp group only runs all-reduce" (no sharding) and the gradient buckets per step are
read over the other steps, say over which, and are left unknown (or assumed, with the
reason) where no step was recorded in full. Each test takes a real profile (or perfkit's
own simulated one for the buckets) and marks its steps in memory, as
tests/test_job_recorded_counts.py does.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample

import perfkit as pk
from perfkit import plan
from perfkit.analysis._util import table
from perfkit.analysis.shapes import read_model
from perfkit.calc.rates import Rates
from perfkit.job.measured import TRAINING_STEP, read_training_step
from perfkit.profile import Cluster, Profile

QWEN = sample("wild/tl_qwen_h100")
LEVEL1 = sample(PT_LEVEL1)
SIM = Path(__file__).resolve().parents[1] / "data" / "simulated" / "llama2-13b-baseline-dp16"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _copy(cluster: Cluster, change) -> Cluster:
    """``cluster`` whose ranks' tables are ``change(rank, {name: frame})``'s (the tables
    it returns replace the rank's own)."""
    ranks = []
    for rank in cluster.profiles:
        frames = change(rank)
        ranks.append(Profile(rank.meta, lambda name, r=rank, f=frames:
                             f[name] if name in f else table(r, name)))
    return Cluster(ranks, cluster.meta)


def _later(frame: pd.DataFrame, step: int, shift: float, keep: float = 1.0) -> pd.DataFrame:
    """The first ``keep`` share of ``frame``'s rows (by start), as step ``step``, ``shift``
    microseconds later: a fragment of the step recorded after it."""
    rows = frame.sort_values("start_us").head(max(1, int(len(frame) * keep)))
    return rows.assign(step=step, start_us=rows["start_us"] + shift)


# ---- 1. the model's counts from the host operators -----------------------------------------

@pytest.fixture(scope="module")
def qwen() -> Cluster:
    return pk.load(QWEN, progress=False)


def _raw_attention_calls() -> int:
    """The trace's ``aten::scaled_dot_product_attention`` host calls (its one step)."""
    (path,) = QWEN.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    return sum(e.get("cat") == "cpu_op" and e["name"] == "aten::scaled_dot_product_attention"
               for e in events)


def _operators_only(qwen: Cluster, recorded: list[bool]) -> Cluster:
    """qwen's trace with its kernels' shapes dropped (the host operators are read), its
    step marked ``recorded[0]`` and, with a second item, a fragment of a later step (the
    first third of its host operators) marked ``recorded[1]``."""
    def change(rank: Profile) -> dict[str, pd.DataFrame]:
        ops, steps = table(rank, "ops"), table(rank, "steps")
        (step,) = steps["step"]
        marks = [steps.assign(tasks_recorded=recorded[0])]
        if len(recorded) > 1:
            shift = float((ops["start_us"] + ops["dur_us"].fillna(0)).max()
                          - ops["start_us"].min()) + 1000.0
            ops = pd.concat([ops, _later(ops, step + 1, shift, 1 / 3)], ignore_index=True)
            marks.append(steps.assign(step=step + 1, tasks_recorded=recorded[1]))
        return {"kernels": table(rank, "kernels").drop(columns=["input_shapes"]),
                "ops": ops, "steps": pd.concat(marks, ignore_index=True)}
    return _copy(qwen, change)


@pytest.mark.shared_samples
def test_the_host_operators_of_a_cut_step_are_not_counted_per_step(qwen):
    got = read_model(_operators_only(qwen, [False]))
    assert got.source == "ops"
    for name in ("num_layers", "num_micro_batches"):
        assert got.get(name) is None, name
        assert got.details[name].startswith(
            "the host operators of rank 0 are not counted per step: it has no step whose "
            "device tasks were recorded in full, and a fragment of a step holds a fraction "
            "of its host operators (device tasks recorded for no step of 1)")
    # the shapes are still read (an operator's shapes are its own)
    assert got.get("hidden_size") == 1024


@pytest.mark.shared_samples
def test_the_host_operators_are_counted_in_the_step_recorded_in_full(qwen):
    got = read_model(_operators_only(qwen, [True, False]))
    n = _raw_attention_calls()
    assert (got.source, got.get("num_layers")) == ("ops", n) == ("ops", 24)
    assert got.details["num_layers"].endswith(
        "counted in a step whose device tasks were recorded in full (device tasks recorded "
        "for step 6 of 2)")


# ---- 2. no backward operator: an inference step --------------------------------------------

@pytest.mark.shared_samples
def test_no_backward_operator_in_a_cut_step_does_not_say_inference(qwen):
    whole = pk.infer_job(qwen)
    assert whole.training_step() is False  # qwen's trace is an inference step
    cut = _operators_only(qwen, [False])
    job = pk.infer_job(cut)
    assert job.training_step() is None
    assert not any("not a training step" in p for p in job.problems())
    out: dict = {}
    read_training_step(cut, out)  # the reason, as the advisor reads it
    assert out[TRAINING_STEP].value is None
    said = out[TRAINING_STEP].detail
    assert "no step's device tasks were recorded in full" in said
    assert "device tasks recorded for no step of 1" in said


@pytest.mark.shared_samples
def test_no_backward_operator_is_read_over_the_steps_recorded_in_full(qwen):
    (path,) = QWEN.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    n_aten = sum(e.get("cat") == "cpu_op" and e["name"].startswith("aten::") for e in events)
    job = pk.infer_job(_operators_only(qwen, [True, False]))
    assert job.training_step() is False
    assert (f"among its {n_aten:,} PyTorch operators (over step 6 of 2, whose device tasks "
            "were recorded in full), so it is an inference or evaluation step"
            in job.observed["training_step"][1])


@pytest.mark.shared_samples
def test_a_backward_operator_in_a_cut_step_still_says_training():
    level1 = pk.load(LEVEL1, progress=False)
    job = pk.infer_job(_copy(level1, lambda r: {
        "steps": table(r, "steps").assign(tasks_recorded=False)}))
    assert job.training_step() is True


@pytest.mark.shared_samples
def test_the_analyses_read_no_backward_pass_as_the_job_does(qwen):
    from perfkit.analysis.backward_pass import forward_only_operators

    (path,) = QWEN.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    n_aten = sum(e.get("cat") == "cpu_op" and e["name"].startswith("aten::") for e in events)
    (cut,) = _operators_only(qwen, [False]).profiles
    assert forward_only_operators(cut) == 0  # unknown: no step recorded in full
    (part,) = _operators_only(qwen, [True, False]).profiles
    assert forward_only_operators(part) == n_aten


# ---- 3. sharding from the kinds of collectives ---------------------------------------------

def _raw_collectives() -> set[str]:
    """The collectives of rank 0's communication.json, by kind (the name before ``__``)."""
    (out,) = LEVEL1.glob("rank0*/ASCEND_PROFILER_OUTPUT")
    comm = json.loads((out / "communication.json").read_text(encoding="utf-8"))
    return {k.split("__")[0] for step in comm.values() for k in step["collective"]
            if k != "Total Op Info"}


@pytest.mark.shared_samples
def test_a_cut_step_does_not_say_the_dp_group_shards_nothing():
    level1 = pk.load(LEVEL1, progress=False)
    assert _raw_collectives() == {"hcom_allReduce"}
    whole = pk.infer_job(level1)
    assert whole.detail("optimizer_shard") == "the dp group only runs allreduce: no sharding"
    job = pk.infer_job(_copy(level1, lambda r: {
        "steps": table(r, "steps").assign(tasks_recorded=False)}))
    assert (job.value("optimizer_shard"), job.source("optimizer_shard")) == (1, "default")
    said = job.detail("optimizer_shard")
    assert said.startswith("the dp group's collectives (allreduce) are recorded only in "
                           "steps whose device tasks were not recorded in full (device tasks "
                           "recorded for no step of 1)")
    assert said.endswith(": 1 assumed")


@pytest.mark.shared_samples
def test_the_dp_group_shards_nothing_over_the_steps_recorded_in_full():
    level1 = pk.load(LEVEL1, progress=False)

    def change(rank: Profile) -> dict[str, pd.DataFrame]:
        comm, steps = table(rank, "comm_ops"), table(rank, "steps")
        frag = _later(comm, 51, 1e6, 0.5)
        return {"comm_ops": pd.concat([comm, frag], ignore_index=True),
                "steps": pd.concat([steps.assign(tasks_recorded=True),
                                    steps.assign(step=51, tasks_recorded=False)],
                                   ignore_index=True)}
    job = pk.infer_job(_copy(level1, change))
    assert (job.value("optimizer_shard"), job.source("optimizer_shard")) == (1, "profile")
    assert job.detail("optimizer_shard") == (
        "the dp group only runs allreduce (over step 50 of 2, whose device tasks were "
        "recorded in full): no sharding")


# ---- 4. the gradient buckets per step -------------------------------------------------------

def _settings() -> dict:
    meta = next(SIM.glob("*/profiler_metadata.json"))
    return json.loads(meta.read_text(encoding="utf-8"))["perfkit_simulation"]["settings"]


def _with_cut_steps(sim: Cluster, recorded: bool, fragments: int = 2,
                    metric: bool = False) -> Cluster:
    """The simulated run with its step marked ``recorded``, ``fragments`` cut steps after
    it holding its first reduce-scatter each, and (``metric``) a loss all-reduce of one
    fp32 element (4 bytes sent) in the dp group at the end of each step."""
    def change(rank: Profile) -> dict[str, pd.DataFrame]:
        comm, bw, steps = (table(rank, n) for n in ("comm_ops", "comm_bandwidth", "steps"))
        (step,) = steps["step"]
        first = comm[comm["name"].str.contains("reduceScatter")].sort_values("start_us")
        frags = [first.head(1).assign(step=step + i, start_us=lambda f, i=i: f["start_us"]
                                      + 2e6 * i) for i in range(1, fragments + 1)]
        marks = [steps.assign(tasks_recorded=recorded)] + [
            steps.assign(step=step + i, tasks_recorded=False) for i in range(1, fragments + 1)]
        if metric:
            loss = first.head(1).assign(name="hcom_allReduce__069_9_1",
                                        start_us=float(comm["start_us"].max()) + 10.0)
            frags.append(loss)
            row = bw[bw["name"] == first["name"].iloc[0]].head(1)
            bw = pd.concat([bw, row.assign(name="hcom_allReduce__069_9_1", size_bytes=4.0,
                                           transit_us=5.0)], ignore_index=True)
        return {"comm_ops": pd.concat([comm, *frags], ignore_index=True),
                "comm_bandwidth": bw, "steps": pd.concat(marks, ignore_index=True)}
    return _copy(sim, change)


@pytest.fixture(scope="module")
def sim() -> Cluster:
    return pk.load(SIM, cache=False, progress=False)


def _buckets_term(cal) -> str:
    (how,) = [h for t, _v, h in cal.terms if t == "dp_buckets"]
    return how


def test_the_buckets_are_counted_over_the_steps_recorded_in_full(sim):
    buckets = _settings()["dp_buckets"]
    assert buckets == 4
    # per rank: 4 reduce-scatters in step 1, 1 in each of the 2 cut steps: the median over
    # the three steps was 1
    cal = plan.calibrate(_with_cut_steps(sim, True))
    assert cal.rates.dp_buckets == buckets
    assert ("the median over 16 (rank, step) pairs, over step 1 of 3, whose device tasks "
            "were recorded in full" in _buckets_term(cal))


def test_no_buckets_are_counted_where_no_step_was_recorded_in_full(sim):
    whole = pk.infer_job(sim)  # a fragment shows no model: the whole run's is given
    cal = plan.calibrate(_with_cut_steps(sim, False), whole.model, whole.parallel,
                         whole.hardware)
    assert cal.rates.dp_buckets == Rates().dp_buckets
    assert not [t for t, _v, _h in cal.terms if t == "dp_buckets"]
    assert any(n.startswith("the gradient reductions per step in the data-parallel group "
                            "(dp_buckets) are not counted: no step's device tasks were "
                            "recorded in full (device tasks recorded for no step of 3)")
               for n in cal.notes)


def test_a_loss_all_reduce_is_not_a_gradient_bucket(sim):
    cal = plan.calibrate(_with_cut_steps(sim, True, fragments=0, metric=True))
    # 4 reduce-scatters and the loss's all-reduce (4 bytes: one fp32 element) per rank
    assert cal.rates.dp_buckets == _settings()["dp_buckets"] == 4
    assert _buckets_term(cal).endswith(
        "; 16 reductions sending fewer than 1,024 bytes (fewer than 1,024 elements) left "
        "out, as a metric's (a loss, a gradient norm), not gradients")

