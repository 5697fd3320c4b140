"""A missing text stays missing on every supported pandas.

pandas 2 (the oldest pins) has no ``str`` dtype: its ``astype("str")`` wrote ``"<NA>"``
for a Kineto operator without shapes, which ``perfkit check`` then counted as a recorded
shape (a trace without ``record_shapes`` read as recorded). Found by running the slow
recording-check test under the oldest pins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import perfkit as pk
from perfkit.io._common.distinct import str_array


def test_str_array_keeps_missing_values_missing() -> None:
    values = pd.Series(["4,64;;64", pd.NA, "1,2"], dtype="string")
    got = pd.Series(str_array(values))
    assert got.isna().tolist() == [False, True, False]
    assert got[0] == "4,64;;64" and got[2] == "1,2"
    assert not got.astype(object).isin(["<NA>", "nan", "None"]).any()
    assert pd.Series(str_array(pd.Series(["a", np.nan], dtype=object))).isna().tolist() == \
        [False, True]


def test_a_kineto_operator_without_shapes_has_none(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    ops = pk.load("sample:kineto-tiny-llama", progress=False)[0].ops
    shapes = ops["input_shapes"]
    assert shapes.isna().any()  # annotations and the like carry no Input Dims
    assert not shapes.astype(object).isin(["<NA>", "nan", "None"]).any()
    kernels = pk.load("sample:kineto-tiny-llama", progress=False)[0].kernels
    if "input_shapes" in kernels:
        assert not kernels["input_shapes"].astype(object).isin(["<NA>", "nan"]).any()
