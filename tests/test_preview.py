"""The steps read first (perfkit.io.preview), checked against the raw files read with the
csv and json modules, never against perfkit's own loader."""

from __future__ import annotations

import csv
import gzip
import json
import os
import statistics
from pathlib import Path

import pytest
from shared_samples import HTA, PT_LEVEL1, shared_sample

from perfkit.io import preview as P
from perfkit.io.preview import kineto_step_spans, preview


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*")}


def _csv_steps(rank_dir: Path) -> dict[int, float]:
    """Step -> computing + exposed communication + free, from step_trace_time.csv."""
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return {int(r["Step"]): float(r["Computing"]) + float(r["Communication(Not Overlapped)"])
                + float(r["Free"]) for r in csv.DictReader(fh)}


def _json_spans(path: Path) -> dict[int, float]:
    """Step -> duration of the host ProfilerStep#N events, from the whole trace."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    events = data["traceEvents"] if isinstance(data, dict) else data
    out: dict[int, float] = {}
    for e in events:
        name = e.get("name", "")
        if name.startswith("ProfilerStep#") and e.get("ph") == "X" and \
                e.get("cat") not in ("gpu_user_annotation", "kernel"):
            out.setdefault(int(name.split("#")[1]), float(e["dur"]))
    return out


@pytest.mark.shared_samples
def test_ascend_steps_are_the_step_trace_rows() -> None:
    folder = shared_sample(PT_LEVEL1)
    before = _snapshot(folder)
    got = preview(folder)
    assert got.steps_from == "step_trace_time.csv"
    steps = got.profile.steps
    for rank_dir in sorted(folder.glob("rank*_ascend_pt")):
        rank = int(rank_dir.name[4:rank_dir.name.index("_")])
        expected = _csv_steps(rank_dir)
        mine = steps[steps["rank"] == rank]
        assert sorted(mine["step"].astype(int)) == sorted(expected)
        for row in mine.itertuples():
            total = row.computing_us + row.comm_not_overlapped_us + row.free_us
            assert total == pytest.approx(expected[int(row.step)], rel=1e-9)
    assert got.input_bytes == sum(
        f.stat().st_size for r in folder.glob("rank*_ascend_pt")
        for f in [*r.glob("ASCEND_PROFILER_OUTPUT/*"), *r.glob("profiler_info*.json"),
                  *r.glob("profiler_metadata.json")] if f.is_file())
    assert _snapshot(folder) == before  # nothing written in the user's folder


@pytest.mark.shared_samples
def test_kineto_steps_are_the_profiler_step_events() -> None:
    folder = shared_sample(HTA)
    for trace in sorted(folder.glob("*.json.gz")):
        expected = _json_spans(trace)
        spans = kineto_step_spans(trace)
        assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected
    got = preview(folder)
    assert got.steps_from == "the ProfilerStep spans"
    # what the Overview shows first: the median over steps of the slowest rank's span
    per_step: dict[int, float] = {}
    for trace in folder.glob("*.json.gz"):
        for step, dur in _json_spans(trace).items():
            per_step[step] = max(per_step.get(step, 0.0), dur)
    from perfkit import analysis as A

    measured = A.measured_step_s(A.step_breakdown(got.profile))
    assert measured == pytest.approx(statistics.median(per_step.values()) / 1e6, rel=1e-9)


def _event(name: str, ts: float, dur: float, cat: str = "user_annotation",
           args_first: bool = False) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
    if args_first:
        event = {"args": {"note": "{braces} in a string", "External id": 3}, **event}
    return event


def test_the_byte_scan_keeps_host_steps_only(tmp_path: Path, monkeypatch) -> None:
    filler = [_event("aten::mm", 10.0 * i, 5.0, cat="cpu_op") for i in range(3000)]
    steps = [_event("ProfilerStep#7", 100.0, 40.0, args_first=True),
             _event("ProfilerStep#7", 101.0, 30.0, cat="gpu_user_annotation"),
             _event("ProfilerStep#8", 200.0, 55.5),
             {"ph": "i", "name": "marker", "args": {"label": "ProfilerStep#9"}, "ts": 1},
             _event("ProfilerStep#10", 300.0, 61.25)]
    events = filler[:1000] + steps[:2] + filler[1000:2000] + steps[2:] + filler[2000:]
    plain = tmp_path / "trace.json"
    plain.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    expected = {7: 40.0, 8: 55.5, 10: 61.25}
    assert _json_spans(plain) == expected  # the independent reading agrees on the input
    for path in (plain, packed):
        spans = kineto_step_spans(path)
        assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected
    # a compressed file read in chunks smaller than the file: no hit lost or read twice
    monkeypatch.setattr(P, "_CHUNK", 4096)
    monkeypatch.setattr(P, "_CONTEXT", 1024)
    spans = kineto_step_spans(packed)
    assert dict(zip(spans["step"], spans["dur_us"], strict=True)) == expected


def test_a_trace_without_steps_has_no_preview_and_says_why(tmp_path: Path) -> None:
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps({"traceEvents": [_event("aten::mm", 1.0, 2.0, "cpu_op")]}))
    got = preview(trace)
    assert got.profile is None and got.input_bytes == os.path.getsize(trace)
    assert "no ProfilerStep#N event" in got.notes[0]
    assert P.describe(got) == "no quick step reading for this format"


@pytest.mark.shared_samples
def test_msprof_analyze_output_gives_the_rank_rows() -> None:
    folder = shared_sample("ascend/msinsight-cluster-output") / "cluster_analysis_output"
    with (folder / "cluster_step_trace_time.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Type"].strip().lower() == "rank"]
    got = preview(folder)
    steps = got.profile.steps
    assert len(steps) == len(rows)
    assert sorted(steps["rank"].astype(int)) == sorted(int(r["Index"]) for r in rows)
    assert steps["computing_us"].sum() == pytest.approx(
        sum(float(r["Computing"]) for r in rows), rel=1e-9)


def test_a_missing_path_is_a_profile_error(tmp_path: Path) -> None:
    from perfkit.errors import ProfileError

    with pytest.raises(ProfileError, match="does not exist"):
        preview(tmp_path / "nowhere")
