"""perfkit's text columns are Arrow-stored on every supported pandas (perfkit._text_dtype).

pandas 2.x reads ``"string"`` as one Python object per row, pandas 3 as Arrow data. The
checks here build their expectations from pyarrow and pandas directly, and run on both (the
oldest CI job runs them on pandas 2.3.3, the newest on pandas 3).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import perfkit as pk
from perfkit import _text_codes
from perfkit._text_dtype import TEXT, table_to_frame, text_series
from perfkit.io.cache import parquet_text

ROOT = Path(__file__).resolve().parents[1]
SIMULATED = ROOT / "data" / "simulated" / "llama2-7b-tp2"


def _arrow_stored(values: pd.Series) -> bool:
    return isinstance(values.array, pd.arrays.ArrowStringArray)


def test_text_is_pandas_string_dtype_stored_in_arrow() -> None:
    assert TEXT == "string"  # what pandas' own alias names, whatever its storage
    assert TEXT.storage == "pyarrow"
    assert TEXT.na_value is pd.NA
    s = pd.Series(["a", None, "b"], dtype=TEXT)
    assert _arrow_stored(s)
    assert s.isna().tolist() == [False, True, False]


def test_text_series_reads_arrow_text_without_changing_a_value() -> None:
    arrow = pa.chunked_array([["MatMul", None], ["Add", "MatMul"]], type=pa.string())
    got = text_series(arrow)
    assert _arrow_stored(got)
    assert got.tolist()[::2] == ["MatMul", "Add"] and got.tolist()[3] == "MatMul"
    assert got.isna().tolist() == [False, True, False, False]
    large = text_series(pa.array(["x", None], type=pa.large_string()))
    assert large.dtype == TEXT and large.isna().tolist() == [False, True]


def test_table_to_frame_gives_string_columns_as_text_and_other_text_as_pandas_reads_it() -> None:
    frame = pd.DataFrame({"name": pd.array(["a", None, "a"], dtype="string"),
                          "note": pd.Series(["x", "y", None], dtype=object),
                          "n": [1, 2, 3]})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    got = table_to_frame(table)
    assert got["name"].dtype == TEXT and _arrow_stored(got["name"])
    assert got["name"].isna().tolist() == [False, True, False]
    # text that was in an object column comes back as pandas itself reads it (an object
    # column on pandas 2, its "str" dtype on pandas 3)
    assert got["note"].dtype == table.to_pandas()["note"].dtype
    assert got["note"].tolist()[:2] == ["x", "y"]
    assert got["n"].tolist() == [1, 2, 3]


def test_a_parquet_file_reads_back_with_arrow_text_and_its_row_ids(tmp_path: Path) -> None:
    frame = pd.DataFrame({"name": pd.array(["MatMul", "Add", None, "MatMul"] * 50,
                                           dtype="string"),
                          "dur_us": [1.0, 2.0, 3.0, 4.0] * 50})
    f = tmp_path / "kernels.parquet"
    frame.to_parquet(f, index=False, write_page_checksum=True)
    assert pq.ParquetFile(f).metadata.row_group(0).column(0).has_dictionary_page
    got = parquet_text.read_frame(f)
    assert _arrow_stored(got["name"])
    ids = _text_codes.ids_of(got["name"].array._pa_array)
    assert ids is not None  # the Parquet dictionary's indices, one per row
    assert pd.factorize(ids)[0].tolist() == pd.factorize(
        frame["name"].astype(object).fillna("\0"))[0].tolist()


def test_a_cached_rank_reopens_with_arrow_text(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    parsed = pk.load(SIMULATED, progress=False)
    cached = pk.load(SIMULATED, progress=False)
    for a, b in zip(parsed, cached, strict=True):
        for col in ("name", "type"):
            assert _arrow_stored(a.kernels[col]) and _arrow_stored(b.kernels[col])
            assert a.kernels[col].fillna("\0").tolist() == b.kernels[col].fillna("\0").tolist()
