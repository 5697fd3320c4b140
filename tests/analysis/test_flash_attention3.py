"""FlashAttention 3's kernels in the DeepSeek training step (``wild/ds_train``, H800):
``cutlass::device_kernel<flash::FlashAttnBwd<...>>`` and its pre- and post-processing
kernels were counted as GEMMs (their names hold "cutlass"), so the Operators tab put the
attention backward under matmul and the Recompute tab said "attention passes of only one
direction (4 forward, 0 backward)" of a training step. Checked against the trace read here
with ``json``.
"""

from __future__ import annotations

import json

import pytest
from shared_samples import KINETO_TRACES, sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

TRACE = sample(KINETO_TRACES["ds_train"])


@pytest.fixture(scope="module")
def raw() -> dict[str, list[float]]:
    """The trace's FlashAttention kernels' durations (µs), by role."""
    events = json.loads(TRACE.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    out: dict[str, list[float]] = {"fwd": [], "bwd": [], "helper": [], "all": []}
    for e in kernels:
        name = e["name"]
        if "flash::" not in name:
            continue
        out["all"].append(float(e["dur"]))
        if "Flash_fwd_kernel_traits" in name:
            out["fwd"].append(float(e["dur"]))
        elif "FlashAttnBwdPreprocess" in name or "FlashAttnBwdPostprocess" in name:
            out["helper"].append(float(e["dur"]))
        elif "flash::FlashAttnBwd<" in name:
            out["bwd"].append(float(e["dur"]))
    assert (len(out["fwd"]), len(out["bwd"]), len(out["helper"])) == (4, 4, 8)
    return out


@pytest.fixture(scope="module")
def profile():
    return pk.load(TRACE.parent, cache=False, progress=False)


def test_one_backward_pass_per_forward_pass(raw, profile) -> None:
    ev = pk.analysis.recompute_evidence(profile)
    assert len(ev) == 1, ev.attrs.get("notes")
    row = ev.iloc[0]
    assert (row["forward"], row["backward"]) == (len(raw["fwd"]), len(raw["bwd"]))
    assert row["recompute"] == "none"


def test_the_attention_type_holds_every_flash_attention_kernel(raw, profile) -> None:
    top = pk.analysis.top_operators(profile, by="type", n=None)
    att = top[top["type"].astype(str) == "attention"].iloc[0]
    steps = pk.analysis.step_breakdown(profile)
    assert steps["step"].nunique() == 1  # one step: its figures are the trace's
    assert att["per_step_us"] == pytest.approx(sum(raw["all"]), rel=1e-9)
    assert att["calls_per_step"] == len(raw["all"])
