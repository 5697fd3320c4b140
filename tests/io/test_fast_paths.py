"""The loaders' fast paths give the same tables as their general paths, on the bundled samples.

Each sample is loaded twice with the cache off: as shipped (block-by-block decoding in
place, Categorical texts, dictionary-coded ids, per-distinct text work, the vectorised
launch and step sweeps, the conform fast path) and with every fast path switched off
(whole-file decoding through the untyped fallback decoder, plain string columns, the
per-row and per-step loops). Every canonical table must be identical. The sweeps are also
checked against brute force on random intervals, and the cache's read path against a
plain ``pandas.read_parquet``.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import arrow_text
import msgspec
import numpy as np
import pandas as pd
import pytest
from shared_samples import (
    HTA,
    MINDINSIGHT,
    PT_GPT3_OLD,
    PT_LEVEL1,
    TRACE_VIEW_EXCERPT,
    sample,
    shared_param,
)

import perfkit.io.engines.local as detect
from perfkit.io import kineto
from perfkit.io._common import distinct
from perfkit.io.ascend import trace as ascend_trace
from perfkit.io.cache import rank_tables
from perfkit.io.cache import store as cache
from perfkit.io.canonical import categories, schema
from perfkit.io.canonical.schema import TABLE_NAMES
from perfkit.io.chrome import columns as chrome_columns
from perfkit.io.chrome import decode as chrome

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = {
    "kineto-tiny-llama": ROOT / "data" / "kineto-tiny-llama",      # CPU-only, shapes
    "kineto-hta": sample(HTA),                                      # GPU, correlation links
    "ascend-level1": sample(PT_LEVEL1),
    "ascend-gpt3-old": sample(PT_GPT3_OLD),
    "trace-view": sample(TRACE_VIEW_EXCERPT).parent,
    "mindspore-cpu": ROOT / "data" / "mindspore-cpu-tiny-llama",
    "mindinsight": sample(MINDINSIGHT) / "run_2_normal_run",
    "simulated": ROOT / "data" / "simulated" / "slow-rank",
}
#: Those read from shared/samples (other projects' profiles; see tests/shared_samples.py).
SHARED = {"kineto-hta", "ascend-level1", "ascend-gpt3-old", "trace-view", "mindinsight"}


def _params(names: list[str]) -> list[Any]:
    return [shared_param(n) if n in SHARED else n for n in names]


def _tables(path: Path) -> list[tuple[Any, dict[str, pd.DataFrame], list[str]]]:
    obj = detect.load(path, cache=False, progress=False, workers=1)
    profiles = list(obj) if hasattr(obj, "ranks") else [obj]
    return [(p.meta.rank, p.tables(), list(p.meta.notes)) for p in profiles]


FALLBACKS: list[Path] = []
"""Files the untyped fallback decoder read while the general paths were on."""


def _patch_kineto(mp: pytest.MonkeyPatch, name: str, value: Any) -> None:
    """Set ``name`` in every module of the :mod:`perfkit.io.kineto` package that holds it.

    The Kineto reader is a package: a helper such as ``last_open`` or ``numeric`` is looked
    up in each module that imported it, so each of those is patched.
    """
    mods = [kineto] + [importlib.import_module(f"{kineto.__name__}.{m.name}")
                       for m in pkgutil.iter_modules(kineto.__path__)]
    hit = [m for m in mods if name in vars(m)]
    assert any(m is not kineto for m in hit), name  # a module that looks it up
    for m in hit:
        mp.setattr(m, name, value)


def _general_paths(mp: pytest.MonkeyPatch) -> None:
    """Switch every fast path of the loaders off."""
    mp.setattr(chrome, "STREAM_MIN_BYTES", 1 << 62)  # whole-file decoding

    class _Refuse:  # the typed decoder refuses: the untyped fallback decoder runs
        def __init__(self, real: Any) -> None:
            self.real = real

        def decode(self, raw: Any, type: Any = None, **kw: Any) -> Any:  # noqa: A002
            if type is not None:
                raise msgspec.ValidationError("forced: general path")
            return self.real.decode(raw, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    real_fallback = chrome._fallback

    def fallback(*a: Any, **k: Any) -> Any:
        FALLBACKS.append(a[0])
        return real_fallback(*a, **k)

    mp.setattr(chrome, "_fallback", fallback)
    mp.setattr(chrome, "msgspec", type("M", (), {
        "json": _Refuse(msgspec.json), "Raw": msgspec.Raw,
        "ValidationError": msgspec.ValidationError, "DecodeError": msgspec.DecodeError}))
    _patch_kineto(mp, "CATEGORICAL", ())  # plain string columns
    _patch_kineto(mp, "grouped_breakdown", lambda *a, **k: None)  # per-step loop
    _patch_kineto(mp, "last_open", _last_open_loop)
    mp.setattr(schema, "_conformed", lambda *a, **k: False)

    def direct(values: pd.Series, func: Any) -> pd.Series:
        return pd.Series(func(values.astype("string")).array, index=values.index)

    def numeric(values: pd.Series) -> np.ndarray:
        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype("string")
        return pd.to_numeric(values, errors="coerce").to_numpy()

    for mod in (ascend_trace, categories):
        mp.setattr(mod, "per_distinct", direct)
    _patch_kineto(mp, "per_distinct", direct)
    _patch_kineto(mp, "numeric", numeric)
    mp.setattr(distinct, "per_distinct", direct)
    mp.setattr(categories, "_fits", lambda keys: False)  # per-row categories


def _last_open_loop(starts: np.ndarray, ends: np.ndarray, ts: np.ndarray,
                    upto: np.ndarray | None = None, closed_end: bool = False) -> np.ndarray:
    """The per-launch walk :func:`perfkit.io.kineto.last_open` replaces."""
    out = np.full(len(ts), -1, dtype=np.int64)
    for n, t in enumerate(ts):
        j = int(np.searchsorted(starts, t, side="right")) - 1
        if upto is not None:
            j = min(j, int(upto[n]) - 1)
        while j >= 0 and (ends[j] <= t if closed_end else ends[j] < t):
            j -= 1
        out[n] = j
    return out


@pytest.fixture(scope="module")
def fast() -> dict[str, Any]:
    return {name: _tables(path) for name, path in SAMPLES.items()
                if path.exists()}  # the shared ones' tests skip (CI: fail) without them


@pytest.fixture(scope="module")
def general() -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        _general_paths(mp)
        return {name: _tables(path) for name, path in SAMPLES.items()
                if path.exists()}  # the shared ones' tests skip (CI: fail) without them
    finally:
        mp.undo()


@pytest.mark.parametrize("name", _params(list(SAMPLES)))
def test_fast_paths_give_the_general_tables(fast: Any, general: Any, name: str) -> None:
    got, ref = fast[name], general[name]
    assert [r for r, _, _ in got] == [r for r, _, _ in ref]
    for (_, tables, notes), (_, ref_tables, ref_notes) in zip(got, ref, strict=True):
        assert notes == ref_notes
        for table in TABLE_NAMES:
            pd.testing.assert_frame_equal(tables[table], ref_tables[table], check_exact=True)


@pytest.mark.shared_samples
def test_the_samples_exercise_the_tables(fast: Any, general: Any) -> None:
    """The comparisons above are not between empty tables, nor between two fast paths."""
    read = {f.name for f in FALLBACKS}
    assert {"sampled_rank-0.json.gz", "rank0.pt.trace.json.gz", "trace_view.json"} <= read
    rows = {name: {t: sum(len(tb[t]) for _, tb, _ in profs) for t in TABLE_NAMES}
            for name, profs in fast.items()}
    assert rows["kineto-hta"]["kernels"] > 1000 and rows["kineto-hta"]["steps"] > 0
    assert rows["kineto-tiny-llama"]["ops"] > 100
    kernels = pd.concat([tb["kernels"] for _, tb, _ in fast["kineto-hta"]])
    assert kernels["input_shapes"].notna().sum() > 100  # the launching operators' shapes
    assert kernels["op_name"].notna().sum() > 100
    assert rows["ascend-level1"]["kernels"] > 100 and rows["ascend-level1"]["ops"] > 100
    assert rows["trace-view"]["ops"] > 0 and rows["simulated"]["comm_ops"] > 0


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
@pytest.mark.shared_samples
def test_streamed_blocks_equal_the_whole_file(tmp_path: Path, monkeypatch: Any) -> None:
    """Tiny blocks force many in-place cuts, retries and carries over a real trace."""
    import gzip

    src = SAMPLES["kineto-hta"] / "sampled_rank-0.json.gz"
    path = tmp_path / "rank0.json"
    path.write_bytes(gzip.decompress(src.read_bytes()))
    whole = detect.load(path, cache=False).tables()
    monkeypatch.setattr(chrome, "STREAM_MIN_BYTES", 0)
    for block in (1 << 12, 1 << 15):
        monkeypatch.setattr(chrome, "BLOCK_BYTES", block)
        assert chrome._read_streaming(path, columns=kineto.TRACE_COLUMNS) is not None
        streamed = detect.load(path, cache=False).tables()
        for table in TABLE_NAMES:
            pd.testing.assert_frame_equal(streamed[table], whole[table], check_exact=True)


@pytest.mark.parametrize("seed", range(5))
def test_last_open_equals_the_walk_back(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(0, 80))
        starts = np.sort(rng.integers(0, 200, n)).astype(np.int64)
        ends = starts + rng.integers(-5, 60, n)  # also intervals that do not nest
        ts = rng.integers(-20, 260, 50).astype(np.int64)
        ts[:2] = np.iinfo(np.int64).min  # a launch without a time
        np.testing.assert_array_equal(kineto.last_open(starts, ends, ts),
                                      _last_open_loop(starts, ends, ts))
        # the enclosing event of each event: positions before it, an end at t not open
        upto = np.arange(n)
        np.testing.assert_array_equal(
            kineto.last_open(starts, ends, starts, upto=upto, closed_end=True),
            _last_open_loop(starts, ends, starts, upto=upto, closed_end=True))


@pytest.mark.parametrize("seed", range(4))
def test_grouped_breakdown_equals_the_step_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(1, 120))
        start = rng.integers(10**12, 10**12 + 10**4, n).astype(np.int64)
        end = start + rng.choice([0, 1, 500, 2000, 7000], n)
        step = rng.choice([3.0, 4.0, 5.0, np.nan], n)
        cat = rng.choice(["compute", "communication", "memory"], n)
        dev = pd.DataFrame({"ts_ns": start, "dur_us": (end - start) / 1000.0})
        kern = pd.DataFrame({"step": step, "category": cat})
        spans = pd.DataFrame({"step": [3], "start_ns": [0], "end_ns": [1]})
        fast = kineto._steps(dev, kern, spans)
        with pytest.MonkeyPatch.context() as mp:
            _patch_kineto(mp, "grouped_breakdown", lambda *a, **k: None)
            loop = kineto._steps(dev, kern, spans)
        pd.testing.assert_frame_equal(fast, loop, check_exact=True)


def test_raw_arguments_text() -> None:
    raw = msgspec.Raw
    got = chrome_columns._pa_raw([raw(b"[[4, 64], []]"), raw(b""), raw(b"null"),
                                  raw(b'["\xc3\xa9"]'), raw(b"\xff")])
    assert got.to_pylist() == ["[[4, 64], []]", None, None, '["é"]', "\ufffd"]
    assert chrome_columns._pa_raw([raw(b""), raw(b"")]).null_count == 2


def test_ids_as_text_equal_str_of_each_value() -> None:
    values = [1, "stream 7", None, 1, "stream 7", 22] * 10
    want = [None if v is None else str(v) for v in values]
    assert chrome_columns._pa_str_of_few(values).to_pylist() == want
    assert chrome_columns._pa_str_of(values).to_pylist() == want


def test_per_distinct_keeps_missing_values() -> None:
    s = pd.Series(["[[4, 64], [], [64]]", None, "[[1]]", "[[4, 64], [], [64]]"], dtype="string")
    cat = s.astype("category")
    for values in (s, cat):
        assert kineto.shapes_text(values).tolist() == ["4,64;;64", pd.NA, "1", "4,64;;64"]
    assert distinct.numeric(pd.Series(["1", "x", "1"], dtype="string")).tolist()[::2] == [1, 1]


@pytest.mark.shared_samples
def test_cache_read_equals_a_plain_read(tmp_path: Path) -> None:
    prof = detect.load(SAMPLES["ascend-level1"] / "rank0_ascend_pt", cache=False)
    cache.write_entry(tmp_path, prof.meta, prof.tables())
    for table in TABLE_NAMES:
        f = tmp_path / f"{table}.parquet"
        plain = arrow_text.read_parquet(f)
        pd.testing.assert_frame_equal(cache.read_table_file(f), plain, check_exact=True)
        # a conformed table is served as it is, equal to a rebuilt one
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(schema, "_conformed", lambda *a, **k: False)
            rebuilt = schema.conform(plain, table, prof.meta.rank)
        pd.testing.assert_frame_equal(schema.conform(plain, table, prof.meta.rank), rebuilt)


def test_rank_tables_store_is_bounded_and_sees_rewrites(tmp_path: Path,
                                                       monkeypatch: Any) -> None:
    rank_tables.clear()
    f = tmp_path / "t.parquet"
    f.write_bytes(b"x")
    built = []

    def build() -> pd.DataFrame:
        built.append(1)
        return pd.DataFrame({"a": np.arange(1000.0)})

    first = rank_tables.cached_table(f, "k", build)
    first["b"] = 1.0  # a caller's column never reaches the stored table
    again = rank_tables.cached_table(f, "k", build)
    assert len(built) == 1 and list(again.columns) == ["a"]
    f.write_bytes(b"xy")  # the entry file changed: built afresh
    rank_tables.cached_table(f, "k", build)
    assert len(built) == 2
    monkeypatch.setenv("PERFKIT_RANK_TABLES_MB", "0")  # off
    rank_tables.cached_table(f, "k", build)
    rank_tables.cached_table(f, "k", build)
    assert len(built) == 4
    monkeypatch.setenv("PERFKIT_RANK_TABLES_MB", "0.02")  # 20 kB: one 8 kB table fits
    rank_tables.clear()
    for key in range(5):
        rank_tables.cached_table(f, key, build)
    assert rank_tables._SIZE[0] <= rank_tables.budget_bytes()
    rank_tables.clear()


@pytest.mark.parametrize("name", _params(["kineto-hta", "ascend-level1"]))
def test_worker_handoff_gives_the_parsed_tables(name: str) -> None:
    """Ranks parsed in worker processes (tables handed over as Arrow files) equal ranks
    parsed in this process."""
    here = detect.load(SAMPLES[name], cache=False, progress=False, workers=1)
    pooled = detect.load(SAMPLES[name], cache=False, progress=False, workers=2)
    assert here.ranks == pooled.ranks and len(here.ranks) == 2
    for a, b in zip(here, pooled, strict=True):
        assert a.meta == b.meta
        for table in TABLE_NAMES:
            pd.testing.assert_frame_equal(getattr(b, table), getattr(a, table),
                                          check_exact=True)



@pytest.mark.parametrize("damage", ["late_float", "quoted_newlines"])
def test_csv_read_with_fast_settings_keeps_every_row_exact(tmp_path, damage):
    # the CSV read tries pyarrow's fast settings (1 MB blocks typed from the first one,
    # no quoted-newline mode) before the careful ones: a float after 200,000 integer rows,
    # or newlines inside quoted fields across the whole file (some at block edges), must
    # still come back row for row, whichever of the two reads it took
    from perfkit.io._common import read_csv

    rows = [(f"MatMul_{i % 7}", float(i),
             f"{i % 5},\n{i % 3}" if damage == "quoted_newlines" and i % 97 == 0
             else f"{i % 5},{i % 3}") for i in range(200_000)]
    if damage == "late_float":
        rows.append(("Add", 2.5, "1,1"))
    lines = ["Name,Task ID,Input Shapes"] + [
        f'{a},{b:g},"{c}"' if b != int(b) else f'{a},{int(b)},"{c}"' for a, b, c in rows]
    path = tmp_path / "kernel_details.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > 4 << 20  # several of pyarrow's blocks
    table = read_csv(path, "a test CSV", text_cols=("Input Shapes",))
    assert table.num_rows == len(rows)
    assert [float(v) for v in table.column("Task ID").to_pylist()] == [b for _, b, _ in rows]
    assert table.column("Input Shapes").to_pylist() == [c for _, _, c in rows]
