"""notebooks/02_parallel_strategy's table of the layouts that fit shows each layout's band
uncalibrated too: ``pk.plan.search`` at perfkit's default rates has one (its ``low_s`` and
``high_s``), so the table showed a bare estimate where a band was known.

The notebook's cells run here as stored, without a calibration (``fit = None``, as when the
profile's job lacks what calibrating needs). The band shown is checked against the
arithmetic of :mod:`perfkit.plan.predict`'s docstring: ``step · (1 ∓ u)`` with
``u = sqrt(u_model² + Σ (σ · part / step)²)``, uncalibrated ``u_model = 0.04`` and ``σ =
0.25`` on every part. The parts are non-negative and add up to the step, so
``Σ (part / step)² ≤ 1`` and ``0.04 ≤ u ≤ sqrt(0.04² + 0.25²) = 0.2532``.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "02_parallel_strategy.ipynb"


def _cells() -> list[str]:
    return ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]]


def test_the_uncalibrated_layouts_show_their_band() -> None:
    cells = _cells()
    ns: dict = {"display": lambda *_: None}
    exec(cells[0], ns)  # the parameters
    exec(cells[2], ns)  # the imports, model and hardware
    ns["fit"] = None    # no calibration
    search = next(i for i, s in enumerate(cells) if s.startswith("calibration = "))
    exec(cells[search], ns)
    assert ns["calibration"] is None
    page = eval(cells[search + 1], ns)._repr_html_()
    heads = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", page)]
    rows = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])]
    step = next(i for i, h in enumerate(heads) if h.startswith("uncalibrated estimate"))
    assert any(h.startswith("band low") for h in heads), heads
    low = next(i for i, h in enumerate(heads) if h.startswith("band low"))
    high = next(i for i, h in enumerate(heads) if h.startswith("band high"))
    assert heads[low][8:] == heads[high][9:] == heads[step][21:]  # the same unit
    assert rows
    for row in rows:
        s, lo, hi = (float(row[i].replace(",", "")) for i in (step, low, high))
        # each figure rounded to half the last digit it shows (3 significant digits)
        e_s, e_lo, e_hi = (0.5 * 10.0 ** -len(row[i].partition(".")[2])
                           for i in (step, low, high))
        assert lo < s < hi
        # symmetric: step · (1 ∓ u), to the figures' rounding
        assert (hi - s) / s == pytest.approx((s - lo) / s, abs=(e_hi + 2 * e_s + e_lo) / s)
        tol = (e_hi + e_s) / s
        assert 0.04 - tol <= (hi - s) / s <= math.hypot(0.04, 0.25) + tol

