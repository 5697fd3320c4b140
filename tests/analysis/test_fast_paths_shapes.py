"""The shape reading's and the operator pricing's fast paths give the results of their
straightforward versions.

:func:`perfkit.analysis.shapes.records._kept` decides which operators the model reading
keeps once per distinct (name, type, op_name) and spreads the answer back by code, as
:func:`perfkit.analysis.efficiency.costs._label` labels the operators it prices;
:func:`perfkit.analysis.shapes.counts._followed_by` finds each log-softmax's next operator
by a binary search in its lane. Each is checked here against the plain row-by-row
computation it replaces, written out in this file: on real profiles (shared samples,
perfkit's H100 recording) and on random layouts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_samples import HTA, PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit.analysis.efficiency import costs
from perfkit.analysis.shapes import counts, records

ROOT = Path(__file__).resolve().parents[2]
PROFILES = [shared_param(HTA, id="kineto"), shared_param(PT_LEVEL1, id="ascend"),
            pytest.param(ROOT / "tests" / "data" / "kineto_llama_h100", id="kineto-h100"),
            pytest.param(ROOT / "data" / "simulated" / "llama2-7b-tp2", id="simulated")]


def _plain_kept(frame: pd.DataFrame) -> np.ndarray:
    """Row by row: the label of each row, then the rule (a kept label, or an untyped row
    named as a matrix product)."""
    label = records._label(frame).astype(str)
    typ = frame["type"].astype("string").fillna("") if "type" in frame.columns else None
    out = np.zeros(len(frame), dtype=bool)
    for i, (name, lab) in enumerate(zip(frame["name"].astype(str), label, strict=True)):
        untyped = typ is None or typ.iloc[i] == ""
        out[i] = (untyped and records._GEMM.search(name) is not None) or any(
            rx.search(lab) for rx in records._KEPT_LABELS)
    return out


@pytest.mark.parametrize("path", PROFILES)
def test_kept_rows_match_the_row_by_row_rule(path: Path | str) -> None:
    profile = pk.load(path if isinstance(path, Path) else sample(path), progress=False)
    for name in ("kernels", "ops"):
        frame = getattr(profile, name)
        if frame is None or frame.empty or "input_shapes" not in frame.columns:
            continue
        frame = frame[frame["input_shapes"].notna()].reset_index(drop=True)
        fast = records._kept(frame)
        plain = _plain_kept(frame)
        assert plain.any(), f"{name}: the sample keeps some operators"
        np.testing.assert_array_equal(fast, plain)


@pytest.mark.parametrize("path", PROFILES)
def test_cost_labels_by_distinct_texts_match_the_row_labels(
        path: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = pk.load(path if isinstance(path, Path) else sample(path), progress=False)
    monkeypatch.setattr(costs, "_LABEL_BY_ROW_MAX", 0)  # the coded path at any size
    for name in ("kernels", "ops"):
        frame = getattr(profile, name)
        if frame is None or frame.empty or "name" not in frame.columns:
            continue
        plain = costs._row_labels(frame)
        fast = costs._label(frame)
        assert plain.nunique() > 1
        pd.testing.assert_series_equal(fast, plain)


def _plain_followed_by(recs: pd.DataFrame, first: np.ndarray, then: np.ndarray
                       ) -> np.ndarray:
    """For each row of ``first``: every later row of its rank, lane and step, the earliest
    (longest first, then table order) taken."""
    rank = recs["rank"].astype("Int64").fillna(-1).to_numpy(np.int64)
    lane = recs["lane"].astype("string").fillna("").to_numpy(object)
    step = recs["step"].astype("Float64").fillna(-1.0).to_numpy(np.float64)
    start = recs["start_us"].to_numpy(np.float64)
    end = recs["end_us"].astype("Float64").to_numpy(np.float64, na_value=np.nan) \
        if "end_us" in recs.columns else np.full(len(recs), np.nan)
    end = np.where(np.isnan(end), start, end)
    out = np.zeros(len(recs), dtype=bool)
    for i in np.flatnonzero(first):
        later = (rank == rank[i]) & (lane == lane[i]) & (step == step[i]) & (
            start >= end[i] if end[i] > start[i] else start > start[i])
        js = np.flatnonzero(later)
        if js.size:
            nxt = js[np.lexsort((-end[js], start[js]))[0]]
            out[i] = bool(then[nxt])
    return out


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_followed_by_matches_the_plain_search_on_random_layouts() -> None:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(300):
        n = int(rng.integers(1, 60))
        start = rng.integers(0, 20, n).astype(float)
        start[rng.random(n) < 0.05] = np.nan  # a row without a start follows nothing
        end = pd.array(start + rng.integers(0, 5, n), dtype="Float64")
        if rng.random() < 0.3:
            end[rng.random(n) < 0.2] = pd.NA
        recs = pd.DataFrame({
            "rank": pd.array(rng.integers(0, 2, n), dtype="Int64"),
            "lane": pd.array(rng.choice(["a", "b", None], n), dtype="string"),
            "step": pd.array(rng.integers(1, 3, n), dtype="Int64"),
            "start_us": start, "end_us": end})
        if rng.random() < 0.2:
            recs = recs.drop(columns="end_us")
        first, then = rng.random(n) < 0.4, rng.random(n) < 0.5
        plain = _plain_followed_by(recs, first, then)
        np.testing.assert_array_equal(counts._followed_by(recs, first, then), plain)
        found += int(plain.sum())
    assert found > 100  # the layouts do exercise the search
