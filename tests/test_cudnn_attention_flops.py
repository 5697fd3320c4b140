"""cuDNN's fused attention as recent PyTorch launches it (``aten::_cudnn_attention_forward``
/ ``_backward`` under ``aten::_scaled_dot_product_cudnn_attention``) is priced: its kernels
carry the FLOPs of their shapes, and a profile's calibration fits attention from them.

The shapes and the causal flag are read here from the raw trace (gzip + json); the FLOPs
are the FlashAttention papers' count, written out: ``4·b·h·s²·d`` forward, halved with the
causal mask, the backward 2.5 times the forward.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.analysis import operator_efficiency

TRACE = Path(__file__).resolve().parent / "data" / "kineto_llama_layouts_h100" \
    / "a.pt.trace.json.gz"


def _launcher(name: str) -> tuple[list[int], bool]:
    with gzip.open(TRACE, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    op = next(e for e in events if e.get("name") == name and e.get("cat") == "cpu_op")
    args = op["args"]
    first = 1 if name.endswith("backward") else 0  # the output gradient comes first
    causal_at = 14 if name.endswith("backward") else 10
    return args["Input Dims"][first], args["Concrete Inputs"][causal_at] == "True"


@pytest.mark.parametrize("launcher, kernel, times", [
    ("aten::_cudnn_attention_forward", "sdpa_sm90_flash_fprop", 1.0),
    ("aten::_cudnn_attention_backward", "sdpa_sm90_flash_bprop", 2.5),
])
def test_cudnn_attention_kernels_carry_their_shapes_flops(launcher, kernel, times):
    (b, h, s, d), causal = _launcher(launcher)
    assert causal
    expected = 4.0 * b * h * s * s * d / 2 * times
    profile = pk.load(TRACE, progress=False)
    eff = operator_efficiency(profile, pk.Hardware.preset("h100"))
    rows = eff[eff["name"].astype(str).str.contains(kernel)]
    assert len(rows) == 1
    assert rows["kind"].iloc[0] == "attention"
    assert float(rows["flops"].iloc[0]) == pytest.approx(expected, rel=1e-12)


def test_a_profile_calibration_fits_attention_from_those_kernels():
    cal = pk.plan.calibrate(pk.load(TRACE, progress=False))
    term = next(t for t in cal.terms if t[0] == "attention_efficiency")
    assert "2 attention operator shapes against the published cudnn curve" in term[2]
    assert 0.5 < term[1] < 1.5  # the curve was measured on the same kind of device
