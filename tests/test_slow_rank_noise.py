"""Slow-rank findings only above the step-to-step noise (issue 67, point 2).

The steps are built here with known numbers, so every bar is simple arithmetic: a rank
whose computation exceeds its peers' by less than twice its steps' robust spread
(1.4826 × MAD) or by less than 2 % of the median step is not slow; a peer wait is never
negative; a slow rank inside a pipeline stage is named before the stage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit import Cluster, Profile, ProfileMeta, advise
from perfkit.analysis import slow_ranks


def _steps(computing: list[float], cno: float = 100.0) -> pd.DataFrame:
    n = len(computing)
    return pd.DataFrame({"step": list(range(1, n + 1)), "computing_us": computing,
                         "communication_us": cno + 50.0, "comm_not_overlapped_us": cno,
                         "overlapped_us": 50.0, "free_us": 100.0, "preparing_us": 10.0})


def _cluster(per_rank: list[pd.DataFrame]) -> Cluster:
    profs = [Profile(ProfileMeta("test", rank=r), {"steps": s}) for r, s in enumerate(per_rank)]
    return Cluster(profs, ProfileMeta("cluster"))


def _computing(slow: list[float], others: list[list[float]], cno_slow: float = 100.0,
               cno_peers: float = 100.0) -> Cluster:
    return _cluster([_steps(slow, cno_slow)] + [_steps(o, cno_peers) for o in others])


QUIET = [[10_000.0, 10_010.0, 9_990.0, 10_000.0, 10_005.0]] * 5


def test_a_rank_above_noise_is_slow() -> None:
    # 8 % more computation, steps varying by ±10 µs: far above the noise
    c = _computing([10_800.0, 10_810.0, 10_790.0, 10_800.0, 10_805.0], QUIET,
                   cno_peers=900.0)
    sr = slow_ranks(c)
    row = sr[(sr["metric"] == "computing_us") & (sr["rank"] == 0)].iloc[0]
    assert bool(row["slow"])
    assert row["excess_us"] == pytest.approx(800.0)


def test_a_rank_within_its_noise_is_not_slow() -> None:
    # the same 8 % median excess, but every rank's steps swing by ±1 ms: the robust spread
    # of rank 0's steps is 1.4826 × MAD = 1.4826 × 1000, twice that is above 800 µs
    swing = [10_000.0, 11_000.0, 9_000.0, 10_000.0, 11_000.0, 9_000.0]
    noisy = [[v for v in swing]] * 5
    slow = [v + 800.0 for v in swing]
    mad = float(np.median(np.abs(np.array(slow) - np.median(slow))))
    assert 800.0 < 2 * 1.4826 * mad  # the bar, computed here
    c = _computing(slow, noisy, cno_peers=900.0)
    sr = slow_ranks(c)
    row = sr[(sr["metric"] == "computing_us") & (sr["rank"] == 0)].iloc[0]
    assert not bool(row["slow"])
    assert row["noise_us"] == pytest.approx(1.4826 * mad)
    assert not [f for f in advise(c) if f.rule == "slow_ranks"]


def test_a_small_share_of_the_step_is_not_slow() -> None:
    # 7 % more computation but only 70 µs in a step of about 11 ms (< 2 %)
    base = [[1_000.0, 1_000.0, 1_000.0]] * 5
    c = _cluster([_steps([1_070.0] * 3)] + [_steps(b) for b in base])
    c = _cluster([s.assign(free_us=10_000.0) for s in
                  (p.steps for p in c.profiles)])
    sr = slow_ranks(c)
    row = sr[(sr["metric"] == "computing_us") & (sr["rank"] == 0)].iloc[0]
    wall = 1_000.0 + 100.0 + 10_000.0 + 10.0  # median rank: computing + exposed + free + wait
    assert row["step_share"] == pytest.approx(70.0 / wall, rel=0.02)
    assert not bool(row["slow"])


def test_the_peer_wait_is_never_negative() -> None:
    # rank 0 is slow (above noise, 8 % of the step) yet its peers expose less communication
    # than it does: their wait does not show in the collectives; said so, never negative
    c = _computing([10_800.0, 10_810.0, 10_790.0, 10_800.0, 10_805.0], QUIET,
                   cno_slow=1_500.0, cno_peers=500.0)
    found = [f for f in advise(c) if f.rule == "slow_ranks" and " computes " in f.title]
    assert len(found) == 1
    f = found[0]
    assert "-" not in f.details.split("peers wait")[1].split("µs")[0]
    assert "peers wait 0 µs" in f.details
    # rank 0 exposes 1,500 µs, its peers 500 µs: 1,000 µs less, said as such, not as a wait
    assert "1.00 ms shorter than its own" in f.evidence
    assert f.ms_per_step == pytest.approx(0.8)  # the excess, 800 µs, is what is at stake


def test_a_slow_rank_in_a_heavy_stage_is_named_before_the_stage(tmp_path: Path) -> None:
    """dp 2 x pp 2, the full vocabulary: stage 1 (output layer) is heavier on its own, and
    rank 3 computes 1.3x longer than rank 2, its stage peer."""
    from perfkit.simulate import SlowRank, simulate

    hw = pk.Hardware.preset("ascend-910b")
    model = pk.ModelSpec.preset("llama2-7b").replace(num_layers=4)
    par = pk.ParallelConfig(dp=2, pp=2, num_micro_batches=4)
    simulate(model, par, hw, steps=3, faults=(SlowRank(3, 1.3),), out=tmp_path / "s",
             seed=3, aic_metrics=None, trace_kernels=False)
    prof = pk.load(tmp_path / "s", cache=False)
    found = advise(prof, parallel=par, hardware=hw)
    rules = [f.rule for f in found]
    assert found[0].rule == "slow_ranks" and found[0].title.startswith("Rank 3 computes")
    assert "stage_imbalance" in rules  # the stage's own excess comes after the rank
    assert rules.index("stage_imbalance") > 0
    comp = pk.analysis.step_breakdown(prof).groupby("rank")["computing_us"].median()
    assert comp[3] / comp[2] == pytest.approx(1.3, rel=0.05)  # the planted factor
    assert comp[2] > 1.05 * max(comp[0], comp[1])  # the stage is heavier without rank 3
