"""pk.export_trace: a Chrome trace (Trace Event Format) of one step that Perfetto can open.

The expected events are counted here from the canonical tables: every kernel (and host
operator) that overlaps a rank's window, the window being the first start to the last end
of the step's kernels. Perfetto's own trace_processor is not used: the ``perfetto`` wheel
downloads its binary at run time, which this offline machine cannot do; the checks below
are the format's rules instead (JSON object form, complete events with µs ``ts``/``dur``,
metadata names, and slices of one thread that nest, which Perfetto needs to show them all).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shared_samples import PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.export import WAIT_NAME, TraceExportError, chrome_trace

ROOT = Path(__file__).resolve().parents[1]
SLOW_RANK = ROOT / "data" / "simulated" / "slow-rank"
TUNED = ROOT / "data" / "simulated" / "llama2-13b-tuned-dp8-pp2"
KINETO = ROOT / "data" / "kineto-tiny-llama"


@pytest.fixture(scope="module")
def slow() -> Any:
    return pk.load(SLOW_RANK, cache=False, progress=False)


@pytest.fixture(scope="module")
def real() -> Any:
    """The real torch_npu sample (shared/samples): host operators and kernels as recorded."""
    return pk.load(shared_sample(PT_LEVEL1), cache=False, progress=False)


def _strict_json(path: Path) -> dict[str, Any]:
    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8"), parse_constant=no_constant)


def _overlapping(frame: pd.DataFrame, rank: int, ws: float, we: float) -> pd.DataFrame:
    f = frame[frame["rank"] == rank].dropna(subset=["start_us", "dur_us"])
    end = f["start_us"] + f["dur_us"]
    return f[((end > ws) & (f["start_us"] < we)).to_numpy(bool)]


def _window(kernels: pd.DataFrame, rank: int, step: int) -> tuple[float, float]:
    k = kernels[(kernels["rank"] == rank) & (kernels["step"] == step)]
    return float(k["start_us"].min()), float((k["start_us"] + k["dur_us"]).max())


def _wait(steps: pd.DataFrame, rank: int, step: int) -> float:
    """The device's wait before the step's first task, the step table's Preparing, where
    it is at least 1 % of the step (Computing + Communication(Not Overlapped) + Free +
    Preparing); 0 otherwise (the timeline and the export leave it out)."""
    row = steps[(steps["rank"] == rank) & (steps["step"] == step)]
    if not len(row):
        return 0.0
    r = row.iloc[0]
    wait = 0.0 if pd.isna(r["preparing_us"]) else float(r["preparing_us"])
    wall = float(r["computing_us"] + r["comm_not_overlapped_us"] + r["free_us"]) + wait
    return wait if wait >= 0.01 * wall else 0.0


def _check_format(trace: dict[str, Any]) -> None:
    """The rules of the Trace Event Format that Perfetto's JSON importer relies on."""
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M"
             and e["name"] == "thread_name"}
    procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    slices: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in events:
        assert e["ph"] in ("X", "M")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert isinstance(e["args"]["name" if "name" in e["name"] else "sort_index"],
                              (str, int))
            continue
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert (e["pid"], e["tid"]) in names and e["pid"] in procs
        slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for track in slices.values():
        assert track == sorted(track, key=lambda t: (t[0], -(t[1] - t[0])))
        stack: list[float] = []
        for s, e in track:  # every slice nests in the open one or starts after it
            while stack and stack[-1] <= s + 1e-9:
                stack.pop()
            assert not stack or e <= stack[-1] + 1e-9, (s, e, stack[-1])
            stack.append(e)


def test_the_file_holds_exactly_the_steps_events(slow, tmp_path):
    out = pk.export_trace(slow, step=2, ranks=[0, 2], path=tmp_path / "t.json", host=False)
    assert out == (tmp_path / "t.json").resolve()
    trace = _strict_json(out)
    _check_format(trace)
    x = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    windows = {r: _window(slow.kernels, r, 2) for r in (0, 2)}
    expected = pd.concat([_overlapping(slow.kernels, r, *w) for r, w in windows.items()])
    assert len(x) == len(expected)
    for r in (0, 2):
        mine = [e for e in x if e["pid"] == r]
        theirs = expected[expected["rank"] == r]
        assert len(mine) == len(theirs)
        assert sum(e["dur"] for e in mine) == pytest.approx(theirs["dur_us"].sum(),
                                                            abs=1e-3 * len(mine))
        assert sorted(e["name"] for e in mine) == sorted(theirs["name"])
    # the step marker spans each rank's window; times count from the earliest start (a
    # Preparing of 0.1 % of the step is no wait worth marking)
    assert all(_wait(slow.steps, r, 2) == 0 for r in (0, 2))
    origin = min(w[0] for w in windows.values())
    marks = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    assert [e["name"] for e in marks] == ["step 2", "step 2"]
    steps = {e["pid"]: e for e in marks}
    for r, (ws, we) in windows.items():
        assert steps[r]["ts"] == pytest.approx(ws - origin, abs=1e-3)
        assert steps[r]["dur"] == pytest.approx(we - ws, abs=1e-3)
    # one kernel, followed from the table to the file
    k = expected.sort_values("dur_us").iloc[-1]
    e = next(e for e in x if e["pid"] == k["rank"] and e["name"] == k["name"]
             and e["dur"] == pytest.approx(k["dur_us"], abs=1e-3))
    assert e["ts"] == pytest.approx(k["start_us"] - origin, abs=1e-3)
    assert e["cat"] == k["category"]
    meta = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {(0, "rank 0"), (2, "rank 2"), (0, "stream 2"), (2, "no stream (HCCL)"),
            (0, "step 2")} <= meta
    assert trace["otherData"]["step"] == 2 and trace["otherData"]["ranks"] == [0, 2]


def test_host_operators_are_exported_nested_and_nothing_is_negative(real, tmp_path):
    out = pk.export_trace(real, path=tmp_path / "real.json.gz")
    trace = _strict_json(out)
    _check_format(trace)
    other = trace["otherData"]
    step, ranks = other["step"], other["ranks"]
    x = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    n_expected = 0
    for r in ranks:
        ws, we = _window(real.kernels, r, step)
        n_expected += len(_overlapping(real.kernels, r, ws, we))
        n_expected += len(_overlapping(real.ops, r, ws, we))
    assert len(x) == n_expected
    # host ops began before the device window and the wait before it (Preparing, 12 % of
    # the step, marked before it): the offset keeps every ts >= 0, the earliest at 0
    waits = [e for e in trace["traceEvents"] if e.get("name") == WAIT_NAME]
    assert len(waits) == len(ranks) and all(e["dur"] > 10e3 for e in waits)
    first_op = min(float(real.ops.loc[real.ops["rank"] == r, "start_us"].min())
                   for r in ranks)
    origin = min(_window(real.kernels, r, step)[0] - _wait(real.steps, r, step)
                 for r in ranks)
    assert other["ts_offset_us"] == pytest.approx(max(0.0, origin - first_op), abs=1e-3)
    every = [e for e in trace["traceEvents"] if e["ph"] == "X"]  # the markers too
    assert min(e["ts"] for e in every) == pytest.approx(0.0, abs=1e-3)


def test_cpu_only_trace(tmp_path):
    p = pk.load(KINETO, cache=False, progress=False)
    trace = chrome_trace(p, step=3, ranks=[0, 1])
    _check_format(trace)
    x = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    steps = p.steps.set_index(["rank", "step"])
    for r in (0, 1):
        ws = float(steps.loc[(r, 3), "step_start_us"])
        we = ws + float(steps.loc[(r, 3), "total_us"])
        assert len([e for e in x if e["pid"] == r]) == len(_overlapping(p.ops, r, ws, we))
    assert {e["cat"] for e in x} <= {"host", "communication"}


def test_never_writes_into_the_profile_folder_nor_over_a_file(tmp_path):
    folder = tmp_path / "job"
    shutil.copytree(SLOW_RANK, folder)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    p = pk.load(folder, cache=False, progress=False)
    for inside in (folder / "t.json", folder / next(folder.iterdir()).name / "t.json"):
        with pytest.raises(TraceExportError, match="inside the profile's folder"):
            pk.export_trace(p, path=inside)
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    target = tmp_path / "out.json"
    target.write_text("mine")
    with pytest.raises(TraceExportError, match="exists; pass overwrite=True"):
        pk.export_trace(p, path=target)
    assert target.read_text() == "mine"
    pk.export_trace(p, path=target, overwrite=True)
    _check_format(_strict_json(target))
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".perfkit-")]
    with pytest.raises(TraceExportError, match="give the file to write"):
        pk.export_trace(p, path=None)
    with pytest.raises(TraceExportError, match="does not exist"):
        pk.export_trace(p, path=tmp_path / "missing" / "t.json")
    with pytest.raises(TraceExportError, match="is a folder"):
        pk.export_trace(p, path=tmp_path)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_overlapping_device_tasks_go_to_their_own_thread():
    """Concurrent collectives of one lane never cross in a thread: an extra lane."""
    tuned = pk.load(TUNED, cache=False, progress=False)
    trace = chrome_trace(tuned, ranks=[0], host=False)
    _check_format(trace)
    threads = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    k = tuned.kernels[tuned.kernels["rank"] == 0]
    ws, we = _window(tuned.kernels, 0, trace["otherData"]["step"])
    c = _overlapping(k[k["stream"].isna()], 0, ws, we).sort_values("start_us")
    ends = np.maximum.accumulate((c["start_us"] + c["dur_us"]).to_numpy())
    crossing = (c["start_us"].to_numpy()[1:] < ends[:-1]).any()
    assert crossing  # a pipeline stage sends and receives at the same time
    assert "no stream (HCCL) · 2" in threads
