"""The advisor's idle-gap findings against the raw Kineto trace (``json``, exact decimals).

``host_bound`` says the gaps shorter than 1 ms between a step's device tasks, per step on
average; ``host_stalls`` the gaps of 1 ms or more. Both were held to a rank's *median* free
time while being *means* over steps: on ResNet-50 (``wild/k_resnet50_nw4``, PyTorch 1.9,
V100) the short gaps read 23.2 ms per step where the trace holds 27.8 ms, and the 1.04 ms
of long gaps were left no room, so no ``host_stalls`` finding. Here each step's gaps are
worked out from the raw events: the device tasks a step's host ``ProfilerStep`` span
launched (:func:`raw_kineto.raw_windows`'s rule), their union, and the holes in it.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from raw_kineto import raw_events
from shared_samples import KINETO_TRACES, sample

import perfkit as pk

pytestmark = pytest.mark.shared_samples

TRACE = sample(KINETO_TRACES["k_resnet50_nw4"])
DEVICE = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}


def _raw_gaps() -> dict[int, tuple[Decimal, Decimal]]:
    """Step -> (gaps under 1 ms, gaps of 1 ms or more) between its device tasks, µs."""
    events = [e for e in raw_events(TRACE) if e.get("ph") == "X"]
    spans = sorted((Decimal(str(e["ts"])), Decimal(str(e["ts"])) + Decimal(str(e["dur"])),
                    int(e["name"].split("#")[1])) for e in events
                   if re.fullmatch(r"ProfilerStep#\d+", str(e.get("name", "")))
                   and e.get("cat") not in ("gpu_user_annotation", "kernel"))
    launch: dict = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if str(e.get("cat", "")).lower() in RUNTIME and corr is not None:
            launch.setdefault(corr, Decimal(str(e["ts"])))
    tasks: dict[int, list[tuple[Decimal, Decimal]]] = {}
    for e in events:
        if str(e.get("cat", "")).lower() not in DEVICE:
            continue
        when = launch.get((e.get("args") or {}).get("correlation"))
        owner = [s for s in spans if when is not None and s[0] <= when]
        if owner and when < owner[-1][1]:
            start = Decimal(str(e["ts"]))
            tasks.setdefault(owner[-1][2], []).append((start, start + Decimal(str(e["dur"]))))
    gaps = {}
    for step, intervals in tasks.items():
        short = long = Decimal(0)
        intervals.sort()
        end = intervals[0][1]
        for start, stop in intervals[1:]:
            if start > end:
                hole = start - end
                if hole < 1000:
                    short += hole
                else:
                    long += hole
            end = max(end, stop)
        gaps[step] = (short, long)
    return gaps


def _amount_ms(evidence: str, lead: str) -> float:
    found = re.search(re.escape(lead) + r": ([\d.]+) ms per step", evidence)
    assert found, evidence
    return float(found[1])


def test_gap_findings_say_the_raw_traces_means_over_steps() -> None:
    gaps = _raw_gaps()
    assert sorted(gaps) == [5, 6, 7, 8, 9, 10]
    short_ms = float(sum(s for s, _ in gaps.values()) / len(gaps)) / 1e3
    long_ms = float(sum(v for _, v in gaps.values()) / len(gaps)) / 1e3
    assert short_ms == pytest.approx(27.81, abs=0.01) and long_ms == pytest.approx(1.04, abs=0.01)
    found = {f.rule: f for f in pk.advise(pk.load(TRACE.parent))}
    said = _amount_ms(found["host_bound"].evidence, "gaps shorter than 1 ms between kernels")
    assert said == pytest.approx(short_ms, abs=0.05)
    assert "host_stalls" in found
    said = _amount_ms(found["host_stalls"].evidence, "idle periods of 1 ms or more inside the step")
    assert said == pytest.approx(long_ms, abs=0.005)
