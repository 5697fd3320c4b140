"""Text work done once per distinct value gives, row for row, what the per-row work gives.

The Kineto reader keeps repeated texts (names, thread ids) as Categoricals or few-valued
columns. :func:`perfkit.io._common.distinct.text` and the thread codes of
:mod:`perfkit.io.kineto.nesting` convert the few distinct values and spread them back by
code (on a 551 MB trace, 0.35 s and 0.37 s of the parse became 0.13 s and a few
milliseconds); each is checked here against converting every row's value on its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.io._common.distinct import text
from perfkit.io.kineto.nesting import _thread_codes

ARROW_TEXT = pd.StringDtype("pyarrow")  # perfkit's text on every pandas (perfkit._text_dtype)

TEXTS = [["a", "b", None, "a"], [1, 2, None, 1], ["x"] * 3, [], ["a", None], [3.5, 2.0]]


@pytest.mark.parametrize("values", TEXTS, ids=range(len(TEXTS)))
def test_text_of_a_categorical_is_every_rows_text(values: list) -> None:
    s = pd.Series(values, dtype="category", name="n", index=range(10, 10 + len(values)))
    pd.testing.assert_series_equal(text(s), s.astype(ARROW_TEXT))


def test_text_of_a_large_categorical_is_every_rows_text() -> None:
    codes = np.random.default_rng(0).integers(-1, 300, 200_000)  # -1: missing
    s = pd.Series(pd.Categorical.from_codes(codes, [f"kernel_{i}" for i in range(300)]))
    got = text(s)
    assert got.isna().sum() == (codes == -1).sum()
    assert [None if v is pd.NA else v for v in got.iloc[:50]] == [
        None if c < 0 else f"kernel_{c}" for c in codes[:50]]
    pd.testing.assert_series_equal(got, s.astype(ARROW_TEXT))


def _per_row(*tids: pd.Series) -> tuple[np.ndarray, ...]:
    """Every row's thread as text, coded over the frames together (first appearance)."""
    seen: dict[str, int] = {}
    out = []
    for t in tids:
        row = []
        for v in t.astype("string"):
            row.append(-1 if v is pd.NA else seen.setdefault(v, len(seen)))
        out.append(np.array(row, dtype=np.int64))
    return tuple(out)


CASES = [
    (pd.Series([5, 7, 5, None], dtype="Int64"), pd.Series(["7", "9", None, "5"], dtype="string")),
    (pd.Series([5, 7, 5, 3]),),
    (pd.Series([1, "1", 2], dtype=object), pd.Series(["2", "x"], dtype="string")),
    (pd.Series([], dtype="int64"), pd.Series([3, 3])),
    (pd.Series(np.random.default_rng(1).integers(0, 20, 1000)),
     pd.Series(np.random.default_rng(2).integers(10, 30, 500)).astype(str)),
]


@pytest.mark.parametrize("tids", CASES, ids=range(len(CASES)))
def test_thread_codes_are_the_rows_text_coded(tids: tuple[pd.Series, ...]) -> None:
    got = _thread_codes(*tids)
    want = _per_row(*tids)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist()
