"""perfkit's attention curves (perfkit.calc.attention_rate, read from the FlashAttention-3
paper's H100 bars) against attention kernels measured for perfkit on an H100
(tests/data/kernel_rates_h100: PyTorch SDPA's FlashAttention-2 and cuDNN backends).

Only calls whose forward lasts at least 1 ms count: below that the eager timing holds the
host's launches (PROVENANCE.md). Each time is the geometric mean of the two runs; FLOPs as
the paper counts them: 4·b·h·L²·d forward, halved with the causal mask, backward 2.5 times.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfkit.calc.attention_rate import attention_efficiency
from tests.kernel_rates import runs

PEAK = 989.5e12
IMPLEMENTATION = {"flash": "flash2", "cudnn": "cudnn"}


def _ratios() -> dict[tuple[str, str], np.ndarray]:
    """measured / published efficiency per (implementation, pass)."""
    first, second = runs()
    out: dict[tuple[str, str], list[float]] = {}
    for a, b in zip(first["attention"], second["attention"], strict=True):
        fwd = 1e-3 * (a["fwd_ms"] * b["fwd_ms"]) ** 0.5
        if fwd < 1e-3:
            continue
        both = 1e-3 * (a["fwd_bwd_ms"] * b["fwd_bwd_ms"]) ** 0.5
        flops = 4.0 * a["batch"] * a["heads"] * a["seq"] ** 2 * a["head_dim"] \
            * (0.5 if a["causal"] else 1.0)
        impl = IMPLEMENTATION[a["backend"]]
        for pass_, work, seconds in (("fwd", flops, fwd), ("bwd", 2.5 * flops, both - fwd)):
            published = attention_efficiency(a["seq"], a["seq"], a["head_dim"], a["causal"],
                                              pass_ == "bwd", impl, "h100")
            out.setdefault((impl, pass_), []).append(work / seconds / PEAK / published)
    return {key: np.array(values) for key, values in out.items()}


@pytest.mark.parametrize("key", [("flash2", "fwd"), ("flash2", "bwd"), ("cudnn", "fwd"),
                                 ("cudnn", "bwd")])
def test_the_published_curves_hold_on_measured_kernels(key):
    ratio = _ratios()[key]
    assert len(ratio) >= 20
    assert np.abs(ratio - 1).mean() < 0.15
    assert np.abs(ratio - 1).max() < 0.25


def test_the_two_implementations_differ_as_published():
    """cuDNN's kernels run well above FlashAttention-2's on Hopper, as published: the
    measured speed-up is the published one or up to 30 % more (1.06-1.29 times it: the
    measured cuDNN 9.19 is newer than the paper's)."""
    first, _ = runs()
    rows = {(r["backend"], r["head_dim"], r["seq"], r["batch"], r["heads"], r["causal"]): r
            for r in first["attention"]}
    speedups = []
    for (backend, d, seq, batch, heads, causal), r in rows.items():
        other = rows.get(("flash", d, seq, batch, heads, causal))
        if backend != "cudnn" or other is None or other["fwd_ms"] < 1.0:
            continue
        measured = other["fwd_ms"] / r["fwd_ms"]
        published = attention_efficiency(seq, seq, d, causal, False, "cudnn", "h100") \
            / attention_efficiency(seq, seq, d, causal, False, "flash2", "h100")
        speedups.append(measured / published)
    assert len(speedups) >= 10
    assert 1.0 < min(speedups) and max(speedups) < 1.35


def _occupancy_tool():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "fit_attention_occupancy.py"
    spec = importlib.util.spec_from_file_location("fit_attention_occupancy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_occupancy_constants_are_what_the_kernels_fit():
    from perfkit.calc.attention_occupancy import TILE_HALF

    fitted = _occupancy_tool().fit()
    assert set(fitted) == set(TILE_HALF)
    for key, kappa in fitted.items():
        assert TILE_HALF[key] == pytest.approx(kappa, rel=2e-3), key


def test_occupancy_brings_the_curves_to_calls_with_few_pairs():
    """288 kernel timings (1-256 pairs, 1k-8k tokens, two implementations, both passes,
    causal or not; device time from the profiler): the published curves alone are off by
    over 100 % on average (a call of one pair and 1k tokens runs at 4-15 % of the curve),
    with the occupancy factor by under 15 %, and under 16 % with each sequence length left
    out of the fit in turn."""
    tool = _occupancy_tool()
    rows = tool.calls()
    assert len(rows) == 288
    assert tool.errors(rows, None).mean() > 1.0
    from perfkit.calc.attention_occupancy import TILE_HALF
    assert tool.errors(rows, TILE_HALF).mean() < 0.15
    held = []
    for length in sorted({r["seq"] for r in rows}):
        kappas = tool.fit([r for r in rows if r["seq"] != length])
        held.extend(tool.errors([r for r in rows if r["seq"] == length], kappas))
    assert np.mean(held) < 0.16


def test_occupancy_is_one_where_the_curves_were_measured_or_nothing_is_known():
    from perfkit.calc.attention_occupancy import multiprocessors, occupancy, published_pairs

    for length in (1024, 4096, 16384):
        pairs = published_pairs(length, 128)
        assert occupancy(pairs, length, 128, True, False, "cudnn", 132) == pytest.approx(1)
    assert occupancy(1, 1024, 128, True, False, "cudnn", None) == 1.0
    assert multiprocessors("ascend-910b") is None and multiprocessors("mi300x") is None
    # the lent H100 reported its multiprocessors: the table agrees
    first, _ = runs()
    assert multiprocessors("h100") == first["environment"]["sms"] == 132
    assert multiprocessors("h100-pcie") == 114
    # fewer pairs, lower rate; the masked call needs more tiles to fill the GPU
    few = occupancy(4, 2048, 128, False, False, "cudnn", 132)
    masked = occupancy(4, 2048, 128, True, False, "cudnn", 132)
    assert masked < few < 1.0
    e = attention_efficiency(2048, 2048, 128, True, False, "cudnn", "h100", pairs=4)
    assert e == pytest.approx(masked * attention_efficiency(2048, 2048, 128, True, False,
                                                             "cudnn", "h100"))
