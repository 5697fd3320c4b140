"""The advisor's faster analyses give the results of their straightforward versions.

Each fast path written for ``pk.advise`` on a million tasks (benchmarks/README.md, "The
first answer") is checked against the plain pandas computation it replaces, written out
here: names read by code in :func:`recompute_scopes`, numeric stable sorts, medians and
running maxima per contiguous group, prices of keys coded on the whole table, and the
spread of a call's price when every task is a call of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, sample, shared_param

import perfkit as pk
from perfkit.analysis import _order, _shared
from perfkit.analysis._util import n_step_pairs
from perfkit.analysis.efficiency import costs as eff_costs
from perfkit.analysis.efficiency import table as eff_table
from perfkit.analysis.recompute import RECOMPUTE_SCOPE, SCOPE_COLUMNS, recompute_scopes
from perfkit.profile import Profile, ProfileMeta

ROOT = Path(__file__).resolve().parents[2]
RECOMPUTE = ROOT / "tests" / "data" / "mindspore_cpu_recompute"  # MindSpore, recompute_ scopes
SIMULATED = ROOT / "data" / "simulated" / "llama2-7b-tp2"  # Ascend-like tasks with shapes


def _plain_scopes(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """recompute_scopes written row by row: each task's name matched on its own."""
    from perfkit.analysis.recompute import _scope_parts

    if "category" in frame.columns:
        frame = frame[frame["category"].eq("compute").fillna(False).to_numpy(bool)]
    frame = frame if "rank" in frame.columns else frame.assign(rank=pd.NA)
    rows = []
    for rank, g in frame.groupby(frame["rank"].astype("Float64").fillna(-1.0), sort=True):
        names = g["name"].astype("string").fillna("")
        scoped = names.str.contains(RECOMPUTE_SCOPE, regex=True).to_numpy(bool)
        fwd = scoped & ~names.str.startswith("Gradients/").to_numpy(bool)
        dur = g["dur_us"].to_numpy(np.float64)
        pairs = n_step_pairs(g)
        layer_of = {n: _scope_parts(str(n))[0] for n in names}
        layers = sorted({x for x in layer_of.values() if x is not None})
        scoped_layers = sorted({layer_of[n] for n in names[scoped] if layer_of[n] is not None})
        mode = ("none" if not scoped.any() else "cells" if not layers else
                "full" if scoped_layers == layers else "partial")
        compute, fwd_us = np.nansum(dur) / pairs, np.nansum(dur[fwd]) / pairs
        rows.append({"rank": pd.NA if rank < 0 else int(rank), "source": source,
                     "tasks": len(g), "scoped_tasks": int(scoped.sum()),
                     "forward_scoped_tasks": int(fwd.sum()),
                     "scoped_names": names[scoped].nunique(), "forward_scoped_us": fwd_us,
                     "compute_us": compute,
                     "forward_scoped_share": fwd_us / compute if compute > 0 else np.nan,
                     "layers": ",".join(map(str, layers)),
                     "scoped_layers": ",".join(map(str, scoped_layers)), "recompute": mode})
    return pd.DataFrame(rows, columns=list(SCOPE_COLUMNS)).astype(SCOPE_COLUMNS)


def _mixed_kernels(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    """Tasks of three ranks (one missing), some communication, missing and scoped names."""
    rng = np.random.default_rng(seed)
    names = np.array([
        "recompute_Default/model-Llama/layers-CellList/0-LLamaDecodeLayer/MatMul-op1",
        "Gradients/recompute_Default/model-Llama/layers-CellList/0-LLamaDecodeLayer/Mul-op2",
        "Default/model-Llama/layers-CellList/1-LLamaDecodeLayer/Add-op3",
        "Default/model-Llama/layers-CellList/1-LLamaDecodeLayer/attention-Attention/Softmax-op4",
        "recompute_Default/model-Llama/norm-RMSNorm/Mul-op5", "Default/AllReduce-op6", "",
        None], dtype=object)
    return pd.DataFrame({
        "rank": pd.array(rng.choice([0, 1, None], n), dtype="Int64"),
        "step": pd.array(rng.choice([3, 4], n), dtype="Int64"),
        "name": pd.array(rng.choice(names, n), dtype="string"),
        "category": pd.array(rng.choice(["compute", "communication", "memory", None], n,
                                        p=[0.7, 0.1, 0.1, 0.1]), dtype="string"),
        "dur_us": np.where(rng.random(n) < 0.05, np.nan, rng.random(n) * 50)})


def test_recompute_scopes_equal_the_names_read_row_by_row() -> None:
    k = _mixed_kernels()
    no_rank = k.assign(rank=pd.array([pd.NA] * len(k), dtype="Int64"))
    one_rank = k.assign(rank=pd.array([2] * len(k), dtype="Int64"))  # a rank's own profile
    for tasks, n_ranks, missing in ((k, 3, True), (no_rank, 1, True), (one_rank, 1, False)):
        prof = Profile(ProfileMeta("test", rank=None), {"kernels": tasks})  # ranks as given
        got = recompute_scopes(prof)
        assert set(got["recompute"]) == {"partial"}  # the sample exercises the scoped names
        assert len(got) == n_ranks and got["rank"].isna().any() == missing
        pd.testing.assert_frame_equal(got, _plain_scopes(prof.kernels, "kernels"))


@pytest.mark.skipif(not RECOMPUTE.exists(), reason="bundled test data missing")
def test_recompute_scopes_of_a_mindspore_profile_equal_the_plain_reading() -> None:
    prof = pk.load(RECOMPUTE, cache=False, progress=False)
    got = recompute_scopes(prof)
    assert got["scoped_tasks"].sum() > 0
    source = str(got["source"].iloc[0])
    with _shared.shared_results():  # the codes shared with the other analyses give the same
        shared = recompute_scopes(prof)
    pd.testing.assert_frame_equal(got, _plain_scopes(getattr(prof, source), source))
    pd.testing.assert_frame_equal(shared, got)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_numeric_stable_order_equals_pandas_multi_key_sort() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 300))
        f = pd.DataFrame({"rank": pd.array(rng.integers(0, 3, n), dtype="Int64"),
                          "stream": rng.integers(0, 4, n).astype("float64"),
                          "start_us": rng.normal(size=n).round(1),
                          "wide": rng.integers(-10**9, 10**9, n)})
        f.loc[rng.random(n) < 0.2, "rank"] = pd.NA
        f.loc[rng.random(n) < 0.2, "stream"] = np.nan
        f.loc[rng.random(n) < 0.1, "start_us"] = np.nan
        for keys in (["rank", "stream", "start_us"], ["stream", "rank"], ["wide", "rank"]):
            want = f[keys].reset_index(drop=True).sort_values(keys, kind="mergesort").index
            got = _order.stable_order(f, keys)
            assert (np.arange(n) if got is None else got).tolist() == want.tolist()


def test_time_ordered_tasks_of_a_few_streams_are_put_in_stream_order() -> None:
    rng = np.random.default_rng(6)
    # time-ordered tasks on a few streams: ordered by rank and stream in one pass
    n = 3_000
    f = pd.DataFrame({"rank": pd.array(rng.integers(0, 2, n), dtype="Int64"),
                      "stream": pd.array(rng.choice([7, 53, 9], n), dtype="Int64"),
                      "start_us": np.sort(rng.normal(size=n))})
    f.loc[rng.random(n) < 0.05, "stream"] = pd.NA
    keys = ["rank", "stream", "start_us"]
    want = f[keys].reset_index(drop=True).sort_values(keys, kind="mergesort").index
    assert _order._grouped_order(f, keys).tolist() == want.tolist()
    # rows read block by block: in order, or out of order at a block's edge or far down
    f = pd.DataFrame({"rank": pd.array(np.zeros(25_000, dtype=np.int64), dtype="Int64"),
                      "start_us": np.arange(25_000.0)})
    assert _order.stable_order(f, ["rank", "start_us"]) is None
    for at in (1, 4_096, 4_097, 20_480, 20_481, 24_999):
        g = f.copy()
        g.loc[at, "start_us"] = g.loc[at - 1, "start_us"] - 0.5
        want = g.reset_index(drop=True).sort_values(["rank", "start_us"], kind="mergesort")
        assert _order.stable_order(g, ["rank", "start_us"]).tolist() == want.index.tolist()


def test_medians_and_running_maxima_of_contiguous_groups_equal_a_groupby() -> None:
    rng = np.random.default_rng(4)
    for _ in range(300):
        n, m = int(rng.integers(1, 90)), int(rng.integers(0, 400))  # few groups and many
        group = np.sort(rng.integers(0, n, m))
        values = rng.normal(size=m).round(2)
        values[rng.random(m) < 0.2] = np.nan
        med = pd.Series(values).groupby(group).median()
        want = np.full(n, np.nan)
        want[med.index.to_numpy(np.int64)] = med.to_numpy()
        assert np.array_equal(_order.group_median(values, group, n), want, equal_nan=True)
        if m:
            first = np.r_[True, group[1:] != group[:-1]]
            # the groups present, each from where it starts
            present = med.index.to_numpy(np.int64)
            assert np.array_equal(_order.slice_median(values, np.flatnonzero(first)),
                                  want[present], equal_nan=True)
            ends = np.abs(rng.normal(size=m))
            want_max = pd.Series(ends).groupby(np.cumsum(first)).cummax().to_numpy()
            got = _order._group_cummax(ends, np.flatnonzero(first))
            assert got is ends and np.array_equal(got, want_max)  # worked out in place


@pytest.mark.parametrize("path", [SIMULATED, shared_param(PT_LEVEL1)])
def test_prices_of_keys_coded_on_the_whole_table_equal_prices_of_the_rows(path: Any) -> None:
    prof = pk.load(sample(path) if isinstance(path, str) else path, cache=False,
                   progress=False)
    for p in (list(prof) if hasattr(prof, "ranks") else [prof]):
        narrow = eff_costs.narrow_costs(p)  # output shapes, dtypes, formats by code
        full = eff_costs.operator_costs(p)  # every pricing key a column of the rows
        assert len(narrow) == len(full) and narrow["kind"].notna().any()
        # the rows' shares and the calls' first rows; not the calls' own prices
        assert not {"call_flops", "call_bytes", "op_call"} & set(narrow.columns)
        for c in ("label", "flops", "bytes", "call_first"):
            pd.testing.assert_series_equal(narrow[c].reset_index(drop=True),
                                           full[c].reset_index(drop=True))
        for c in ("kind", "dtype", "causal"):  # one byte per row: the text by category
            assert isinstance(narrow[c].dtype, pd.CategoricalDtype)
            pd.testing.assert_series_equal(
                narrow[c].astype(full[c].dtype).reset_index(drop=True),
                full[c].reset_index(drop=True))
        assert not {"output_shapes", "output_formats"} & set(narrow.columns)
        # the PMU ratios as their row maxima, equal to the maxima of the full rows' columns
        comp, mem = eff_table._pmu(narrow)
        want_c, want_m = eff_table._pmu(full)
        assert comp.notna().any()
        assert np.array_equal(comp.to_numpy(), want_c.to_numpy(), equal_nan=True)
        assert np.array_equal(mem.to_numpy(), want_m.to_numpy(), equal_nan=True)


def test_a_price_spread_over_calls_of_one_task_each_is_the_call_price() -> None:
    rng = np.random.default_rng(8)
    n = 500
    rows = pd.DataFrame({"rank": pd.array(rng.integers(0, 2, n), dtype="Int64"),
                         "dur_us": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
                         "category": rng.choice(["compute", "memory"], n),
                         "flops": np.where(rng.random(n) < 0.3, np.nan, rng.random(n) * 1e9),
                         "bytes": rng.random(n) * 1e6})
    got = eff_costs._spread_over_calls(rows)
    assert got["flops"].equals(rows["flops"]) and got["bytes"].equals(rows["bytes"])
    assert got["op_call"].tolist() == list(range(n)) and got["call_first"].all()
    # tasks linked to one operator call (rank, op_id) still share its price by time
    pairs = rows.assign(rank=pd.array([0] * n, dtype="Int64"), op_id=np.arange(n) // 2,
                        category="compute", dur_us=1.0, flops=np.repeat(rng.random(n // 2), 2))
    linked = eff_costs._spread_over_calls(pairs)
    assert linked["op_call"].tolist() == (np.arange(n) // 2).tolist()
    assert np.allclose(linked["flops"], pairs["flops"] / 2)
    # the narrow rows: the same shares and first rows, without the calls' own columns
    for frame, whole in ((rows, got), (pairs, linked)):
        narrow = eff_costs._spread_over_calls(frame, whole=False)
        assert not {"call_flops", "call_bytes", "op_call"} & set(narrow.columns)
        for c in ("flops", "bytes", "call_first"):
            assert narrow[c].equals(whole[c])


def test_the_row_of_each_token_character_equals_the_repeated_rows() -> None:
    from perfkit.analysis.operators.unfused import _RowOfChar

    rng = np.random.default_rng(12)
    for n in (1, 7, 5_000):
        new_block = np.r_[True, rng.random(n - 1) < 0.01]
        want = np.repeat(np.arange(n), 1 + new_block.astype(np.int64))  # "|" then the row
        blocks = np.flatnonzero(new_block)
        rows = _RowOfChar(blocks + np.arange(len(blocks)))
        letters = np.flatnonzero(np.insert(np.zeros(n, dtype=bool), blocks, True) == 0)
        assert np.array_equal(rows[letters], want[letters])


def test_patterns_found_in_the_shortened_token_text_are_those_of_the_whole_text() -> None:
    import re

    from perfkit.analysis.operators.unfused import PATTERNS, _find, _searched

    regexes = [rx for rx, _, _ in PATTERNS.values()]
    rng = np.random.default_rng(5)
    letters = np.frombuffer(b"." * 64 + b"CCMMTBOFADPRSQWGLNKZ|", np.uint8)
    # one occurrence of each pattern (an RmsNorm, a rotary embedding, SiLU * x, attention,
    # casts), put between random tokens
    whole_patterns = [b"CPRASDM", b"LNKMMA", b"WM", b"BMFOB", b"CCC", b"T"]
    found = 0
    for n in (1, 40, 20_000):
        chars = rng.choice(letters, n)
        for at in rng.integers(0, n, n // 100):
            piece = whole_patterns[int(at) % len(whole_patterns)]
            chars[at:at + len(piece)] = np.frombuffer(piece, np.uint8)[:n - at]
        whole = chars.tobytes().decode("ascii")
        text, where = _searched(chars, regexes)
        if n == 20_000:  # mostly tokens no pattern spells: the text is shortened
            assert where is not None and len(text) < 0.8 * n
        for rx in regexes:
            starts, ends = _find(text, rx)
            if where is not None:
                starts, ends = where[starts], where[ends - 1] + 1
            want = [m.span() for m in re.finditer(rx, whole)]
            assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == want, rx
            found += len(want) > 0
    assert found >= len(regexes)  # every pattern found somewhere
    # a pattern that could match other characters, or nothing, keeps the whole text
    chars = rng.choice(letters, 5_000)
    for rx in (r"M.M", r"\wM", r"C*", r"[^M]M"):
        assert _searched(chars, [rx])[1] is None


def test_every_match_holds_a_letter_of_each_needed_set() -> None:
    """The letters ``_find`` checks before searching are in every match (so a text without
    them has none): checked on random texts, for the patterns and for harder ones."""
    import re

    from perfkit.analysis.operators.unfused import PATTERNS, _find, _needed_letters

    extra = [r"(?:A|B)C", r"C{2,}M?", r"(?:AB|A(?:C|D))+", r"[AB]C*D", r"A|B", r"C*", r"A.B",
             r"(?i)a", r"(?i:a)B", r"[^A]B", r"A??B", r"(?:A|)B"]
    rng = np.random.default_rng(11)
    alphabet = np.frombuffer(b"ABCDFKLMNOPQRSTWZ.|", np.uint8)
    checked = 0
    for rx in [r for r, _, _ in PATTERNS.values()] + extra:
        needs = _needed_letters(rx)
        for n in (30, 3_000):
            text = rng.choice(alphabet, n).tobytes().decode("ascii")
            for m in re.finditer(rx, text):
                for clause in needs:
                    assert any(c in m.group() for c in clause), (rx, m.group(), clause)
                    checked += 1
            # the text without one needed letter: the search is skipped, to the same answer
            for clause in needs:
                cut = re.sub("[" + "".join(clause) + "]", ".", text)
                starts, ends = _find(cut, rx)
                assert not len(starts) and not list(re.finditer(rx, cut)), rx
    assert checked > 1_000
    assert _needed_letters(r"(?i)a") == () and _needed_letters(r"(?i:a)B") == (
        frozenset("B"),)
    assert _needed_letters(r"A|") == () and _needed_letters(r"C*") == ()
    assert set(_needed_letters(r"(?:A|B)C")) == {frozenset("AB"), frozenset("C")}


def test_per_rank_counts_sums_and_maxima_equal_a_groupby() -> None:
    from perfkit.analysis.operators.scope import _ByRank
    from perfkit.analysis.operators.tiny import _name_counts

    rng = np.random.default_rng(8)
    n = 3_000
    for ranks in ([3], [0, 2, 5], [1, None, 4]):
        frame = pd.DataFrame({
            "rank": pd.array(rng.choice(np.array(ranks, dtype=object), n), dtype="Int64"),
            "name": pd.array(rng.choice(np.array(["b", "a", None, "c"], dtype=object), n),
                             dtype="string"),
            "dur_us": np.where(rng.random(n) < 0.1, np.nan, rng.random(n))})
        by = _ByRank(frame)
        grouped = frame.groupby("rank", dropna=False)
        assert by.index.tolist() == grouped.size().index.tolist()
        assert by.count().tolist() == grouped.size().tolist()
        assert np.allclose(by.sum(frame["dur_us"].to_numpy()), grouped["dur_us"].sum())
        rows = np.flatnonzero(rng.random(n) < 0.3)
        picked = frame.iloc[rows].groupby("rank", dropna=False)
        want = picked.size().reindex(grouped.size().index, fill_value=0)
        assert by.count(rows).tolist() == want.tolist()
        values = rng.integers(1, 100, len(rows))
        want = pd.Series(values, index=frame.index[rows]).groupby(
            frame["rank"].iloc[rows], dropna=False).max()
        assert by.max(values, rows).tolist() == want.reindex(
            grouped.size().index, fill_value=0).tolist()
        mask = frame["dur_us"].lt(0.5).to_numpy(bool)
        want = frame[mask].groupby(["rank", "name"], dropna=False).size()
        got = _name_counts(frame, mask)
        assert got.index.tolist() == want.index.tolist()
        assert got.tolist() == want.tolist()
