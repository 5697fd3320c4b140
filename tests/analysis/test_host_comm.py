"""Device gaps spent waiting for host-run collectives (gloo), and the finding that says so.

Expected figures are interval arithmetic done here: by hand on a made-up profile, and on
the raw Chrome-trace JSON of the H100 gloo DDP recording (tests/data/kineto_llama_h100),
read with the json module.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.profile import Profile, ProfileMeta

H100 = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_h100"


def _profile(kernels: list[tuple[int, float, float]],
             comm: list[tuple[str, float, float]]) -> Profile:
    k = pd.DataFrame(kernels, columns=["step", "start_us", "dur_us"]).assign(
        name="k", category="compute", stream=7, rank=0)
    c = pd.DataFrame(comm, columns=["family", "start_us", "elapse_us"]).assign(
        rank=0, step=1, name=lambda f: f["family"] + ":all_reduce")
    return Profile(ProfileMeta(source_format="test", rank=0, origin_ns=0),
                   {"kernels": k, "comm_ops": c})


def test_overlap_of_long_gaps_and_host_collectives_by_hand() -> None:
    # busy [0,10] [2000,2010] [2500,2510] [5000,5010]: long gaps (>= 1 ms) [10,2000] and
    # [2510,5000] (1990 + 2490 µs); the 490 µs gap [2010,2500] is short
    # gloo [500,1500] and [3000,6000] cover 1000 + 2000 µs of them; the nccl event (it
    # only launches device work) counts for nothing
    p = _profile([(1, 0, 10), (1, 2000, 10), (1, 2500, 10), (1, 5000, 10)],
                 [("gloo", 500, 1000), ("gloo", 3000, 3000), ("nccl", 10, 1990)])
    got = pk.analysis.host_collective_waits(p)
    assert len(got) == 1
    assert got["long_gap_us"].iloc[0] == pytest.approx(1990 + 2490)
    assert got["host_comm_us"].iloc[0] == pytest.approx(1000 + 2000)
    assert got["collectives"].iloc[0] == "gloo:all_reduce"
    # overlapping collectives (two threads) are counted once
    p = _profile([(1, 0, 10), (1, 3000, 10)], [("gloo", 100, 1000), ("gloo", 600, 1000)])
    assert pk.analysis.host_collective_waits(p)["host_comm_us"].iloc[0] == pytest.approx(1500)


def test_no_host_collective_or_no_device_task_gives_an_empty_frame_with_the_reason() -> None:
    nccl_only = _profile([(1, 0, 10), (1, 3000, 10)], [("nccl", 100, 1000)])
    got = pk.analysis.host_collective_waits(nccl_only)
    assert got.empty and "host" in got.attrs["notes"][-1]
    cpu = pk.load("sample:kineto-tiny-llama", progress=False)  # gloo, but no device
    got = pk.analysis.host_collective_waits(cpu)
    assert got.empty and "device tasks" in got.attrs["notes"][-1]


def _raw_share(path: Path) -> tuple[float, float]:
    """(long gaps in µs, their part covered by gloo events) over the whole raw trace."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    device = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                    if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    gloo = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if str(e.get("name", "")).startswith("gloo:") and e.get("ph") == "X")
    busy: list[list[float]] = []
    for s, e in device:
        if busy and s <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], e)
        else:
            busy.append([s, e])
    gaps = [(a[1], b[0]) for a, b in zip(busy, busy[1:], strict=False)
            if b[0] - a[1] >= 1000]
    total = sum(b - a for a, b in gaps)
    covered = 0.0
    for a, b in gaps:  # the union of the gloo events inside [a, b]
        pieces = sorted((max(a, s), min(b, e)) for s, e in gloo if s < b and e > a)
        end = a
        for s, e in pieces:
            covered += max(0.0, e - max(s, end))
            end = max(end, e)
    return total, covered


def test_the_h100_gloo_run_waits_for_its_all_reduce_as_the_raw_trace_says() -> None:
    total, covered = _raw_share(H100 / "rank0.pt.trace.json.gz")
    assert covered / total > 0.9  # the raw file: the device waits for gloo
    prof = pk.load(H100, progress=False)
    got = pk.analysis.host_collective_waits(prof)
    mine = got[got["rank"] == 0]
    # the two profiled steps hold every long gap of the trace (the steps follow each
    # other); the raw timestamps are absolute µs, hence the float tolerance
    assert mine["long_gap_us"].sum() == pytest.approx(total, abs=0.05)
    assert mine["host_comm_us"].sum() == pytest.approx(covered, abs=0.05)
    job = pk.infer_job(prof)
    first = pk.advise(prof, model=job.model, parallel=job.parallel,
                      hardware=job.hardware)[0]
    assert first.title == "The device waits while the host runs the collectives (gloo)"
    assert first.area == "communication"  # the Evidence button opens Communication
    assert "gloo:all_reduce" in first.evidence and "NCCL backend" in first.recommendation
    share = got["host_comm_us"].sum() / got["long_gap_us"].sum()
    assert f"{100 * share:.1f} %" in first.evidence
