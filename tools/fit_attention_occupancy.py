"""Fit the attention occupancy constants of :mod:`perfkit.calc.attention_occupancy`.

Reads the two runs of ``tools/measure_attention_occupancy.py`` shipped in
``tests/data/kernel_rates_h100`` (``occupancy1.json.gz``, ``occupancy2.json.gz``), and per
implementation, pass and mask fits ``κ`` to the calls' measured efficiency over the
published curve's (each call's device time the geometric mean of the two runs); prints
the figures ``TILE_HALF`` holds and the errors with and without the factor::

    python tools/fit_attention_occupancy.py
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np

from perfkit.calc.attention_occupancy import fit_tile_half, occupancy
from perfkit.calc.attention_rate import attention_efficiency

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "kernel_rates_h100"
PEAK, SMS = 989.5e12, 132  # the "h100" preset's bf16 peak; the lent H100's multiprocessors
IMPLEMENTATION = {"flash": "flash2", "cudnn": "cudnn"}


def calls() -> list[dict]:
    """One row per call and pass: pairs, length, head dim, causal, implementation, pass,
    measured and published efficiency."""
    first, second = (json.loads(gzip.open(DATA / f"occupancy{i}.json.gz").read())["rows"]
                     for i in (1, 2))
    out = []
    for a, b in zip(first, second, strict=True):
        flops = 4.0 * a["pairs"] * a["seq"] ** 2 * a["head_dim"] * (0.5 if a["causal"] else 1)
        impl = IMPLEMENTATION[a["backend"]]
        for pass_, work, key in (("fwd", flops, "fwd_us"), ("bwd", 2.5 * flops, "bwd_us")):
            seconds = 1e-6 * math.sqrt(a[key] * b[key])
            published = attention_efficiency(a["seq"], a["seq"], a["head_dim"], a["causal"],
                                             pass_ == "bwd", impl, "h100")
            out.append({"impl": impl, "pass": pass_, "causal": a["causal"],
                        "pairs": a["pairs"], "seq": a["seq"], "head_dim": a["head_dim"],
                        "measured": work / seconds / PEAK, "published": published})
    return out


def fit(rows: list[dict] | None = None) -> dict[tuple[str, str, bool], float]:
    rows = calls() if rows is None else rows
    keys = sorted({(r["impl"], r["pass"], r["causal"]) for r in rows})
    return {key: fit_tile_half([(r["pairs"], r["seq"], r["head_dim"],
                                 r["measured"] / r["published"]) for r in rows
                                if (r["impl"], r["pass"], r["causal"]) == key], SMS)
            for key in keys}


def errors(rows: list[dict], kappas: dict | None) -> np.ndarray:
    """|published · factor / measured − 1| per call with ``kappas``' factor (none where
    ``kappas`` is None)."""
    out = []
    for r in rows:
        factor = 1.0
        if kappas is not None:
            key = (r["impl"], r["pass"], r["causal"])
            factor = occupancy(r["pairs"], r["seq"], r["head_dim"], r["causal"],
                               r["pass"] == "bwd", r["impl"], SMS, kappas[key])
        out.append(abs(r["published"] * factor / r["measured"] - 1))
    return np.array(out)


def main() -> int:
    rows = calls()
    kappas = fit(rows)
    for key, value in kappas.items():
        print(f"{key}: {value:.4g}")
    with_factor, without = errors(rows, kappas), errors(rows, None)
    held = []
    for length in sorted({r["seq"] for r in rows}):
        others = fit([r for r in rows if r["seq"] != length])
        held.extend(errors([r for r in rows if r["seq"] == length], others))
    held = np.array(held)
    print(f"each sequence length left out of the fit in turn: mean {100 * held.mean():.1f} %, "
          f"p95 {100 * np.percentile(held, 95):.1f} %")
    print(f"{len(rows)} calls: with the factor mean {100 * with_factor.mean():.1f} %, p95 "
          f"{100 * np.percentile(with_factor, 95):.1f} %; without {100 * without.mean():.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
