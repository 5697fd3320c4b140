"""Per-rank summaries: the same frame from an eager and a lazy (Dask) cluster, and figures
that match a direct computation on the eager tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit.analysis import rank_summary as rs
from perfkit.analysis._frames import aggregate, collect, is_lazy, per_rank
from perfkit.analysis.steps import step_breakdown

ROOT = Path(__file__).resolve().parents[2]
REAL = sample(PT_LEVEL1)
SIM16 = ROOT / "data" / "simulated" / "llama2-13b-tuned-dp8-pp2"
SLOW = ROOT / "data" / "simulated" / "slow-rank"


@pytest.fixture(scope="module")
def eager():
    return {p: pk.load(p, cache=False, progress=False) for p in (REAL, SIM16, SLOW)
            if p.exists()}  # the shared one's tests skip (CI: fail) without it


def test_comm_summary_matches_a_direct_sum(eager):
    c = eager[SIM16]
    out = rs.rank_comm_summary(c)
    assert out["rank"].tolist() == c.ranks
    ops = c.comm_ops
    for r in (0, 9):
        mine = ops[ops["rank"] == r]
        row = out[out["rank"] == r].iloc[0]
        assert row["ops"] == mine["elapse_us"].notna().sum()
        assert row["total_us"] == pytest.approx(mine["elapse_us"].sum(), rel=1e-12)
        assert row["wait_share"] == pytest.approx(mine["wait_us"].sum()
                                                  / mine["elapse_us"].sum(), rel=1e-12)
        assert row["max_us"] == mine["elapse_us"].max()
    by_kind = rs.rank_comm_summary(c, by_op_type=True)
    assert {"receive", "send"} <= set(by_kind["op_type"])  # pipeline-parallel job
    total = by_kind.groupby("rank")["total_us"].sum()
    assert np.allclose(total.to_numpy(), out["total_us"].to_numpy(), rtol=1e-12)


def test_comm_summary_without_time_split_is_na():
    ops = pd.DataFrame({"name": ["allreduce_1", "allreduce_2"], "elapse_us": [3.0, 5.0]})
    prof = pk.Profile(pk.ProfileMeta(source_format="kineto", rank=4), {"comm_ops": ops})
    out = rs.rank_comm_summary(prof)
    assert out[["rank", "ops", "total_us", "mean_us"]].iloc[0].tolist() == [4, 2, 8.0, 4.0]
    assert out["wait_us"].isna().all() and out["wait_share"].isna().all()
    assert rs.rank_comm_summary(pk.Profile(pk.ProfileMeta(source_format="x", rank=0),
                                           {})).empty


def test_step_summary_is_the_mean_of_the_breakdown(eager):
    c = eager[SLOW]
    s = step_breakdown(c)
    out = rs.rank_step_summary(c)
    r2 = s[s["rank"] == 2]
    row = out[out["rank"] == 2].iloc[0]
    assert row["steps"] == len(r2)
    assert row["computing_us"] == pytest.approx(r2["computing_us"].mean())
    assert row["computing_share"] == pytest.approx(r2["computing_us"].mean()
                                                   / r2["step_us"].mean())
    # the slow rank of this scenario computes longest
    assert out.loc[out["computing_us"].idxmax(), "rank"] == 2


@pytest.mark.shared_samples
def test_helpers_on_pandas_need_no_dask(eager):
    c = eager[REAL]
    assert not is_lazy(c) and not is_lazy(c.kernels)
    agg = aggregate(c.kernels, ["rank"], {"dur_us": ["count", "sum"]})
    direct = c.kernels.groupby("rank")["dur_us"].agg(["count", "sum"]).reset_index()
    assert agg["dur_us_sum"].tolist() == direct["sum"].tolist()
    assert collect(c.steps, ["rank", "step"]).columns.tolist() == ["rank", "step"]
    pd.testing.assert_frame_equal(per_rank(c, step_breakdown), step_breakdown(c))


@pytest.fixture(scope="module")
def lazy(dask_client):
    """The lazy (Dask) cluster of each folder, on the module's Dask client (conftest)."""
    return {p: pk.load(p, engine="dask", client=dask_client, progress=False)
            for p in (REAL, SIM16, SLOW) if p.exists()}


@pytest.mark.slow
@pytest.mark.parametrize("path", [shared_param(REAL), SIM16, SLOW],
                         ids=["real", "sim16", "slow-rank"])
def test_lazy_and_eager_give_the_same_frames(path, eager, lazy):
    e, d = eager[path], lazy[path]
    assert is_lazy(d) and is_lazy(d.kernels)
    for derive in ("auto", "always", "never"):
        pd.testing.assert_frame_equal(rs.rank_step_breakdown(d, derive),
                                      step_breakdown(e, derive))
    pd.testing.assert_frame_equal(rs.rank_step_summary(d), rs.rank_step_summary(e))
    for by in (False, True):
        pd.testing.assert_frame_equal(rs.rank_comm_summary(d, by), rs.rank_comm_summary(e, by))
    spec = {"dur_us": ["count", "sum", "max"], "wait_us": ["sum"]}
    pd.testing.assert_frame_equal(aggregate(d.kernels, ["rank", "category"], spec),
                                  aggregate(e.kernels, ["rank", "category"], spec))

    def where(f):
        return f["category"] == "communication"

    pd.testing.assert_frame_equal(collect(d.kernels, ["rank", "name", "dur_us"], where),
                                  collect(e.kernels, ["rank", "name", "dur_us"], where)
                                  .reset_index(drop=True))
