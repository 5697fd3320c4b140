"""The analyses' fast paths give the results of their straightforward versions.

The advisor shares intermediate tables between its rules (:func:`shared_results`); the
operator analyses price each distinct call once, look tokens and classes up per distinct
label and compare lanes by code. Each is checked here against the plain computation it
replaces, written out in this file, on bundled samples.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from shared_samples import HTA, PT_GPT3_OLD, PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit.analysis import _intervals, _order, _shared, _tasks, _util
from perfkit.analysis import compare as cmp
from perfkit.analysis import efficiency as eff
from perfkit.analysis import operators as ops
from perfkit.analysis.efficiency import chains as eff_chains
from perfkit.analysis.efficiency import costs as eff_costs
from perfkit.analysis.efficiency import table as eff_table

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = {
    "ascend": sample(PT_LEVEL1),
    "ascend-old": sample(PT_GPT3_OLD),
    "kineto": sample(HTA),
    "simulated": ROOT / "data" / "simulated" / "slow-rank",
    "simulated-pmu": ROOT / "data" / "simulated" / "llama2-7b-tp2",  # PMU counters, kernels
}
#: Those read from shared/samples (other projects' profiles; see tests/shared_samples.py).
SHARED = {"ascend", "ascend-old", "kineto"}


def _params(names: list[str]) -> list[Any]:
    return [shared_param(n) if n in SHARED else n for n in names]


@pytest.fixture(scope="module")
def profiles() -> dict[str, Any]:
    return {name: pk.load(p, cache=False, progress=False) for name, p in SAMPLES.items()
            if p.exists()}  # the shared ones' tests skip (CI: fail) without them


def _findings(found: list[Any]) -> list[tuple[Any, ...]]:
    """The fields of each finding, an unmeasured one's NaN time as None (NaN != NaN)."""
    return [(f.rule, f.severity, f.title, f.evidence, f.recommendation, f.score,
             None if math.isnan(f.ms_per_step) else f.ms_per_step, f.details)
            for f in found]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", _params(list(SAMPLES)))
def test_advice_with_shared_tables_equals_advice_without(profiles: Any, name: str,
                                                         monkeypatch: Any) -> None:
    prof = profiles[name]
    shared = pk.advise(prof)
    monkeypatch.setattr(_shared, "_SHARED", _NoMemo())
    plain = pk.advise(prof)
    assert _findings(shared) == _findings(plain)
    assert shared and not [f for f in shared if f.title.startswith("Rule ")]


class _NoMemo:
    """A stand-in for the memo's context variable: nothing is ever shared."""

    def get(self) -> None:
        return None

    def set(self, value: Any) -> object:
        return object()

    def reset(self, token: object) -> None:
        return None


@pytest.mark.parametrize("name", _params(list(SAMPLES)))
def test_prices_by_code_equal_the_merge(profiles: Any, name: str, monkeypatch: Any) -> None:
    prof = profiles[name]
    fast = eff.operator_costs(prof)
    monkeypatch.setattr(eff_costs, "_price_by_code", lambda *a, **k: None)
    monkeypatch.setattr(eff_costs, "_per_label", lambda labels, f: labels.map(f))
    merged = eff.operator_costs(prof)
    pd.testing.assert_frame_equal(fast, merged, check_exact=True)
    assert dict(fast.attrs) == dict(merged.attrs)
    if name != "simulated":
        assert fast["kind"].notna().any()


def _tokens_reference(kernels: pd.DataFrame) -> pd.Series:
    """Token of every row, each row's label matched against TOKENS in turn."""
    out = []
    for typ, name in zip(kernels["type"] if "type" in kernels else [None] * len(kernels),
                         kernels["name"], strict=True):
        typ = None if pd.isna(typ) else str(typ)
        generic = typ is None or typ.lower() in ("kernel", "gpu_memcpy", "gpu_memset", "")
        label = ("" if pd.isna(name) else str(name)) if generic else typ
        out.append(next((t for t, rx in ops._TOKEN_RE if rx.search(label)), "."))
    return pd.Series(out, index=kernels.index)


@pytest.mark.parametrize("name", _params(list(SAMPLES)))
def test_tokens_and_classes_equal_row_by_row(profiles: Any, name: str) -> None:
    k = profiles[name].kernels
    got = ops.kernel_tokens(k)
    assert got.tolist() == _tokens_reference(k).tolist()
    assert (got != ".").any()
    # classes: the per-distinct lookup equals classifying every row
    types = k["type"] if "type" in k.columns else None
    cls = cmp.kernel_class(k["name"], types, k.get("category"))
    names = k["name"].astype("string").fillna("")
    tt = types.astype("string").fillna("") if types is not None else \
        pd.Series("", index=k.index, dtype="string")
    ref = cmp._class_of_pairs(names.reset_index(drop=True), tt.reset_index(drop=True))
    ref = pd.Series(ref.to_numpy(), index=k.index).where(
        ~k["category"].eq("communication").fillna(False), "communication").astype(str)
    assert cls.tolist() == ref.tolist()


@pytest.mark.parametrize("name", _params(["ascend", "simulated", "simulated-pmu"]))
def test_chain_names_equal_the_joined_labels(profiles: Any, name: str) -> None:
    prof = profiles[name]
    chains = eff.elementwise_chains(prof)
    assert len(chains)
    rows, new_lane = eff_chains._ordered(prof, ("kind", "dur_us", "bytes", "label", "stream",
                                                 "thread"))
    mem = rows["kind"].eq("elementwise").fillna(False).to_numpy(bool)
    lane_col = "stream" if "stream" in rows.columns and rows["stream"].notna().any() \
        else "thread"
    lane = (rows["rank"].astype("string").fillna("") + "/"
            + rows[lane_col].astype("string").fillna("")).tolist()
    assert new_lane.tolist() == [i == 0 or lane[i] != lane[i - 1] for i in range(len(lane))]
    runs, cur = [], []
    for i, m in enumerate(mem):
        if m and cur and lane[i] == lane[cur[-1]] and mem[cur[-1]]:
            cur.append(i)
        else:
            if len(cur) >= 3:
                runs.append(cur)
            cur = [i] if m else []
    if len(cur) >= 3:
        runs.append(cur)
    labels = rows["label"].astype(str).tolist()
    assert chains["names"].tolist() == [" > ".join(labels[i] for i in r) for r in runs]


def test_value_changes_equal_text_comparison() -> None:
    rank = pd.Series([0, 0, 1, 1, pd.NA, pd.NA, 1], dtype="Int64")
    lane = pd.Series(["7", "7", "7", "8", "8", None, None], dtype="string")
    text = (rank.astype("string").fillna("") + "/" + lane.fillna("")).tolist()
    want = [a != b for a, b in zip(text[1:], text[:-1], strict=True)]
    assert _util.value_changes(rank, lane).tolist() == want


def test_pmu_bound_labels_equal_the_rule() -> None:
    rng = np.random.default_rng(0)
    n = 200
    k = pd.DataFrame({c: rng.choice([np.nan, 0.0, 0.1, 0.5, 0.9], n)
                      for c in ("aic_mac_ratio", "aiv_vec_ratio", "aic_mte2_ratio",
                                "aiv_mte3_ratio")})
    got = ops._bound_frame(k)
    comp = k[["aic_mac_ratio", "aiv_vec_ratio"]].max(axis=1)
    mem = k[["aic_mte2_ratio", "aiv_mte3_ratio"]].max(axis=1)
    want = pd.Series(np.where((comp < 0.2) & (mem < 0.2), "latency",
                              np.where(mem > comp, "memory", "compute")),
                     dtype=pd.StringDtype("pyarrow"))  # text in Arrow on every pandas
    want = want.where(comp.notna() & mem.notna() & ((comp > 0) | (mem > 0)))
    pd.testing.assert_series_equal(got, want)
    assert set(got.dropna()) == {"latency", "memory", "compute"}


def test_shared_results_are_computed_once_per_block() -> None:
    calls: list[int] = []
    frame = pd.DataFrame({"a": [1]})

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert _shared.shared("x", (frame,), (), compute) == 1  # outside a block: every time
    assert _shared.shared("x", (frame,), (), compute) == 2
    with _shared.shared_results():
        assert _shared.shared("x", (frame,), (1,), compute) == 3
        assert _shared.shared("x", (frame,), (1,), compute) == 3
        assert _shared.shared("x", (frame.copy(),), (1,), compute) == 4  # another frame
        assert _shared.shared("x", (frame,), (2,), compute) == 5         # other parameters
    with _shared.shared_results():
        assert _shared.shared("x", (frame,), (1,), compute) == 6        # a new block


def test_no_pattern_token_is_longer_than_one_character() -> None:
    """The pattern search's one-character-per-row text relies on it (else it falls back)."""
    assert all(len(t) == 1 for t, _ in ops.TOKENS)
    assert all(isinstance(rx, re.Pattern) for _, rx in ops._TOKEN_RE)


def _union_reference(frame: pd.DataFrame, keys: list[str]) -> list[tuple[Any, ...]]:
    """Merged intervals per group, by walking each group's intervals in start order."""
    out = []
    f = frame.dropna(subset=["start_us", "end_us"])
    groups = f.groupby(keys, dropna=False, sort=True) if keys else [((), f)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        cur: list[float] | None = None
        for s, e in zip(g.sort_values("start_us", kind="mergesort")["start_us"],
                        g.sort_values("start_us", kind="mergesort")["end_us"], strict=True):
            if cur is not None and s <= cur[1]:
                cur[1] = max(cur[1], e)
                continue
            if cur is not None:
                out.append((*key, *cur))
            cur = [s, e]
        out.append((*key, *cur))
    return [tuple(None if pd.isna(v) else v for v in row) for row in out]


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_interval_union_equals_a_walk_over_each_group() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(1, 40))
        f = pd.DataFrame({"rank": pd.array(rng.choice([0, 1, None], n), dtype="Int64"),
                          "step": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
                          "start_us": np.round(rng.uniform(0, 100, n))})
        f["end_us"] = f["start_us"] + np.round(rng.uniform(0, 20, n))
        f.loc[rng.random(n) < 0.1, "start_us"] = np.nan
        if f["start_us"].isna().all():
            continue
        for keys in (["rank", "step"], ["rank"], []):
            before = f.copy()
            got = _intervals.interval_union(f, keys)
            pd.testing.assert_frame_equal(f, before)  # the ends' running maximum is a copy
            assert list(got.columns) == [*keys, "start_us", "end_us", "length_us"]
            assert all(got[k].dtype == f[k].dtype for k in keys)
            rows = [tuple(None if pd.isna(v) else v for v in r)
                    for r in got[[*keys, "start_us", "end_us"]].itertuples(index=False)]
            assert rows == _union_reference(f, keys)
            assert np.allclose(got["length_us"], got["end_us"] - got["start_us"])


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_host_bound_equals_a_walk_over_each_step() -> None:
    """Busy time, gaps and their medians of each (rank, step), from the merged intervals
    of :func:`_union_reference`, on tasks out of order, with missing keys, missing bounds
    and negative durations; the kernels table is left as it was."""
    from perfkit.analysis import cluster
    from perfkit.profile import Profile, ProfileMeta

    def key(*values: Any) -> tuple[Any, ...]:
        return tuple(None if pd.isna(v) else v for v in values)

    rng = np.random.default_rng(13)
    for _ in range(60):
        n = int(rng.integers(1, 60))
        k = pd.DataFrame({"rank": pd.array(rng.choice([0, 1, None], n), dtype="Int64"),
                          "step": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
                          "start_us": np.round(rng.uniform(0, 5000, n)),
                          "dur_us": np.round(rng.uniform(-5, 900, n))})
        k.loc[rng.random(n) < 0.1, "dur_us"] = np.nan
        if rng.random() < 0.3:  # a rank's tasks in order, as a profile writes them
            k = k.assign(rank=pd.array([0] * n, dtype="Int64"),
                         step=pd.array([1] * n, dtype="Int64")).sort_values("start_us")
        prof = Profile(ProfileMeta("test"), {"kernels": k})
        k = prof.kernels  # as the profile holds it
        before = k.copy()
        got = cluster.host_bound(prof)
        pd.testing.assert_frame_equal(k, before)
        f = k.assign(end_us=k["start_us"] + k["dur_us"].clip(lower=0))
        f = f.dropna(subset=["end_us"])
        segments: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
        for *group, s, e in _union_reference(f, ["rank", "step"]):
            segments.setdefault(key(*group), []).append((s, e))
        groups = f.groupby(["rank", "step"], dropna=False, sort=True)
        assert len(got) == groups.ngroups
        for row, (group, tasks) in zip(got.itertuples(), groups, strict=True):
            assert key(row.rank, row.step) == key(*group)
            mine = np.array(segments[key(*group)])
            gaps = mine[1:, 0] - mine[:-1, 1]
            assert row.kernels == len(tasks)
            assert row.busy_us == pytest.approx(float((mine[:, 1] - mine[:, 0]).sum()))
            assert row.span_us == pytest.approx(tasks["end_us"].max() - tasks["start_us"].min())
            assert row.gaps == len(gaps)
            assert row.launch_gap_us == pytest.approx(float(gaps[gaps < 1000].sum()))
            assert row.long_gap_us == pytest.approx(float(gaps[gaps >= 1000].sum()))
            assert row.median_kernel_us == pytest.approx(float(tasks["dur_us"].median()))
            want = float(np.median(gaps)) if len(gaps) else np.nan
            assert row.median_gap_us == pytest.approx(want, nan_ok=True)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_stable_order_equals_a_stable_sort() -> None:
    """None exactly when a stable sort would leave the rows as they are."""
    rng = np.random.default_rng(11)
    big = 2**53  # int64 values a float64 cannot tell apart
    seen = {"sorted": 0, "unsorted": 0}
    for trial in range(400):
        n = int(rng.integers(0, 25))
        f = pd.DataFrame({
            "rank": pd.array(rng.choice([0, 1, None], n), dtype="Int64"),
            "stream": pd.array(rng.choice([big, big + 1, None], n), dtype="Int64"),
            "start_us": rng.choice([0.0, 1.5, np.nan, np.inf], n)})
        if trial % 2:  # half the frames already in order, with their index shuffled
            f = f.sort_values(["rank", "stream", "start_us"], kind="mergesort")
        f.index = rng.permutation(n)
        want = f.reset_index(drop=True).sort_values(["rank", "stream", "start_us"],
                                                   kind="mergesort").index.to_numpy()
        got = _order.stable_order(f, ["rank", "stream", "start_us"])
        if got is None:
            assert (want == np.arange(n)).all()
            seen["sorted"] += 1
        else:
            assert (got == want).all()
            seen["unsorted"] += 1
    assert min(seen.values()) > 100
    # a missing value in a middle key: the rows equal there, the last key decides
    f = pd.DataFrame({"a": [1, 1], "b": [np.nan, np.nan], "c": [2.0, 1.0]})
    assert _order.stable_order(f, ["a", "b", "c"]).tolist() == [1, 0]
    # text keys are not checked: always sorted
    f = pd.DataFrame({"t": pd.array(["a", "b"], dtype="string")})
    assert _order.stable_order(f, ["t"]).tolist() == [0, 1]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_group_codes_give_the_groups_of_groupby() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 50))
        f = pd.DataFrame({"rank": pd.array(rng.choice([0, 5, None], n), dtype="Int64"),
                          "step": pd.array(rng.choice([1, 2, None], n), dtype="Int64"),
                          "name": pd.array(rng.choice(["a", "b", None], n), dtype="string"),
                          "x": rng.random(n)})
        for keys in (["rank", "step"], ["rank"], ["name", "rank"]):
            want = f.groupby(keys, dropna=False).agg(s=("x", "sum"), n=("x", "size"))
            code, index = _util.group_codes(f, keys)
            got = f.groupby(code).agg(s=("x", "sum"), n=("x", "size")).set_axis(index)
            pd.testing.assert_frame_equal(got, want)
    rank = pd.Series([2, 2, pd.NA, 3, 3, pd.NA], dtype="Int64")
    assert _util.group_changes(rank).tolist() == [False, True, True, False, True]


@pytest.mark.shared_samples
def test_take_rows_equals_pandas_indexing(profiles: Any) -> None:
    rng = np.random.default_rng(5)
    n = 40
    f = pd.DataFrame({
        "text": pd.array(rng.choice(["a", "bb", None], n), dtype="string"),
        "str": pd.Series(rng.choice(["a", "bb"], n)).astype(str),
        "int": pd.array(rng.choice([1, None], n), dtype="Int64"),
        "float": rng.random(n), "obj": pd.Series(rng.choice(["x", None], n), dtype=object),
        "cat": pd.Categorical(rng.choice(["u", "v"], n)), "flag": rng.random(n) > 0.5,
        "when": pd.date_range("2026-01-01", periods=n)}, index=rng.integers(0, 9, n))
    f.attrs["notes"] = ["kept"]
    k = profiles["ascend"].kernels
    for frame in (f, k):
        m = len(frame)
        for rows in (rng.random(m) > 0.5, np.zeros(m, bool), rng.permutation(m),
                     np.array([1, 1, 0]), np.arange(0)):
            want = frame[rows] if rows.dtype == bool else frame.take(rows)
            got = _util.take_rows(frame, rows)
            pd.testing.assert_frame_equal(got, want)
            assert got.attrs == want.attrs


def test_take_from_several_chunks_equals_arrow_take() -> None:
    # a text column in chunks (as read from the cache's row groups), a few positions asked
    rng = np.random.default_rng(8)
    chunks = [pa.array(rng.choice(["a", "bb", None, "ccc"], size).tolist(), pa.large_string())
              for size in (50, 0, 70, 1, 80)]
    data = pa.chunked_array(chunks)
    arr = pd.array(pd.Series(data, dtype=pd.StringDtype("pyarrow")))
    for positions in (np.array([200, 0, 120, 49, 50, 50, 199]), rng.integers(0, 201, 20),
                      np.array([120])):
        got = _util.take_array(arr, positions)
        assert got.dtype == arr.dtype
        assert [None if v is pd.NA else v for v in got.tolist()] == \
            [data[int(i)].as_py() for i in positions]
        assert pa.concat_arrays(got._pa_array.chunks).equals(
            data.take(positions).combine_chunks())


def test_text_matches_equal_matching_every_row() -> None:
    names = pd.Series(["aten::item", None, "Dataloader.next", "aten::ITEM_x", "", "mul"] * 5,
                      index=np.arange(30) * 3, dtype=object)
    for pattern in (r"(?i)item", r"^aten::", r"(?i)dataloader|determin", r"zzz"):
        want = names.astype("string").str.contains(pattern, regex=True).fillna(False)
        with _shared.shared_results():
            got = _util.text_matches(names, pattern)
        pd.testing.assert_series_equal(got, want.astype(bool))


def test_name_counts_equal_grouping_the_rows() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 60))
        k = pd.DataFrame({
            "rank": pd.array(rng.choice([0, 1, None, 10], n), dtype="Int64"),
            "name": pd.array(rng.choice(["b", "a", "B", "ä", None, "10", "9"], n),
                             dtype="string")})
        rows = rng.random(n) > 0.4
        want = k[rows].groupby(["rank", "name"], dropna=False).size()
        with _shared.shared_results():
            got = ops._name_counts(k, rows)
        pd.testing.assert_series_equal(got, want)


def test_pmu_row_maxima_equal_pandas_max() -> None:
    rng = np.random.default_rng(1)
    n = 50

    def col() -> np.ndarray:
        v = rng.random(n)
        v[rng.random(n) < 0.4] = np.nan
        return v

    for _ in range(10):
        f = pd.DataFrame({"aic_mac_ratio": col(), "aiv_vec_ratio": col(),
                          "aic_mte2_ratio": col(), "aiv_mte3_ratio": pd.array(
                              np.where(rng.random(n) < .3, None, rng.random(n)),
                              dtype="Float64")}, index=rng.integers(0, 100, n))
        comp, mem = eff_table._pmu(f)
        pd.testing.assert_series_equal(
            comp, f[["aic_mac_ratio", "aiv_vec_ratio"]].astype("float64").max(axis=1))
        pd.testing.assert_series_equal(
            mem, f[["aic_mte2_ratio", "aiv_mte3_ratio"]].astype("float64").max(axis=1))


def test_kernel_classes_equal_the_first_matching_regex() -> None:
    labels = pd.Series(["matmulv2", "flash_fwd_kernel", "rmsnorm", "broadcast_to", "cast",
                        "hcom_allreduce_", "", "softmaxv2", "fbgemm_thing", None] * 3,
                       dtype="string")
    want = pd.Series("other", index=labels.index, dtype=object)
    done = pd.Series(False, index=labels.index)
    for c, rx in cmp._CLASS_RES:  # the regexes in order, over every row
        hit = labels.str.contains(rx, regex=True).fillna(False).astype(bool) & ~done
        want[hit] = c
        done |= hit
    assert cmp._classify(labels).tolist() == want.tolist()


@pytest.mark.parametrize("name", _params(["ascend", "kineto", "simulated-pmu"]))
def test_tiny_kernel_runs_equal_a_walk_over_each_stream(profiles: Any, name: str) -> None:
    k = profiles[name].kernels
    k = k[k["dur_us"].notna() & k["category"].ne("communication").fillna(True)]
    k = k.assign(stream=k["stream"] if "stream" in k.columns else pd.NA)
    k = k.sort_values(["rank", "stream", "start_us"], kind="mergesort")
    longest: dict[Any, int] = {}
    run, prev = 0, None
    for rank, stream, dur in zip(k["rank"], k["stream"], k["dur_us"], strict=True):
        lane = (rank, None if pd.isna(stream) else stream)
        run = run + 1 if dur < 10.0 and prev == lane and run > 0 else int(dur < 10.0)
        prev = lane
        longest[rank] = max(longest.get(rank, 0), run)
    got = ops.tiny_kernels(profiles[name])
    assert dict(zip(got["rank"], got["longest_run"], strict=True)) == longest
    assert got["tiny_kernels"].tolist() == [
        int((k.loc[k["rank"] == r, "dur_us"] < 10.0).sum()) for r in got["rank"]]


@pytest.mark.parametrize("name", _params(list(SAMPLES)))
def test_efficiency_groups_by_call_equal_the_groups_by_row(profiles: Any, name: str) -> None:
    prof = profiles[name]
    for p in (list(prof) if hasattr(prof, "ranks") else [prof]):
        rows = eff_costs.narrow_costs(p)
        if rows.empty:
            continue
        assert "_call" in rows.columns
        comp, mem = eff_table._pmu(rows)
        ok = comp.notna() & mem.notna()
        by_row = eff_table._partial_by_row(rows, "label", comp, mem, ok)
        assert len(by_row)
        pd.testing.assert_frame_equal(eff_table._partial_by_call(rows, comp, mem, ok), by_row,
                                      check_exact=False, rtol=1e-12)


def test_run_names_equal_the_joined_codes() -> None:
    rng = np.random.default_rng(11)
    for base in (3, 70_000):  # sequences coded as one integer, and too long for that
        codes = rng.integers(0, base, 400)
        text = [f"op{i}" for i in range(base)]
        lo = np.sort(rng.choice(380, 50, replace=False))
        hi = lo + rng.integers(2, 9, 50)
        want = [" > ".join(text[c] for c in codes[a:b]) for a, b in zip(lo, hi, strict=True)]
        assert eff_chains._joined_runs(codes, text, lo, hi).tolist() == want


@pytest.mark.parametrize("name", _params(["ascend", "kineto", "simulated-pmu"]))
def test_tasks_in_scope_equal_the_plain_filter(profiles: Any, name: str) -> None:
    k = next(iter(profiles[name])).kernels if hasattr(profiles[name], "ranks") else \
        profiles[name].kernels
    columns = ("rank", "name", "dur_us", "input_shapes")
    keep = k["dur_us"].notna() & k["category"].ne("communication").fillna(True)
    wanted = [c for c in k.columns if c in columns or c in _tasks.PMU_RATIOS]
    want = k.loc[keep.to_numpy(bool), wanted]
    assert len(want) < len(k)  # the sample has tasks out of scope
    pd.testing.assert_frame_equal(_tasks.tasks_in_scope(k, False, columns), want)
    with _shared.shared_results():  # columns taken once, then reused by the next caller
        first = _tasks.tasks_in_scope(k, False, columns)
        again = _tasks.tasks_in_scope(k, False, ("name", "step"))
        pd.testing.assert_frame_equal(first, want)
        assert again["name"].array is first["name"].array or \
            again["name"].array.__arrow_array__() is first["name"].array.__arrow_array__()


def test_lane_order_equals_sorting_the_lane_text(monkeypatch: Any) -> None:
    rng = np.random.default_rng(13)
    for _ in range(40):
        n = int(rng.integers(2, 40))
        rows = pd.DataFrame({"rank": pd.array(rng.choice([0, 1, None], n), dtype="Int64"),
                             "stream": pd.array(rng.choice([2, 10, None], n), dtype="Int64"),
                             "start_us": rng.random(n)})
        if rows["stream"].isna().all():
            continue
        monkeypatch.setattr(eff_chains, "narrow_costs", lambda _p, rows=rows: rows)
        _rows, got, new_lane = eff_chains._order(None)
        lane = rows["stream"].astype("string").fillna("")  # "10" sorts before "2"
        keys = rows.assign(_lane=lane)[["rank", "_lane", "start_us"]]
        want = keys.sort_values(["rank", "_lane", "start_us"], kind="mergesort").index
        assert got.tolist() == want.tolist()
        # a lane begins where the (rank, stream text) changes, missing ones equal
        text = (rows["rank"].astype("string").fillna("") + "/" + lane).to_numpy()[got]
        assert new_lane.tolist() == [i == 0 or text[i] != text[i - 1] for i in range(n)]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_lanes_equal_a_stable_sort_by_rank_stream_and_start() -> None:
    """:func:`scope_lanes`: the order of ``sort_values(["rank", "stream", "start_us"],
    kind="mergesort")``, lanes beginning where (rank, stream) changes (missing equal to
    missing), and the rows without a rank or stream; tasks in time order, interleaved or
    not, with missing keys and starts, communication left out."""
    rng = np.random.default_rng(17)
    for trial in range(120):
        n = int(rng.integers(1, 60))
        k = pd.DataFrame({
            "rank": pd.array(rng.choice([0, 1, None] if trial % 3 else [5], n), dtype="Int64"),
            "stream": pd.array(rng.choice([2, 3, 70000, None] if trial % 4 == 0 else [2, 3],
                                          n), dtype="Int64"),
            "category": pd.array(rng.choice(["compute", "communication"], n, p=[.8, .2]),
                                 dtype="string"),
            "start_us": np.sort(rng.random(n)) if trial % 2 else rng.random(n),
            "dur_us": rng.random(n)})
        k.loc[rng.random(n) < 0.1, "start_us"] = np.nan
        scope = k[k["category"] != "communication"].reset_index(drop=True)
        want = scope.sort_values(["rank", "stream", "start_us"], kind="mergesort")
        with _shared.shared_results():
            lanes = _tasks.scope_lanes(k)
        got = np.arange(len(scope)) if lanes.positions is None else lanes.positions
        assert got.tolist() == want.index.tolist()
        keys = [(None if pd.isna(r) else r, None if pd.isna(s) else s)
                for r, s in zip(want["rank"], want["stream"], strict=True)]
        assert lanes.starts.tolist() == [i for i in range(len(keys))
                                         if i == 0 or keys[i] != keys[i - 1]]
        unknown = (want["rank"].isna() | want["stream"].isna()).to_numpy(bool)
        assert (lanes.unknown if lanes.unknown is not None
                else np.zeros(len(scope), dtype=bool)).tolist() == unknown.tolist()
        cont = lanes.continues(len(scope))
        assert cont.tolist() == [i > 0 and keys[i] == keys[i - 1] and not unknown[i]
                                 and not unknown[i - 1] for i in range(len(keys))]


def test_typed_equals_astype_of_the_columns_named() -> None:
    """``typed``: ``frame[list(columns)].astype(columns)``, whether the frame holds other
    columns, another order, or already the types; a new frame whose change leaves the
    frame given as it was."""
    frame = pd.DataFrame({"rank": np.array([0, 1, 2]), "flag": np.array([True, False, True]),
                          "name": ["a", None, "c"], "us": [1.5, np.nan, 3.0],
                          "n": pd.array([1, None, 3], dtype="Int64")}, index=[7, 8, 9])
    wanted = [{"rank": "Int64", "flag": "boolean", "name": "string", "us": "float64",
               "n": "Int64"},                                  # every column, in order
              {"us": "float64", "rank": "Int64"},              # some, reordered
              {"rank": "int64", "us": "float64", "n": "Int64"},  # nothing changes
              {"n": "float64", "flag": "bool"}]
    for columns in wanted:
        before = frame.copy()
        got = _util.typed(frame, columns)
        want = frame[list(columns)].astype(columns)
        pd.testing.assert_frame_equal(got, want)
        assert got is not frame
        with warnings.catch_warnings():  # pandas 2 warns of writing into a selection
            warnings.simplefilter("ignore")
            got[next(iter(columns))] = 0  # the caller's own frame, its columns ...
            got.iloc[0, -1] = got.iloc[1, -1]  # ... and their values
        pd.testing.assert_frame_equal(frame, before)


def test_has_values_finds_a_value_below_the_rows_it_looks_at_first() -> None:
    from perfkit.analysis._util import _HEAD_ROWS, has_values

    n = _HEAD_ROWS * 3
    for dtype, value in (("float64", 1.5), ("Int64", 3), ("string", "x"), ("object", "y")):
        for at in (None, 0, _HEAD_ROWS - 1, _HEAD_ROWS, n - 1):
            col = pd.Series([None] * n, dtype=dtype)
            if at is not None:
                col.iloc[at] = value
            frame = pd.DataFrame({"c": col})
            assert has_values(frame, "c") == bool(col.notna().any()) == (at is not None)
    assert not has_values(pd.DataFrame({"c": [1.0]}), "d")
    assert not has_values(pd.DataFrame({"c": pd.Series([], dtype="float64")}), "c")
