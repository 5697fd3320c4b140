"""The operator rules count the tasks of the steps only, as the Operators tab does.

TraceLens' Qwen trace (``wild/tl_qwen_h100``: one ``ProfilerStep#6``, forward only) holds
509 device tasks launched before the trace began: their runtime call is not in the file,
so they belong to no step, and the step breakdown and the Operators tab leave them out.
The expected figures are read here from the raw gzip JSON (``json`` / ``gzip`` only): a
device task is in the step when the runtime call with its correlation id starts inside
the step's host span. The synthetic profiles check the other rules by hand arithmetic:
tasks of no step (``step`` missing) beside tasks of step 1 add nothing.
"""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from typing import Any

import pytest
from shared_samples import shared_sample

import perfkit as pk
from perfkit import analysis as A
from perfkit.advisor import advise

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
#: The CUDA copy kernels, as PyTorch names them (``direct_copy_kernel_cuda``,
#: ``bfloat16_copy_kernel_cuda``, ``.contiguous()``): the copies the redundant-copies
#: rule counts.
COPY = re.compile(r"copy_kernel|contiguous", re.IGNORECASE)
NO_STEP = re.compile(r"(\d+) device tasks of no step")


@cache
def _qwen() -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
    """(device tasks in ProfilerStep#6, device tasks of no step, the loaded profile)."""
    folder = shared_sample("wild/tl_qwen_h100")
    (path,) = folder.glob("*.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    (step,) = [e for e in events if e.get("name") == "ProfilerStep#6"
               and e.get("cat") == "user_annotation"]
    lo, hi = float(step["ts"]), float(step["ts"]) + float(step["dur"])
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    inside, outside = [], []
    for e in events:
        if e.get("cat") not in DEVICE:
            continue
        ts = launch.get(e["args"].get("correlation"))
        (inside if ts is not None and lo <= ts < hi else outside).append(e)
    return inside, outside, pk.load(folder, cache=False, progress=False)


@pytest.mark.shared_samples
def test_copies_are_the_copy_kernels_launched_inside_the_step() -> None:
    """197 copy kernels (5.10 ms) are launched inside ProfilerStep#6; the 83 launched
    before the trace (2.17 ms more) belong to no step."""
    inside, outside, prof = _qwen()
    copies = [e for e in inside if COPY.search(e["name"])]
    before = [e for e in outside if COPY.search(e["name"])]
    assert copies and before  # both kinds are there: the test can tell them apart
    want_ms = sum(float(e["dur"]) for e in copies) / 1e3  # one step, one rank
    (f,) = [f for f in advise(prof) if f.rule == "redundant_copies"]
    assert f.ms_per_step == pytest.approx(want_ms, rel=1e-6)
    assert f.evidence.startswith(f"{len(copies)} copy tasks over ranks and steps")
    assert int(NO_STEP.search(f.evidence).group(1)) == len(outside)
    # the Operators tab's unfused table: the same copies
    uf = A.unfused_patterns(prof).set_index("pattern")
    assert int(uf.loc["copies", "occurrences"]) == len(copies)
    assert any(NO_STEP.search(n) for n in uf.attrs["notes"])


@pytest.mark.shared_samples
def test_the_priced_operators_are_the_tasks_launched_inside_the_step() -> None:
    """The operator efficiency table (the roofline of the Operators tab, read by the
    GEMM rule) sums the device tasks of ProfilerStep#6: 31.9 ms, not the 45.6 ms of every
    task in the file; as much as the Operators tab's top operators."""
    inside, outside, prof = _qwen()
    want_us = sum(float(e["dur"]) for e in inside if not e["name"].startswith("nccl"))
    every_us = want_us + sum(float(e["dur"]) for e in outside)
    assert every_us > 1.2 * want_us
    eff = A.operator_efficiency(prof)
    assert float(eff["total_us"].sum()) == pytest.approx(want_us, rel=1e-6)
    assert float(eff["per_step_us"].sum()) == pytest.approx(want_us, rel=1e-6)
    assert any(int(m.group(1)) == len(outside)
               for m in map(NO_STEP.search, eff.attrs["notes"]) if m)
    top = A.top_operators(prof, n=None)
    assert float(top["total_us"].sum()) == pytest.approx(want_us, rel=1e-6)

