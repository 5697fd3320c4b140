"""The data-loading finding recommends DataLoader changes only where the trace shows a loader.

On the TimeSformer H100 inference trace the finding said "0 µs in data-loader operators" and
still advised more DataLoader workers: the 218 ms the device waited were the pipeline's video
decoding and preprocessing, no loader operator. The raw traces are read here independently
(gzip/json): the loader operators by their names (``enumerate(DataLoader)...__next__``), summed
per ``ProfilerStep`` window, and the device's wait as the step's wall time less its device time
(:func:`raw_kineto.raw_walls`, :func:`raw_kineto.raw_device_steps`).
"""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest
from raw_kineto import raw_device_steps, raw_events, raw_walls
from shared_samples import KINETO_TRACES, sample

import perfkit as pk

__all__: list[str] = []

pytestmark = pytest.mark.shared_samples

_LOADER = re.compile(r"DataLoader|enumerate\(|__next__")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _loader_per_step(path: Path) -> dict[int, Decimal]:
    """Step -> µs of loader operators starting inside its first host ``ProfilerStep`` span."""
    events = raw_events(path)
    spans = {}
    for e in events:
        m = _STEP.match(str(e.get("name", "")))
        if m and e.get("cat") in ("cpu_op", "user_annotation", "Operator"):
            spans.setdefault(int(m.group(1)), (Decimal(str(e["ts"])),
                                               Decimal(str(e["ts"])) + Decimal(str(e["dur"]))))
    out = {s: Decimal(0) for s in spans}
    for e in events:
        if e.get("cat") in ("cpu_op", "Operator") and _LOADER.search(str(e.get("name", ""))):
            ts = Decimal(str(e["ts"]))
            for s, (a, b) in spans.items():
                if a <= ts < b:
                    out[s] += Decimal(str(e["dur"]))
    return out


def _finding(path: Path) -> pk.Finding:
    (f,) = [f for f in pk.advise(pk.load(path)) if f.rule == "data_loading"]
    return f


def test_no_loader_operator_no_dataloader_advice() -> None:
    path = sample(KINETO_TRACES["tl_timesformer_h100"])
    assert not any(_LOADER.search(str(e.get("name", ""))) for e in raw_events(path))
    walls = raw_walls(path)
    device, _ = raw_device_steps(path)
    waits = [walls[s] - device[s] for s in walls]
    wait = float(sum(waits)) / len(waits)
    assert wait > 200e3  # 218 ms of the 383 ms step
    f = _finding(path)
    assert f.ms_per_step * 1e3 == pytest.approx(wait, rel=1e-6)
    assert f"{wait / 1e3:.3g} ms" in f.evidence
    assert "0 µs" not in f.evidence and "batch" not in f.title
    assert "no data-loader operator was recorded" in f.evidence
    assert not re.search(r"DataLoader|num_workers|prefetch", f.recommendation)


@pytest.mark.parametrize("name", ["k_resnet50_nw0", "k_resnet50_nw4"])
def test_loader_time_in_the_trace_keeps_the_dataloader_finding(name: str) -> None:
    path = sample(KINETO_TRACES[name])
    longest = float(max(_loader_per_step(path).values()))
    assert longest > 0
    f = _finding(path)
    assert f.title == "The device waits for the next batch at the start of the step"
    assert f"{longest / 1e3:.3g} ms in data-loader operators" in f.evidence
    assert "DataLoader" in f.recommendation
