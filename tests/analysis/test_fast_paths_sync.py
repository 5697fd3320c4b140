"""The host-side fast paths of ``pk.advise`` give the results of their plain versions.

:func:`perfkit.analysis.sync_points` finds the outermost synchronising calls with one
numpy sort and sums them per (rank, name) by integer code; :func:`count_distinct` counts
step numbers with a ``bincount``. Each is checked here against the pandas computation it
replaced, written out (benchmarks/README.md, session 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis import host_sync
from perfkit.analysis._util import count_distinct


def _plain_outermost(sel: pd.DataFrame) -> np.ndarray:
    """The pandas version: keys as text, a stable sort, a running maximum per group."""
    keep = np.ones(len(sel), dtype=bool)
    keys = ["rank", "thread"] if "rank" in sel.columns else ["thread"]
    start = sel["start_us"].to_numpy(np.float64, na_value=np.nan)
    end = start + np.nan_to_num(sel["dur_us"].to_numpy(np.float64, na_value=np.nan))
    frame = pd.DataFrame({k: sel[k].astype("string").to_numpy(object) for k in keys})
    frame = frame.assign(start=start, neg_end=-end, pos=np.arange(len(sel)))
    frame = frame[frame["thread"].notna() & np.isfinite(start)]
    frame = frame.sort_values([*keys, "start", "neg_end"], kind="mergesort")
    ends = -frame["neg_end"]
    groups = [frame[k] for k in keys]
    before = ends.groupby(groups, dropna=False, sort=False).cummax() \
        .groupby(groups, dropna=False, sort=False).shift(1)
    keep[frame["pos"].to_numpy()[(ends <= before + 1e-3).to_numpy(bool)]] = False
    return keep


def _calls(seed: int, n: int, ranks: int) -> pd.DataFrame:
    """Calls on a few ranks and threads, with equal starts, equal ends, nested and
    overlapping calls, a missing thread, rank, start or duration here and there."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 40, n).astype(float)
    dur = rng.integers(0, 12, n).astype(float)
    start[rng.random(n) < 0.05] = np.nan
    dur[rng.random(n) < 0.05] = np.nan
    thread = pd.array(rng.integers(1, 4, n), dtype="Int64")
    thread[rng.random(n) < 0.1] = pd.NA
    rank = pd.array(rng.integers(0, ranks, n), dtype="Int64")
    rank[rng.random(n) < 0.05] = pd.NA
    names = np.array(["aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize"])
    name = pd.array(names[rng.integers(0, 3, n)], dtype="string")
    name[rng.random(n) < 0.05] = pd.NA
    return pd.DataFrame({"rank": rank, "name": name, "thread": thread, "start_us": start,
                         "dur_us": dur})


@pytest.mark.parametrize("seed", range(6))
def test_outermost_calls_are_the_plain_sorts(seed: int) -> None:
    sel = _calls(seed, 400, ranks=1 + seed % 3)
    got = host_sync._outermost_calls(sel)
    assert got.tolist() == _plain_outermost(sel).tolist()
    assert not got.all()  # some calls are nested: the test sees both answers
    no_rank = sel.drop(columns="rank")
    assert host_sync._outermost_calls(no_rank).tolist() == _plain_outermost(no_rank).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_sums_per_rank_and_name_are_the_groupby(seed: int) -> None:
    sel = _calls(seed, 300, ranks=3)
    got = host_sync._per_rank_and_name(sel)
    want = sel.groupby(["rank", "name"], dropna=False).agg(
        count=("dur_us", "size"), host_us=("dur_us", "sum")).reset_index()
    assert got["rank"].astype("Int64").tolist() == want["rank"].astype("Int64").tolist()
    assert got["name"].astype("string").tolist() == want["name"].astype("string").tolist()
    assert got["count"].tolist() == want["count"].tolist()
    assert got["host_us"].tolist() == want["host_us"].tolist()


@pytest.mark.parametrize("values", [
    [3, 1, 3, None, 7], [5] * 4, [None, None], [], [0, 10**12, 5], [-4, -4, 2]])
def test_count_distinct_is_nunique(values: list) -> None:
    col = pd.Series(values, dtype="Int64")
    assert count_distinct(col) == col.nunique()
    assert count_distinct(col.astype("float64")) == col.astype("float64").nunique()
