"""Real Ascend / MindSpore profiles of other projects, checked against the raw files.

Every figure is counted here from the files with ``json`` / ``csv`` (an independent
reading) and compared with perfkit's tables within 1 %:

- ``wild/mi_prof``: raw CANN ``PROF_*`` output (two devices, CANN 6-era exported timeline
  of a MindSpore AlexNet run, from mindspore-ai/mindinsight's test resources);
- ``wild/mi_run1``: legacy MindInsight output with ``timeline_display_1.json`` (no
  ``ascend_`` prefix);
- ``wild/msa_kernel_details``: a lone torch_npu ``kernel_details.csv`` (2023 header);

and the project's own MindSpore CPU recordings (``data/mindspore-cpu-tiny-llama``, and
``tests/data/mindspore_cpu_recompute``, whose first layer is recomputed).
"""

from __future__ import annotations

import collections
import csv
import json
import os
import re
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
import raw_mindspore

import perfkit as pk
import perfkit.analysis as A
from perfkit.errors import ProfileError
from perfkit.io.cann import raw as cann_raw
from perfkit.io.engines import local as detect

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
pytestmark = pytest.mark.shared_samples


def _shared() -> Path:
    """``shared/samples`` beside the checkout (or ``$PERFKIT_SHARED_SAMPLES``).

    Skips when absent (a lone clone); under CI (``$CI`` set) the folder must be there.
    """
    env = os.environ.get("PERFKIT_SHARED_SAMPLES")
    root = Path(env) if env else ROOT.parent / "shared" / "samples"
    if not root.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"{root} is missing: the real profiles of other projects")
        pytest.skip(f"{root} is missing: the real profiles of other projects")
    return root


#: Where the project's own MindSpore CPU recordings may live (the plain one is also the
#: bundled sample ``data/mindspore-cpu-tiny-llama``).
_CPU_PLACES = {
    "mindspore_cpu": (DATA / "mindspore_cpu", ROOT / "data" / "mindspore-cpu-tiny-llama"),
    "mindspore_cpu_recompute": (DATA / "mindspore_cpu_recompute",)}


def _cpu_fixture(name: str) -> Path:
    """A MindSpore CPU recording of this project (tests/data, or data/ once bundled)."""
    for place in _CPU_PLACES[name]:
        if place.is_dir():
            return place
    pytest.fail(f"{name}: none of {_CPU_PLACES[name]} exists")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def _close(a: float, b: float, rel: float = 0.01) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


# ----------------------------------------------------------------------------- raw CANN

def _events(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def _device_reading(device: Path) -> dict:
    """Count the device's timeline files with json (no perfkit code)."""
    tl = device / "timeline"
    info = json.loads(next(device.glob("info.json.[0-9]*")).read_text())
    tasks = [e for f in sorted(tl.glob("task_time_*.json")) for e in _events(f)
             if e.get("ph") == "X"]
    hccl = [e for f in sorted(tl.glob("hccl_*.json")) for e in _events(f)
            if e.get("ph") == "X"]
    whole = [e for e in hccl if "task type" not in (e.get("args") or {})]
    plane = [e for e in hccl if "task type" in (e.get("args") or {})]
    iters = {}
    for f in sorted(tl.glob("step_trace_*.json")):
        for e in _events(f):
            if e.get("cat") == "Iteration Time":
                iters[e["args"]["Iteration ID"]] = e
    # Data_aug Bound N (a flow end, "t", named by its iteration): the wait before iteration N
    bounds = {int(e["name"].rsplit(" ", 1)[1]): e["args"]["Data_aug Bound(us)"]
              for f in sorted(tl.glob("step_trace_*.json")) for e in _events(f)
              if e.get("cat") == "Data_aug Bound" and e.get("ph") == "t"}
    computing = collections.defaultdict(float)
    exposed = collections.defaultdict(float)
    free = collections.defaultdict(float)
    for f in sorted(tl.glob("msprof_*.json")):
        it = int(re.search(r"_(\d+)\.json$", f.name).group(1))
        ev = _events(f)
        pid = {e["pid"] for e in ev if e.get("name") == "process_name"
               and e["args"]["name"] == "Overlap Analysis"}
        computing[it] += sum(e["dur"] for e in ev if e.get("ph") == "X"
                             and e["pid"] in pid and e["name"] == "Computing")
        exposed[it] += sum(e["dur"] for e in ev if e.get("ph") == "X" and e["pid"] in pid
                           and e["name"] == "Communication(Not Overlapped)")
        free[it] += sum(e["dur"] for e in ev if e.get("ph") == "X"
                        and e["pid"] in pid and e["name"] == "Free")
    moved = [e for e in plane if e["name"] in ("Memcpy", "Reduce_Inline")
             and e["args"]["transport type"] == "SDMA"
             and e["args"]["link type"] != "ON_CHIP"
             and e["args"]["src rank"] != e["args"]["dst rank"]]
    start = json.loads(next(device.glob("start_info.[0-9]")).read_text())
    return {"rank": info["rank_id"], "tasks": tasks, "whole": whole, "iters": iters,
            "computing": computing, "exposed": exposed, "free": free, "bounds": bounds,
            "moved": moved,
            "task_types": collections.Counter(e["args"]["Task Type"] for e in tasks),
            "begin_us": int(start["collectionTimeBegin"]),
            "mono_ns": int(start["clockMonotonicRaw"])}


@pytest.fixture(scope="module")
def mi_prof():
    root = _shared() / "wild" / "mi_prof"
    devices = sorted(root.glob("PROF_*/device_*"))
    return root, {d: _device_reading(d) for d in devices}


def test_prof_folder_loads_every_device_against_the_raw_timeline(mi_prof):
    root, readings = mi_prof
    c = pk.load(root, cache=False, progress=False)
    assert c.meta.source_format == "cann_raw" and c.meta.device_type == "npu"
    assert sorted(c.ranks) == sorted(r["rank"] for r in readings.values()) == [0, 1]
    for r in readings.values():
        p = c[r["rank"]]
        k = p.kernels
        assert _close(len(k), len(r["tasks"]))
        assert _close(float(k["dur_us"].sum()), sum(e["dur"] for e in r["tasks"]))
        assert dict(k["core"].value_counts()) == dict(r["task_types"])
        assert k["step"].notna().all()  # every task inside an iteration
        assert _close(len(p.steps), len(r["iters"]))
        steps = p.steps.set_index("step")
        for it, e in r["iters"].items():
            # the wait before the iteration (Data_aug Bound) is the device's wait before the
            # step's first task, preparing_us; the iteration's own span is the rest
            wait = r["bounds"].get(it, 0.0)
            assert _close(steps["total_us"][it], e["dur"])
            assert _close(steps["preparing_us"][it], wait)
            # the Free track, and the idle time at the iteration's ends outside the tracks
            idle = e["dur"] - r["computing"][it] - r["exposed"][it] - r["free"][it]
            assert _close(steps["free_us"][it], r["free"][it] + idle)
            assert _close(steps["computing_us"][it], r["computing"][it])
        assert _close(len(p.comm_ops), len(r["whole"]))
        assert _close(float(p.comm_ops["elapse_us"].sum()), sum(e["dur"] for e in r["whole"]))
        assert set(p.comm_ops["op_type"]) == {"AllReduce"}
        bw = p.comm_bandwidth
        sdma = bw[bw["transport"] == "SDMA"]
        assert _close(float(sdma["size_bytes"].sum()),
                      sum(e["args"]["size(Byte)"] for e in r["moved"]))
        assert _close(float(sdma["transit_us"].sum()), sum(e["dur"] for e in r["moved"]))
        links = {e["args"]["link type"] for e in r["moved"]}
        assert set(bw["transport"]) == links | {"SDMA"}  # HCCS and PCIE here
        # HCCL streams carry communication tasks, never compute
        assert (k.loc[k["core"].isin(["NOTIFY_WAIT", "REDUCE_ASYNC_V2"]), "category"]
                == "communication").all()
        assert p.meta.framework == "mindspore"
        assert p.meta.extra["devices"] == ["Ascend910"]
    # the files not read are said to repeat those read (the counts above come from all)
    files = list(next(iter(readings)).glob("timeline/*.json"))
    note = next(n for n in c.meta.notes if "timeline files read" in n)
    read = int(re.search(r"(\d+) of (\d+) timeline files read", note).group(1))
    assert f"of {len(files)} timeline files read; the other {len(files) - read} hold" in note


def test_data_wait_between_iterations_is_part_of_the_step(mi_prof):
    """msprof's Iteration Time starts after the wait for data (Data_aug Bound): the job steps
    at the pace of both, so the step counts the wait and the stall is a share of it."""
    root, readings = mi_prof
    c = pk.load(root, cache=False, progress=False)
    for r in readings.values():
        iters = sorted(r["iters"].items())
        waits = []
        for (_, prev), (it, e) in zip(iters, iters[1:], strict=False):
            gap = e["ts"] - (prev["ts"] + prev["dur"])  # the raw timeline's idle time
            assert abs(gap - r["bounds"][it]) < 10.0  # the bound is that gap (to FP start)
            waits.append(r["bounds"][it])
        s = pk.analysis.step_breakdown(c[r["rank"]]).set_index("step")
        parts = s["computing_share"] + s["comm_not_overlapped_share"] + s["free_share"]
        assert ((parts - 1.0).abs() < 1e-6).all()
        dl = pk.analysis.data_loading(c[r["rank"]]).set_index("step")
        for (it, e), wait in zip(iters[1:], waits, strict=True):
            assert _close(dl["stall_share"][it], wait / (e["dur"] + wait))
        assert (dl["stall_share"] < 1.0).all()  # a share of the step, never clipped at 100 %
    finding = next(f for f in pk.advise(c) if f.rule == "data_loading")
    step = pk.analysis.step_breakdown(c).groupby("step")["step_us"].max().mean() / 1e3
    assert finding.ms_per_step < step  # the wait is part of the step it is a share of


def test_the_steps_of_a_prof_folder_cover_its_iterations(mi_prof):
    """The Overlap Analysis tracks of an iteration run from its first task to its last,
    a few µs inside its Iteration Time (rank 0, iteration 2: tracks 15,345.79 µs of
    15,369.16; the device idles 10.24 µs before its first task and 13.13 µs after the
    last). Those µs were in no part of the step: the steps' walls fell short of the
    timeline by 18-26 µs an iteration (rank 0: 216.38 µs of 358,131.65, rank 1: 237.94 of
    368,031.32). They are free time now, so the walls (the wait for data and the iteration)
    add up to the time from the first iteration's start to the last one's end, read here
    from the step trace."""
    root, _ = mi_prof
    raw = raw_mindspore.mi_prof(root)
    c = pk.load(root, cache=False, progress=False)
    for rank, r in raw.items():
        mine = A.step_breakdown(c[rank]).set_index("step")
        for it, e in r["iters"].items():
            t = r["tracks"][it]
            inside = t["Computing"] + t["Communication(Not Overlapped)"] + t["Free"]
            assert e["dur"] - inside > 18.0, (rank, it)  # the tracks leave µs out
            assert mine["free_us"][it] == pytest.approx(t["Free"] + e["dur"] - inside)
        iters = [r["iters"][i] for i in sorted(r["iters"])]
        span = iters[-1]["ts"] + iters[-1]["dur"] - iters[0]["ts"]
        assert A.step_wall_us(mine).sum() == pytest.approx(span, abs=0.01), rank


def test_prof_ranks_are_aligned_on_the_epoch(mi_prof):
    """start_info ties each device's monotonic clock to the epoch: the ranks' first
    iterations start where the raw clocks say, relative to each other."""
    root, readings = mi_prof
    c = pk.load(root, cache=False, progress=False)
    epoch = {}  # exact integers: epoch nanoseconds do not fit a float
    for r in readings.values():
        ts_ns = int(Decimal(repr(r["iters"][1]["ts"])) * 1000)
        epoch[r["rank"]] = ts_ns - r["mono_ns"] + r["begin_us"] * 1000
    s = c.steps  # on the cluster's clock (each rank's own table is on its own origin)
    seen = {rank: float(s[(s["rank"] == rank) & (s["step"] == 1)]["step_start_us"].iloc[0])
            for rank in c.ranks}
    for rank in c.ranks:  # the same instant on the rank's own clock
        own = c[rank]
        start = float(own.steps.set_index("step")["step_start_us"][1])
        assert own.meta.origin_ns - epoch[rank] + round(start * 1000) == 0
    assert seen[1] - seen[0] == pytest.approx((epoch[1] - epoch[0]) / 1000, abs=0.01)


def test_lone_msprof_file_is_a_cann_timeline_not_kineto(mi_prof):
    root, readings = mi_prof
    device = next(d for d, r in readings.items() if r["rank"] == 0)
    f = device / "timeline" / "msprof_0_2_1.json"
    kind, sources = detect.detect(f)
    assert [s.fmt for s in sources] == ["cann_raw"] and sources[0].rank == 0
    p = pk.load(f, cache=False)
    tasks = [e for e in _events(device / "timeline" / "task_time_0_2_1.json")
             if e.get("ph") == "X"]
    assert p.meta.source_format == "cann_raw"
    assert len(p.kernels) == len(tasks) > 0
    assert list(p.steps["step"]) == [1]
    assert any("read alone" in n for n in p.meta.notes)


def test_cann_timeline_sniffed_by_content(tmp_path):
    kineto = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel"}]}'
    cann = b'[{"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "Ascend Hardware"}}]'
    trace_view = b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm"}, ' \
                 b'{"name": "process_name", "args": {"name": "Ascend Hardware"}}]'
    assert not cann_raw.sniff_timeline(kineto)
    assert cann_raw.sniff_timeline(cann)
    assert not cann_raw.sniff_timeline(trace_view)  # torch_npu's, with host operators
    renamed = tmp_path / "run.json"  # a CANN timeline under any name
    renamed.write_bytes(cann[:-1] + b', {"ph": "X", "pid": 3, "tid": 2, "name": "MatMul", '
                        b'"ts": 10.0, "dur": 2.5, "args": {"Task Type": "AI_CORE", '
                        b'"Stream Id": 2, "Task Id": 1}}]')
    p = pk.load(renamed, cache=False)
    assert p.meta.source_format == "cann_raw"
    assert list(p.kernels["dur_us"]) == [2.5]


def test_unexported_prof_folder_is_refused_with_the_export_command(tmp_path):
    dev = tmp_path / "PROF_000001_20240101000000000_ABCDEFGHIJKLMNOP" / "device_0"
    (dev / "data").mkdir(parents=True)
    (dev / "data" / "ts_track.data.0.slice_0").write_bytes(b"\x01\x02\x03")
    (dev / "info.json.0").write_text('{"rank_id": 0}')
    with pytest.raises(ProfileError, match=r"msprof --export=on --output="):
        pk.load(dev.parent, cache=False)


def test_prof_folder_without_start_info_keeps_relative_times(mi_prof, tmp_path):
    root, readings = mi_prof
    device = next(d for d, r in readings.items() if r["rank"] == 0)
    copy = tmp_path / device.parent.name / device.name
    (copy / "timeline").mkdir(parents=True)
    for f in ("info.json.0",):
        shutil.copy(device / f, copy / f)
    for f in sorted((device / "timeline").glob("*_0_2_[12].json")):
        shutil.copy(f, copy / "timeline" / f.name)
    p = pk.load(copy.parent, cache=False)
    assert p.meta.origin_ns is None
    assert any("start_info" in n for n in p.meta.notes)
    assert float(p.kernels["start_us"].min()) >= 0
    assert len(p.steps) == 10  # every step_trace file holds all iterations
    assert p.steps["computing_us"].notna().sum() == 2  # Overlap Analysis of 2 msprof files


# ----------------------------------------------------------------------------- MindInsight

def test_legacy_timeline_display_without_prefix():
    folder = _shared() / "wild" / "mi_run1" / "profiler"
    events = json.loads((folder / "timeline_display_1.json").read_text())
    x = [e for e in events if e.get("ph") == "X"]
    device = [e for e in x if e["pid"] != 10000]
    comm = [e for e in x if e["pid"] == 10000]
    with open(folder / "step_trace_raw_1_detail_time.csv") as fh:
        trace = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()
                 and int(r["step_num"]) > 0]
    p = pk.load(folder.parent, cache=False)
    assert p.meta.rank == 1 and p.meta.source_format == "mindspore_legacy"
    k = p.kernels
    assert _close(len(k), len(x))
    assert _close(int((k["category"] == "compute").sum()), len(device))
    assert set(k.loc[k["category"] == "compute", "name"]) == {
        e["args"]["fullname"] for e in device}
    assert _close(len(p.comm_ops), len(comm))
    assert _close(float(p.comm_ops["elapse_us"].sum()), sum(e["dur"] for e in comm))
    assert _close(len(p.steps), len(trace))
    # steps aligned through min_cycle_counter: a task's step window holds its start
    zero = float((folder / "min_cycle_counter_1.txt").read_text().split()[0])
    win = {int(r["step_num"]): ((int(r["start_point"]) - zero) / 100,
                                (int(r["end_point"]) - zero) / 100) for r in trace}
    stepped = k.dropna(subset=["step"])
    assert len(stepped) > 0.9 * len(k)
    for step, start in zip(stepped["step"], stepped["start_us"], strict=True):
        lo, hi = win[int(step)]
        assert lo <= start < hi
    assert p.meta.origin_ns is None


def test_legacy_steps_say_which_device_tasks_were_recorded():
    """mi_run1's step trace has 322 steps, its timeline's device operators end inside step
    15: only steps 1-14 (their windows inside the operators' span, read with csv / json)
    are marked recorded; the others hold only pid 10000, the step trace's all-reduce
    phases (11 per step), which are communication of kind allreduce, not 'other'."""
    raw = raw_mindspore.mi_run1(_shared() / "wild" / "mi_run1")
    assert raw["recorded"] == list(range(1, 15)) and len(raw["windows"]) == 322
    p = pk.load(_shared() / "wild" / "mi_run1", cache=False, progress=False)
    steps = p.steps.set_index("step")
    assert sorted(steps.index[steps["tasks_recorded"].astype(bool)]) == raw["recorded"]
    assert any("device tasks recorded for steps 1–14 of 322" in n for n in p.meta.notes)
    # every step has its 11 phases; the unrecorded ones have nothing else
    per_step = collections.Counter(int(s) for s in p.kernels["step"].dropna())
    assert len(raw["phases"]) == 11 * 322
    phases = p.kernels[p.kernels["name"].str.match(r"^stream_\d+_parallel_\d+$")]
    assert len(phases) == len(raw["phases"])
    assert set(phases["category"]) == {"communication"} and set(phases["type"]) == {"AllReduce"}
    assert all(per_step[s] == 11 for s in range(16, 323))
    kinds = A.comm_summary(p)
    assert list(kinds["op_type"]) == ["allreduce"]
    assert int(kinds["count"].iloc[0]) == len(raw["phases"])
    assert _close(float(kinds["total_us"].iloc[0]), sum(e["dur"] for e in raw["phases"]))


def test_the_wait_for_data_is_the_wait_before_the_first_task(mi_prof):
    """Raw CANN: the Data_aug Bound before an iteration (read with json) is the step's
    preparing_us, the device's wait before its first task, as a Kineto or torch_npu step
    has it; the step's device span is the Iteration Time, split by the Overlap Analysis
    tracks; the step time (span and wait) is MindSpore's step."""
    root, _ = mi_prof
    raw = raw_mindspore.mi_prof(root)
    c = pk.load(root, cache=False, progress=False)
    s = A.step_breakdown(c)
    for rank, r in raw.items():
        mine = s[s["rank"] == rank].set_index("step")
        for it, e in r["iters"].items():
            wait = r["bounds"].get(it, 0.0)
            assert _close(mine["preparing_us"][it], wait), (rank, it)
            assert _close(mine["step_us"][it], e["dur"], rel=1e-9), (rank, it)
            assert _close(A.step_wall_us(mine.loc[[it]]).iloc[0], e["dur"] + wait)
        # the tasks of an iteration start after the wait: none inside it
        for it in sorted(r["iters"])[1:]:
            e = r["iters"][it]
            inside = [t for t in r["tasks"] if e["ts"] - r["bounds"][it] + 10 < t["ts"]
                      < e["ts"] - 10]
            assert not inside, (rank, it, inside[:1])


# ----------------------------------------------------------------------------- lone CSV

def test_lone_kernel_details_loads_as_one_rank():
    f = _shared() / "wild" / "msa_kernel_details" / "kernel_details.csv"
    with open(f) as fh:
        rows = list(csv.DictReader(fh))
    for path in (f, f.parent):
        p = pk.load(path, cache=False)
        assert p.meta.source_format == "ascend_text"
        assert _close(len(p.kernels), len(rows))
        assert _close(float(p.kernels["dur_us"].sum()),
                      sum(float(r["Duration(us)"]) for r in rows))
        hccl = sum(r["Accelerator Core"] == "HCCL" for r in rows)
        assert int((p.kernels["category"] == "communication").sum()) == hccl
        assert any("without its rank folder" in n for n in p.meta.notes)
        # the files record no rank: the only profile read is rank 0, and says so
        assert p.meta.rank == 0 and set(p.kernels["rank"]) == {0}
        assert any("0 assigned from its position" in n for n in p.meta.notes)
    ai = A.ai_cpu_operators(p)
    cpu_rows = [r for r in rows if r["Accelerator Core"] == "AI_CPU"]
    assert int(ai["count"].sum()) == len(cpu_rows)
    assert _close(float(ai["total_us"].sum()), sum(float(r["Duration(us)"]) for r in cpu_rows))


# ----------------------------------------------------------------------------- MindSpore CPU

def _launches(folder: Path) -> list[str]:
    """Names of every launch in cpu_op_execute_timestamp_*.txt (one per start,dur,x)."""
    f = next(folder.glob("*_ascend_ms/FRAMEWORK/cpu_op_execute_timestamp_*.txt"))
    out = []
    for line in f.read_text().splitlines():
        parts = line.split(";")
        if len(parts) >= 3:
            out += [parts[0]] * len(parts[2].split())
    return out


def test_mindspore_cpu_operators_with_self_time():
    folder = _cpu_fixture("mindspore_cpu")
    launches = _launches(folder)
    p = pk.load(folder, cache=False, progress=False)
    ops = p.ops
    assert len(ops) == len(launches)
    assert collections.Counter(ops["name"]) == collections.Counter(launches)
    # graph-mode CPU kernels do not nest on a thread: self time is the duration
    o = ops.sort_values(["thread", "start_us"])
    end = (o["start_us"] + o["dur_us"]).to_numpy()
    same = o["thread"].to_numpy()[1:] == o["thread"].to_numpy()[:-1]
    assert not (same & (o["start_us"].to_numpy()[1:] < end[:-1])).any()
    assert np.allclose(ops["self_us"], ops["dur_us"])


def test_recompute_seen_in_scope_names():
    folder = _cpu_fixture("mindspore_cpu_recompute")
    launches = _launches(folder)
    scoped = [n for n in launches if re.search(r"(^|/)recompute_", n)]
    forward = [n for n in scoped if not n.startswith("Gradients/")]
    layer = {int(m.group(1)) for n in scoped
             if (m := re.search(r"CellList/(\d+)-", n))}
    p = pk.load(folder, cache=False, progress=False)
    sc = A.recompute_scopes(p)
    assert len(sc) == 1
    r = sc.iloc[0]
    assert r["source"] == "ops"
    assert r["scoped_tasks"] == len(scoped) and r["forward_scoped_tasks"] == len(forward)
    assert r["scoped_layers"] == ",".join(map(str, sorted(layer))) == "0"
    assert r["layers"] == "0,1" and r["recompute"] == "partial"
    # the attention passes show the recompute too (3 forward over 2 backward chains a step);
    # the finding still times it by the scoped cells' own tasks, which measure it
    assert (A.recompute_evidence(p)["recompute"] == "partial").all()
    found = [f for f in pk.advise(p) if f.rule == "recompute"]
    assert found and "recompute_ scope" in found[0].evidence
    plain = A.recompute_scopes(pk.load(_cpu_fixture("mindspore_cpu"), cache=False,
                                       progress=False))
    assert plain.iloc[0]["recompute"] == "none"
    assert not [f for f in pk.advise(pk.load(_cpu_fixture("mindspore_cpu"), cache=False,
                                             progress=False)) if f.rule == "recompute"]


# ----------------------------------------------------------------------------- advice

_OFF_PLATFORM = re.compile(r"(?i)nvlink|cuda|nccl|infiniband|\bgpu\b|\bnan\b|over 0 step")


@pytest.mark.parametrize("where", ["wild/mi_prof", "wild/mi_run1", "wild/msa_kernel_details",
                                   "cpu:mindspore_cpu", "cpu:mindspore_cpu_recompute"])
def test_advice_fits_the_platform(where):
    path = _cpu_fixture(where[4:]) if where.startswith("cpu:") else _shared() / where
    p = pk.load(path, cache=False, progress=False)
    findings = pk.advise(p)
    for f in findings:
        text = " ".join((f.title, f.evidence, f.recommendation))
        assert not _OFF_PLATFORM.search(text), (f.rule, text)
    if p.meta.device_type == "cpu":  # one CPU rank: no communication to hide
        assert not [f for f in findings if f.area == "communication"]
    if where == "wild/mi_prof":
        exposed = [f for f in findings if f.rule == "exposed_communication"]
        assert exposed and "PCIE" not in exposed[0].evidence  # no PCIe-vs-HCCS nominal
