"""Numbers in text columns read as Python reads them.

A profiler's numeric csv column is text to Arrow when a cell is not a plain number
(``N/A``, a quoted or padded value); :func:`perfkit.io._common.to_float` then reads every
cell on its own. The expected values come from Python: a cell is a number when it matches
``[-+]?(digits[.digits]|.digits)([eE][-+]?digits)?`` once spaces, tabs and quotes around
it are removed, and NaN otherwise (``inf``, ``nan`` and ``Infinity`` included, although
Arrow's own cast reads them: a faster one-cast path must not let them through).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest

from perfkit.io._common import to_float

_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


def _expected(cells: list[str | None]) -> list[float]:
    out = []
    for cell in cells:
        text = None if cell is None else cell.strip("\t \"")
        out.append(float(text) if text is not None and _NUMBER.fullmatch(text) else math.nan)
    return out


PLAIN = ["1.5", "2e3", "+4", ".5", "5.", "-0.25", "1E+05", None, "123456789.125"]
MIXED = [*PLAIN, " 7 ", "\"8\"", "x", "", "inf", "-Infinity", "nan", "0x10"]


@pytest.mark.parametrize("cells", [PLAIN, MIXED, ["inf", "1"], ["nan", "2", None]],
                         ids=["plain", "mixed", "an infinity", "a nan"])
def test_text_numbers_as_python_reads_them(cells: list[str | None]) -> None:
    col = pa.chunked_array([pa.array(cells[:3], pa.string()), pa.array(cells[3:], pa.string())])
    got = to_float(col, len(cells))
    np.testing.assert_array_equal(got, np.array(_expected(cells)))
