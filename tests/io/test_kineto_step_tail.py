"""The device's idle time after a step's last task, while its ProfilerStep lasts, is the
step's free time.

HolisticTraceAnalysis' two sampled ranks (``gpu/hta-trace_filter``, ProfilerStep#551 and
#552, an NCCL data-parallel job) finish each step's device work 4.3 to 4.5 ms before the
host's ProfilerStep span ends: the host is still in the step (its optimizer, a
synchronisation) while the device waits. That idle time was in no step: each step ran
from its first to its last device task, the next step's wait began at its own span's
start, and the 607.3 ms step read 603.0 ms. Here every figure is read from the raw gzip
JSON (``gzip`` / ``json`` only): the step's tasks are those whose runtime call (same
correlation id) starts in its span; its free time is its first-to-last range less the
union of its tasks, plus the idle tail up to the span's end (or the next step's first
task, if sooner). On these ranks the device starts each step after its span starts and
stops before it ends, so a step's wall time (device time and the wait before it) is its
whole span.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from raw_ascend import union_us
from shared_samples import HTA, shared_sample

import perfkit as pk
from perfkit import analysis as A

pytestmark = pytest.mark.shared_samples

DEVICE = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME = {"cuda_runtime", "cuda_driver"}
STEP = re.compile(r"ProfilerStep#(\d+)")


def _raw_steps(path: Path) -> dict[int, dict[str, Any]]:
    """Step -> its span, its device tasks' first start and last end, their union, and its
    idle tail (µs), read from the raw trace; the trace has no task of no step."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    spans = {int(m.group(1)): (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
             for e in events if e.get("cat") == "user_annotation"
             and (m := STEP.fullmatch(str(e.get("name"))))}
    launch = {e["args"]["correlation"]: float(e["ts"]) for e in events
              if e.get("cat") in RUNTIME and "correlation" in e.get("args", {})}
    tasks: dict[int, list[tuple[float, float]]] = {s: [] for s in spans}
    for e in events:
        if e.get("cat") not in DEVICE:
            continue
        ts = launch.get(e["args"].get("correlation"))
        (step,) = [s for s, (a, b) in spans.items() if ts is not None and a <= ts < b]
        tasks[step].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    out = {}
    order = sorted(spans, key=lambda s: min(a for a, _ in tasks[s]))
    for i, s in enumerate(order):
        first = min(a for a, _ in tasks[s])
        last = max(b for _, b in tasks[s])
        later = min(a for a, _ in tasks[order[i + 1]]) if i + 1 < len(order) else float("inf")
        out[s] = {"span": spans[s], "first": first, "last": last,
                  "busy": union_us(tasks[s]), "tail": max(0.0, min(spans[s][1], later) - last)}
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_the_idle_tail_of_a_step_is_its_free_time(rank: int) -> None:
    path = shared_sample(f"{HTA}/sampled_rank-{rank}.json.gz")
    raw = _raw_steps(path)
    prof = pk.load(path, cache=False, progress=False)
    assert prof.kernels["step"].notna().all()  # no task of no step: nothing to take off
    b = A.step_breakdown(prof).set_index("step")
    assert sorted(b.index) == sorted(raw) == [551, 552]
    for step, r in raw.items():
        (start, end) = r["span"]
        assert start < r["first"] and r["last"] < end  # the device waits at both ends
        assert r["tail"] > 4000.0  # 4.3-4.5 ms: what the step's wall time left out
        row = b.loc[step]
        assert row["free_us"] == pytest.approx(
            r["last"] - r["first"] - r["busy"] + r["tail"], abs=0.01), step
        assert row["step_us"] == pytest.approx(r["last"] - r["first"] + r["tail"],
                                               abs=0.01), step
        # the wait before the first task, and the device time with its tail: the span
        assert row["step_us"] + row["preparing_us"] == pytest.approx(end - start,
                                                                     abs=0.01), step
    walls = sorted(e - s for s, e in (r["span"] for r in raw.values()))
    assert A.measured_step_s(b.reset_index()) == pytest.approx(
        (walls[0] + walls[1]) / 2 / 1e6, rel=1e-12)  # the median of two steps
