"""Optional columns keep the schema's conventions (docs/schema.md): text is the Arrow
string dtype with ``pd.NA`` where missing, and a step, a group-local rank or a stream is a
nullable integer — as the key columns are. A walk found ``comm_matrix.step`` as floats
(steps read ``50.0``), ``src_local``/``dst_local`` too, and text columns with NaN on
pandas 3; each format is loaded here and every optional column checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_DB_LEVEL1, PT_LEVEL1, sample

import perfkit as pk
from perfkit._text_dtype import TEXT
from perfkit.io.canonical.schema import TABLES, WHOLE_EXTRAS, conform


def _check(profile: pk.Profile | pk.Cluster) -> int:
    """Every optional column of every table in its convention; the number checked."""
    checked = 0
    for name, keys in TABLES.items():
        frame = getattr(profile, name)
        for col in frame.columns:
            if col in keys:
                continue
            dtype = frame[col].dtype
            if isinstance(dtype, pd.StringDtype) or dtype is np.dtype("O"):
                assert dtype == TEXT, (name, col, dtype)
                checked += 1
            if col in WHOLE_EXTRAS:
                assert str(dtype) == "Int64", (name, col, dtype)
                checked += 1
    return checked


def test_conform_casts_optional_text_and_whole_numbers() -> None:
    frame = pd.DataFrame({"step": [1.0, 50.0, np.nan], "src_local": [0.0, 1.0, 2.0],
                          "op_name": pd.Series(["a", None, "c"], dtype="object"),
                          "ratio": [0.5, 0.25, 1.0]})
    out = conform(frame, "comm_matrix")
    assert str(out["step"].dtype) == "Int64" and out["step"].tolist()[:2] == [1, 50]
    assert out["step"].isna().tolist() == [False, False, True]
    assert out["op_name"].dtype == TEXT and out["op_name"].iloc[1] is pd.NA
    assert out["ratio"].dtype == np.float64  # other numbers are left as they are
    # conformed again, nothing changes (a table read back from the cache)
    pd.testing.assert_frame_equal(conform(out, "comm_matrix"), out)


def test_the_bundled_samples_optional_columns() -> None:
    assert _check(pk.load("sample:kineto-tiny-llama", progress=False)) > 0
    assert _check(pk.load("sample:llama2-7b-tp2", progress=False)) > 0


@pytest.mark.shared_samples
@pytest.mark.parametrize("path", [PT_LEVEL1, PT_DB_LEVEL1, "wild/mi_run1"])
def test_the_real_exports_optional_columns(path: str) -> None:
    assert _check(pk.load(sample(path), progress=False)) > 0
