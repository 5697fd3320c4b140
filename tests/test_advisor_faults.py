"""The advisor names the costliest planted fault first, and scores it in milliseconds.

Every fault kind of :mod:`perfkit.simulate` is planted alone and in pairs of different
costs into small simulated jobs (a dense data-parallel job, a GQA pipelined job, an
interleaved pipelined job, and a 4-stage pipeline for the stage-imbalance fault). The
**injected cost** of a fault is measured, not assumed: the same job is simulated with and
without it (same seed) and the step times compared (mean over steps of the slowest rank's
device span plus its preparing time). The first finding must name the fault with the
larger injected cost, and its ``ms_per_step`` must be within a factor of two of that cost;
in a pair, each fault's cost is the pair's step minus the step with the other fault alone
(faults interact). A clean job has no finding above ``low``.

The jobs are small (2-4 layers, 2-4 micro-batches, 1 step, no PMU columns nor per-kernel
trace events) and each simulation runs once per module, so the file takes well under a
minute or two.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.advisor import advise
from perfkit.analysis.steps import step_breakdown
from perfkit.simulate import (
    DataLoadingStall,
    FullRecompute,
    HostBound,
    MemoryPressure,
    NoOverlap,
    SlowLink,
    SlowRank,
    UnbalancedStage,
    UnfusedOperators,
    simulate,
)

# the whole dashboard, every tab x profile, or Dask against pandas: the slow group (README)
pytestmark = pytest.mark.slow

#: A 910B behind a switch (every peer at the NPU's 196 GB/s): the faults, not the full
#: mesh's links (a group of 4 has 3 of 7 HCCS links), are what these jobs are about, and a
#: clean job's dp traffic then stays the small share it was planned as.
HW = pk.Hardware.preset("ascend-910b")
HW = HW.replace(node=HW.topology.replace(intra_link="unknown"))
# small vocabulary: the output layer does not unbalance the pipeline stages of a clean job
MHA = pk.ModelSpec.preset("llama2-7b").replace(num_layers=2, vocab_size=1024, name="mha-2l")
GQA = pk.ModelSpec.preset("llama3-8b").replace(num_layers=4, seq_length=4096,
                                               vocab_size=1024, name="gqa-4l")

JOBS = {
    "dense-dp4": (MHA, pk.ParallelConfig(dp=4, num_micro_batches=2)),
    "gqa-dp3-pp2": (GQA, pk.ParallelConfig(dp=3, pp=2, num_micro_batches=2)),
    "dense-dp3-pp2-vpp2": (MHA.replace(num_layers=4),
                           pk.ParallelConfig(dp=3, pp=2, vpp=2, num_micro_batches=2)),
    "dense-pp4": (MHA.replace(num_layers=4), pk.ParallelConfig(pp=4, num_micro_batches=4)),
}

#: fault name -> (the fault, the rule whose finding names it)
FAULTS = {
    "SlowRank": (SlowRank(1, 1.3), "slow_ranks"),
    "SlowLink": (SlowLink(0, 1, 0.2), "slow_link"),
    "UnbalancedStage": (UnbalancedStage(1, 1.5), "stage_imbalance"),
    "DataLoadingStall": (DataLoadingStall(20_000.0), "data_loading"),
    "UnfusedOperators": (UnfusedOperators(), "unfused_operators"),
    "HostBound": (HostBound(600.0), "host_bound"),
    "NoOverlap": (NoOverlap(), "exposed_communication"),
    "MemoryPressure": (MemoryPressure(0.97, 5000.0), "memory_stalls"),
    "FullRecompute": (FullRecompute(), "recompute_headroom"),
}

#: which faults each job can show (a stage imbalance needs stages; a slow rank, a slow link
#: and missing overlap need data-parallel peers)
APPLIES = {
    "dense-dp4": [f for f in FAULTS if f != "UnbalancedStage"],
    "gqa-dp3-pp2": list(FAULTS),
    "dense-dp3-pp2-vpp2": list(FAULTS),
    "dense-pp4": ["UnbalancedStage", "DataLoadingStall", "FullRecompute"],
}

#: pairs planted together (every fault in at least one pair per job where it applies)
PAIRS = {
    "dense-dp4": [("SlowRank", "DataLoadingStall"), ("SlowLink", "UnfusedOperators"),
                  ("HostBound", "FullRecompute"), ("NoOverlap", "MemoryPressure"),
                  ("SlowLink", "DataLoadingStall")],
    "gqa-dp3-pp2": [("UnbalancedStage", "SlowLink"), ("SlowRank", "HostBound"),
                    ("DataLoadingStall", "FullRecompute"), ("NoOverlap", "UnfusedOperators"),
                    ("MemoryPressure", "SlowLink")],
    "dense-dp3-pp2-vpp2": [("UnbalancedStage", "DataLoadingStall"),
                           ("SlowRank", "NoOverlap"), ("SlowLink", "FullRecompute"),
                           ("HostBound", "DataLoadingStall"),
                           ("UnfusedOperators", "FullRecompute"),
                           ("MemoryPressure", "NoOverlap")],
    "dense-pp4": [("UnbalancedStage", "DataLoadingStall"),
                  ("FullRecompute", "DataLoadingStall")],
}

_RUNS: dict[tuple[str, tuple[str, ...]], tuple[float, list]] = {}


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("advisor-faults")


def _step_ms(profile: object) -> float:
    s = step_breakdown(profile)
    wall = s["step_us"] + s["preparing_us"].fillna(0.0)
    return float(pd.DataFrame({"step": s["step"], "w": wall}).groupby("step")["w"].max()
                 .mean()) / 1e3


def run(root: Path, job: str, names: tuple[str, ...] = ()) -> tuple[float, list]:
    """(measured step ms, findings) of ``job`` with the faults ``names`` (memoised)."""
    key = (job, tuple(sorted(names)))
    if key not in _RUNS:
        model, parallel = JOBS[job]
        out = root / f"{job}-{'-'.join(key[1]) or 'clean'}"
        simulate(model, parallel, HW, steps=1, faults=tuple(FAULTS[n][0] for n in names),
                 out=out, seed=3, aic_metrics=None, trace_kernels=False)
        prof = pk.load(out, cache=False)
        _RUNS[key] = (_step_ms(prof), advise(prof, parallel=parallel, hardware=HW))
    return _RUNS[key]


def cost_ms(root: Path, job: str, name: str) -> float:
    """Injected cost of a fault: step with it minus step without it (same seed)."""
    return run(root, job, (name,))[0] - run(root, job)[0]


def _table(found: list) -> list[tuple[str, str, float]]:
    return [(f.rule, f.severity, round(f.ms_per_step, 2)) for f in found[:5]]


@pytest.mark.parametrize("job", sorted(JOBS))
def test_clean_job_has_no_finding_above_low(sim_dir: Path, job: str) -> None:
    _, found = run(sim_dir, job)
    assert [f for f in found if f.severity in ("high", "medium")] == [], _table(found)


CASES = [(job, name) for job in sorted(JOBS) for name in APPLIES[job]]


@pytest.mark.parametrize(("job", "name"), CASES)
def test_single_fault_is_named_first_with_its_cost(sim_dir: Path, job: str, name: str
                                                   ) -> None:
    cost = cost_ms(sim_dir, job, name)
    step, found = run(sim_dir, job, (name,))
    assert cost > 0.01 * step, f"{name} costs {cost:.2f} ms of {step:.1f}: plant it larger"
    top = found[0]
    assert top.rule == FAULTS[name][1], (cost, _table(found))
    assert top.measured and top.severity in ("high", "medium", "low")
    # the finding's milliseconds against the measured cost of the fault
    assert 0.5 <= top.ms_per_step / cost <= 2.0, (name, cost, _table(found))


PAIR_CASES = [(job, a, b) for job in sorted(PAIRS) for a, b in PAIRS[job]]


@pytest.mark.parametrize(("job", "a", "b"), PAIR_CASES)
def test_pair_names_the_costlier_fault_first(sim_dir: Path, job: str, a: str, b: str) -> None:
    # each fault's cost in the pair: the pair's step minus the step with the other fault
    # alone (faults interact: a host that launches slowly hurts more with many small
    # kernels)
    both, found = run(sim_dir, job, (a, b))
    ca, cb = both - run(sim_dir, job, (b,))[0], both - run(sim_dir, job, (a,))[0]
    assert max(ca, cb) >= 1.3 * min(ca, cb), f"choose faults of different costs ({ca}, {cb})"
    big, small = (a, b) if ca > cb else (b, a)
    assert found[0].rule == FAULTS[big][1], (ca, cb, _table(found))
    assert 0.5 <= found[0].ms_per_step / max(ca, cb) <= 2.0, (ca, cb, _table(found))
    rules = [f.rule for f in found if f.measured and f.severity != "info"]
    assert FAULTS[small][1] in rules, (ca, cb, _table(found))


def test_llama2_7b_dp8_slow_link_and_data_stall(tmp_path: Path) -> None:
    """The case of issue 16: Llama2-7B, dp 8, no optimizer sharding, on 64 GiB NPUs.

    It does not fit (about 160 % of the device), so the simulator refuses it unless told;
    the advisor then names the slow link first (not "memory nearly full"), reports the
    peak above capacity as an inconsistency without a time score, and finds a 200 ms
    data-loading stall (about 5 % of the step) that a fixed 5 % cut-off used to drop.
    """
    model = pk.ModelSpec.preset("llama2-7b")
    par = pk.ParallelConfig(dp=8, num_micro_batches=4)
    with pytest.raises(pk.PerfkitError, match="cannot run"):
        simulate(model, par, HW, steps=1, out=tmp_path / "refused", aic_metrics=None,
                 trace_kernels=False)
    assert not (tmp_path / "refused").exists()

    def one(name: str, faults: tuple) -> tuple[float, list]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = simulate(model, par, HW, steps=1, faults=faults, out=tmp_path / name,
                           aic_metrics=None, trace_kernels=False, allow_oom=True, seed=1)
        prof = pk.load(out, cache=False)
        return _step_ms(prof), advise(prof, hardware=HW)

    base, clean = one("clean", ())
    link, found = one("link", (SlowLink(0, 1, 0.2),))
    assert found[0].rule == "slow_link", _table(found)
    assert 0.5 <= found[0].ms_per_step / (link - base) <= 2.0
    over = [f for f in found if f.rule == "memory_over_capacity"]
    assert len(over) == 1 and not over[0].measured and over[0].severity == "warning"
    assert "nearly full" not in " ".join(f.title for f in found)
    # never ranked above a measured loss
    assert found.index(over[0]) > max(i for i, f in enumerate(found) if f.measured)
    assert not [f for f in clean if f.severity in ("high", "medium")], _table(clean)
    stall_ms, stalled = one("stall", (DataLoadingStall(200_000.0),))
    data = [f for f in stalled if f.rule == "data_loading"]
    assert data and data[0].ms_per_step == pytest.approx(200.0, rel=0.05)
    assert data[0].score == pytest.approx(data[0].ms_per_step / stall_ms, rel=1e-6)
    assert 0.03 <= data[0].score < 0.10 and data[0].severity == "medium"
