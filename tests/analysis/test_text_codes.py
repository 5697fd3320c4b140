"""Text columns coded from the row ids a cached table was stored with.

Each fast path is checked against the plain pandas computation it replaces:
``pd.factorize`` of the text itself, ``pandas.read_parquet``, pandas' stable multi-key
sort, ``DataFrame.assign``, and the distinct (rank, step) pairs counted by ``groupby``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import arrow_text
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from shared_samples import PT_LEVEL1, sample

import perfkit as pk
from perfkit import _text_codes
from perfkit.analysis import _order
from perfkit.analysis._shared import shared_factorize, shared_results
from perfkit.analysis._tasks import tasks_in_scope
from perfkit.analysis._util import n_step_pairs, take_rows, typed, with_columns
from perfkit.io.cache import parquet_text

ROOT = Path(__file__).resolve().parents[2]
SIMULATED = ROOT / "data" / "simulated" / "llama2-7b-tp2"
#: pandas 3 copies a numpy array handed to ``assign`` (copy on write); pandas 2 may too
PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def _arrow_text(values: pd.Series) -> bool:
    """Whether a text column is Arrow data, the only kind that carries row ids (perfkit
    keeps its text so on every pandas; pandas 2's own ``string`` keeps Python strings)."""
    return getattr(values.array, "_pa_array", None) is not None


def _text(rng: np.random.Generator, n: int, late: bool = True) -> pd.Series:
    """Text with repeats, missing values and (``late``) values first seen near the end."""
    words = np.array([f"op_{i}" for i in range(40)] + [""], dtype=object)
    values = words[rng.integers(0, len(words), n)]
    values[rng.random(n) < 0.05] = None
    if late and n > 1000:
        values[-3:] = ["only_at_the_end", None, "only_at_the_end"]
    return pd.Series(values, dtype="string")


def _ids(values: pd.Series) -> np.ndarray:
    """An equality labelling of ``values`` unrelated to their order: ids by sorted text."""
    text = values.fillna("\x00missing").to_numpy(dtype=object)
    _, inverse = np.unique(text.astype(str), return_inverse=True)
    n_values = int(inverse.max()) + 1
    return inverse.ravel().astype(_text_codes.id_dtype(n_values))


@pytest.mark.parametrize("n", [0, 1, 7, 70_000, 300_000])
def test_factorize_from_ids_equals_pd_factorize_of_the_text(n: int) -> None:
    values = _text(np.random.default_rng(n), n)
    ids = _ids(values) if n else np.zeros(0, dtype=np.uint8)
    for given in (values, values.array):
        got_codes, got_uniques = _text_codes.factorize(given, ids)
        want_codes, want_uniques = pd.factorize(given, use_na_sentinel=False)
        assert np.array_equal(got_codes, want_codes)
        assert type(got_uniques) is type(want_uniques)
        pd.testing.assert_extension_array_equal(pd.array(got_uniques), pd.array(want_uniques))


def test_ids_use_one_byte_for_few_values() -> None:
    # the missing value's id is n_values itself: it must fit too
    assert _text_codes.id_dtype(200) is np.uint8 and _text_codes.id_dtype(255) is np.uint16
    assert _text_codes.id_dtype(300) is np.uint16
    assert _text_codes.id_dtype(70_000) is np.uint32


def test_ids_live_as_long_as_the_column_and_are_carried_to_a_selection() -> None:
    values = _text(np.random.default_rng(3), 5_000).astype(pd.StringDtype("pyarrow"))
    data = values.array._pa_array
    _text_codes.remember(data, _ids(values))
    assert _text_codes.ids_of(data) is not None
    keep = np.random.default_rng(4).random(len(values)) < 0.6
    picked = take_rows(pd.DataFrame({"name": values}), keep)["name"]
    positions = np.random.default_rng(5).permutation(len(values))[:1_234]
    taken = take_rows(pd.DataFrame({"name": values}), positions)["name"]
    for sub in (picked, taken):
        assert _text_codes.ids_of(sub.array._pa_array) is not None
        with shared_results():
            got = shared_factorize(sub, use_na_sentinel=True)
        want = pd.factorize(sub, use_na_sentinel=True)
        assert np.array_equal(got[0], want[0])
        assert list(got[1]) == list(want[1])
    with pytest.raises(ValueError, match="ids for a column"):
        _text_codes.remember(data, np.zeros(3, dtype=np.uint8))


def _parquet_files(tmp_path: Path) -> list[Path]:
    out = []
    for path in (SIMULATED, sample(PT_LEVEL1)):
        prof = pk.load(path, cache=False, progress=False)
        members = list(prof) if hasattr(prof, "ranks") else [prof]
        for i, p in enumerate(members[:1]):
            for name, frame in p.tables().items():
                f = tmp_path / f"{Path(path).name}-{i}-{name}.parquet"
                frame.to_parquet(f, index=False, write_page_checksum=True)
                out.append(f)
    return out


@pytest.mark.shared_samples
def test_a_table_read_with_its_ids_equals_pandas_read_parquet(tmp_path: Path) -> None:
    files = _parquet_files(tmp_path)
    coded = 0
    for f in files:
        got = parquet_text.read_frame(f)
        want = arrow_text.read_parquet(f)
        pd.testing.assert_frame_equal(got, want)
        for c in got.columns:
            data = getattr(got[c].array, "_pa_array", None)
            ids = _text_codes.ids_of(data) if data is not None else None
            if ids is None:
                continue
            coded += 1  # the ids label the text exactly as its own factorization does
            codes, _ = pd.factorize(got[c], use_na_sentinel=False)
            assert np.array_equal(pd.factorize(ids)[0], codes)
    # text is Arrow data on every pandas (perfkit._text_dtype), so every file's dictionary
    # text columns carry their ids
    assert all(_arrow_text(parquet_text.read_frame(f)["name"]) for f in files
               if "kernels" in f.name)
    assert coded >= 10


def test_the_operator_columns_ids_are_read_together_once_and_others_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    n = 20_000
    frame = pd.DataFrame({c: _text(rng, n) for c in ("name", "type", "input_shapes", "core")}
                         | {"dur_us": rng.random(n)})
    f = tmp_path / "kernels.parquet"
    frame.to_parquet(f, index=False, write_page_checksum=True)
    got = parquet_text.read_frame(f)
    assert _arrow_text(got["name"])  # on every pandas
    reads: list[list[str]] = []
    real = parquet_text._FileIds._read
    monkeypatch.setattr(parquet_text._FileIds, "_read",
                        lambda self, names: reads.append(list(names)) or real(self, names))
    for c in ("type", "name", "input_shapes", "core", "type"):
        ids = _text_codes.ids_of(got[c].array._pa_array)
        assert ids is not None  # labels the text exactly as its own factorization does
        assert np.array_equal(pd.factorize(ids)[0],
                              pd.factorize(got[c], use_na_sentinel=False)[0])
    # the three operator columns in one read (the first asked for), the other alone
    assert reads == [["name", "type", "input_shapes"], ["core"]]


def test_the_advisor_codes_a_cached_rank_as_it_codes_the_parsed_one(tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    parsed = pk.load(SIMULATED, progress=False)  # parses, writes the cache
    cached = pk.load(SIMULATED, progress=False)  # read back: text with ids
    for a, b in zip(parsed, cached, strict=True):
        assert _text_codes.ids_of(b.kernels["name"].array._pa_array) is not None
        with shared_results():
            scoped = tasks_in_scope(b.kernels, False, ("name", "type"))
            got = shared_factorize(scoped["name"], use_na_sentinel=True)
        want = pd.factorize(tasks_in_scope(a.kernels, False, ("name",))["name"])
        assert np.array_equal(got[0], want[0]) and list(got[1]) == list(want[1])
    assert [f.title for f in pk.advise(cached)] == [f.title for f in pk.advise(parsed)]


def test_the_grouped_order_equals_pandas_sort_where_times_are_in_order_per_lane() -> None:
    rng = np.random.default_rng(11)
    for n in (2, 50, 20_000):
        lane = rng.integers(0, 4, n)
        start = np.cumsum(rng.random(n))  # in time order, lanes interleaved
        rank = pd.array(np.where(rng.random(n) < 0.05, None, rng.integers(0, 3, n)),
                        dtype="Int64")
        frame = pd.DataFrame({"rank": rank, "stream": pd.array(lane, dtype="Int64"),
                              "start_us": start})
        keys = ["rank", "stream", "start_us"]
        assert _order._grouped_order(frame, keys) is not None
        want = frame.reset_index(drop=True).sort_values(keys, kind="mergesort").index
        assert np.array_equal(_order.stable_order(frame, keys), want.to_numpy())
    # negative values, and a code space too large for 16 bits (sorted key by key)
    for low, high in ((-7, 5), (-40_000, 40_000)):
        wide = frame.assign(stream=pd.array(rng.integers(low, high, len(frame)),
                                            dtype="Int64"))
        assert (_order._grouped_order(wide, keys) is None) == (high - low > 2**15)
        want = wide.reset_index(drop=True).sort_values(keys, kind="mergesort").index
        assert np.array_equal(_order.stable_order(wide, keys), want.to_numpy())
    shuffled = frame.assign(start_us=rng.permutation(frame["start_us"].to_numpy()))
    assert _order._grouped_order(shuffled, keys) is None  # sorted key by key instead
    want = shuffled.reset_index(drop=True).sort_values(keys, kind="mergesort").index
    assert np.array_equal(_order.stable_order(shuffled, keys), want.to_numpy())


def test_with_columns_keeps_the_arrays_and_equals_assign() -> None:
    frame = pd.DataFrame({"a": np.arange(5.0)}, index=[3, 1, 4, 1, 5])
    new = np.linspace(0, 1, 5)
    got = with_columns(frame, b=new, c=pd.Series(7, index=frame.index), d=1)
    pd.testing.assert_frame_equal(got, frame.assign(b=new, c=7, d=1))
    assert np.shares_memory(got["b"].to_numpy(), new) or not PANDAS_3
    assert "b" not in frame.columns


def test_typed_equals_astype_of_the_selected_columns() -> None:
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, None, 2.0], "c": ["x", None, "z"],
                          "d": pd.array([1, None, 3], dtype="Int64"), "e": [True, False, True]})
    for types in ({"a": "int64", "b": "float64", "c": "string", "d": "Int64"},  # mixed
                  {"d": "float64", "a": "Int64", "e": "boolean"},  # every one converted
                  {"b": "float64", "a": "int64"}):  # none converted, another order
        got = typed(frame, types)
        pd.testing.assert_frame_equal(got, frame[list(types)].astype(types))
        assert got is not frame
    with pytest.raises(KeyError):
        typed(frame, {"missing": "int64"})


def test_pairs_of_a_constant_rank_and_step_are_counted_without_coding() -> None:
    n = 1_000
    one = pd.DataFrame({"rank": pd.array(np.zeros(n, int), dtype="Int64"),
                        "step": pd.array(np.full(n, 50), dtype="Int64")})
    assert n_step_pairs(one) == 1
    rng = np.random.default_rng(2)
    mixed = one.assign(step=pd.array(np.where(rng.random(n) < 0.1, None,
                                              rng.integers(1, 4, n)), dtype="Int64"))
    # rows without a step (tasks launched outside every step) are no step of their own;
    # counted in Python (pandas 2.2's groupby(dropna=True) keeps NA keys of several columns)
    want = len({(int(r), int(s)) for r, s in zip(mixed["rank"], mixed["step"], strict=True)
                if not pd.isna(s)})
    assert n_step_pairs(mixed) == want
    assert pa.types.is_integer(pa.array(mixed["step"]).type)


def test_first_rows_and_first_appearance_equal_the_plain_computation() -> None:
    rng = np.random.default_rng(21)
    for n in (1, 5, 4_096, 50_000):
        ids = rng.integers(0, 30, n).astype(np.uint8)
        ids[-1] = 200  # a value first seen in the last row
        codes, first = _text_codes.first_appearance(ids)
        want, _ = pd.factorize(ids)
        assert np.array_equal(codes, want)
        plain = np.flatnonzero(want > np.maximum.accumulate(np.r_[-1, want[:-1]]))
        assert np.array_equal(first, plain)
        assert np.array_equal(_text_codes.first_rows(want), plain)
    assert len(_text_codes.first_rows(np.zeros(0, dtype=np.int64))) == 0


def test_prices_of_a_cached_rank_coded_by_its_ids_equal_the_prices_of_the_rows(
        tmp_path: Path, monkeypatch) -> None:
    from perfkit.analysis.efficiency import costs

    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    pk.load(SIMULATED, progress=False)  # parsed and written to the cache
    for p in pk.load(SIMULATED, progress=False):  # read back: keys coded by their ids
        assert _arrow_text(p.kernels["input_shapes"])
        data = p.kernels["input_shapes"].array._pa_array
        values = _text_codes.values_of(data)
        assert values is not None and _text_codes.ids_of(data) is not None
        # the text of each id is the text of the rows holding it
        ids = _text_codes.ids_of(data)
        assert list(values[ids[:50].astype(np.int64)]) == \
            list(p.kernels["input_shapes"][:50])
        with shared_results():
            narrow = costs.narrow_costs(p)
        full = costs.operator_costs(p)
        assert not {"call_flops", "call_bytes", "op_call"} & set(narrow.columns)
        for c in ("label", "flops", "bytes", "call_first"):
            pd.testing.assert_series_equal(narrow[c].reset_index(drop=True),
                                           full[c].reset_index(drop=True))
        for c in ("kind", "dtype", "input_shapes", "input_dtypes"):
            pd.testing.assert_series_equal(
                narrow[c].astype(full[c].dtype).reset_index(drop=True),
                full[c].astype(arrow_text.ARROW_TEXT).reset_index(drop=True))


@pytest.mark.parametrize("path", [SIMULATED, pytest.param(
    PT_LEVEL1, marks=pytest.mark.shared_samples)])
def test_chains_in_the_shared_stream_order_equal_chains_sorted_by_lane(path: Any,
                                                                      monkeypatch) -> None:
    from perfkit.analysis.efficiency import chains, infer_hardware

    prof = pk.load(sample(path) if isinstance(path, str) else path, cache=False,
                   progress=False)
    hw, _ = infer_hardware(prof)
    used = []
    real = chains._as_the_streams
    monkeypatch.setattr(chains, "_as_the_streams",
                        lambda *a: used.append(real(*a)) or used[-1])
    with shared_results():
        fast = chains.elementwise_chains(prof, hw)
    assert any(used)  # the shared (rank, stream, start) order was taken
    monkeypatch.setattr(chains, "_as_the_streams", lambda *a: False)
    with shared_results():
        plain = chains.elementwise_chains(prof, hw)
    assert len(plain)
    pd.testing.assert_frame_equal(fast, plain)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("path", [SIMULATED, pytest.param(
    PT_LEVEL1, marks=pytest.mark.shared_samples)])
def test_analyses_of_a_cached_profile_equal_those_of_the_parsed_one(path: Any, tmp_path: Path,
                                                                    monkeypatch) -> None:
    """Read back from the cache, the names of the tasks in scope are categoricals coded by
    the cache's ids: every analysis reading them gives what it gives on the parsed text."""
    from perfkit import analysis as A

    src = sample(path) if isinstance(path, str) else path
    parsed = pk.load(src, cache=False, progress=False)
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    pk.load(src, progress=False)  # written to the cache
    cached = pk.load(src, progress=False)
    rank = next(iter(cached)) if hasattr(cached, "ranks") else cached
    with shared_results():
        from perfkit.analysis.operators.scope import _LANES, _scope
        lanes = _scope(rank.kernels, include_communication=False, columns=_LANES)
        coded = isinstance(lanes["name"].dtype, pd.CategoricalDtype)
    # both profiles have communication tasks: the scope drops rows, and the text being
    # Arrow data (with ids, on every pandas) the names come out as a categorical
    assert _arrow_text(rank.kernels["name"]) and coded
    for fn, kwargs in ((A.tiny_kernels, {}), (A.unfused_patterns, {}),
                       (A.unfused_patterns, {"detail": True}), (A.recompute_evidence, {}),
                       (A.operator_efficiency, {}), (A.elementwise_chains, {})):
        with shared_results():
            got = fn(cached, **kwargs)
        with shared_results():
            want = fn(parsed, **kwargs)
        pd.testing.assert_frame_equal(got, want, obj=fn.__name__)
    # an unmeasured finding's NaN figures equal no NaN: compared as None
    assert [_comparable(f) for f in pk.advise(cached)] == \
        [_comparable(f) for f in pk.advise(parsed)]


def _comparable(finding: Any) -> dict[str, Any]:
    import dataclasses
    import math

    return {k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in dataclasses.asdict(finding).items()}
