"""Ascend text export: numbers checked against the real sample files with the csv/json modules."""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, TRACE_VIEW_EXCERPT, sample

import perfkit.io.engines.local as detect
from perfkit.io.ascend import text as ascend
from perfkit.profile import Profile

pytestmark = pytest.mark.shared_samples  # every test reads a real export
LEVEL1 = sample(PT_LEVEL1)
OLD0 = sample(PT_GPT3_OLD) / "test_rank_0"
RANK0 = LEVEL1 / "rank0_ascend_pt"
OUT0 = RANK0 / "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def rank0() -> Profile:
    meta, tables = ascend.parse(RANK0)
    return Profile(meta, tables)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _us_ns(text: str) -> int:
    return int(Decimal(text.strip()) * 1000)


def test_meta(rank0):
    m = rank0.meta
    assert m.source_format == "ascend_text"
    assert m.framework == "pytorch"
    assert m.rank == 0
    assert m.profiler_level == "Level1"
    assert m.device_type == "npu"
    assert any("comm_matrix" in n and "local" in n for n in m.notes)


def test_origin_is_earliest_timestamp(rank0):
    stamps = [_us_ns(r["Start Time(us)"]) for r in _rows(OUT0 / "kernel_details.csv")]
    stamps += [_us_ns(r["Timestamp(us)"]) for r in _rows(OUT0 / "memory_record.csv")]
    stamps += [_us_ns(r["Timestamp(us)"]) for r in _rows(OUT0 / "npu_module_mem.csv")]
    trace = json.loads((OUT0 / "trace_view.json").read_text())
    stamps += [_us_ns(e["ts"]) for e in trace if e.get("ph") == "X"]
    assert rank0.meta.origin_ns == min(stamps)


def test_kernels_match_csv(rank0):
    rows = _rows(OUT0 / "kernel_details.csv")
    k = rank0.kernels
    assert len(k) == len(rows)
    assert k["dur_us"].sum() == pytest.approx(sum(float(r["Duration(us)"]) for r in rows))
    assert k["wait_us"].sum() == pytest.approx(sum(float(r["Wait Time(us)"]) for r in rows))
    # start times exact to the nanosecond after the trailing TAB is stripped
    origin = rank0.meta.origin_ns
    expect = [(_us_ns(r["Start Time(us)"]) - origin) / 1000 for r in rows]
    np.testing.assert_allclose(k["start_us"].to_numpy(), expect, rtol=0, atol=1e-6)
    hccl = sum(r["Accelerator Core"] == "HCCL" for r in rows)
    assert (k["category"] == "communication").sum() == hccl
    assert k["step"].dropna().unique().tolist() == [50]
    first = rows[0]
    assert k["input_shapes"].iloc[0] == first["Input Shapes"].strip('"')
    assert k["core"].iloc[0] == first["Accelerator Core"]
    assert "aic_mac_time_us" in k and "cube_utilization_pct" in k
    # N/A stream ids of HCCL rows stay missing, not zero
    na_streams = sum(r["Stream ID"] in ("N/A", "") for r in rows)
    assert k["stream"].isna().sum() == na_streams


def test_steps_match_csv(rank0):
    (row,) = _rows(OUT0 / "step_trace_time.csv")
    s = rank0.steps.iloc[0]
    assert s["step"] == int(row["Step"])
    assert s["computing_us"] == pytest.approx(float(row["Computing"]))
    assert s["comm_not_overlapped_us"] == pytest.approx(
        float(row["Communication(Not Overlapped)"]))
    assert s["free_us"] == pytest.approx(float(row["Free"]))
    assert s["preparing_us"] == pytest.approx(float(row["Preparing"]))
    assert s["bubble_us"] == 0.0


def test_communication_match_json(rank0):
    data = json.loads((OUT0 / "communication.json").read_text())
    ops = {k: v for k, v in data["step50"]["collective"].items() if k != "Total Op Info"}
    c = rank0.comm_ops
    assert len(c) == len(ops)
    total = sum(v["Communication Time Info"]["Elapse Time(ms)"] for v in ops.values())
    assert c["elapse_us"].sum() == pytest.approx(total * 1000)
    assert set(c["group"]) == {k.split("@")[1] for k in ops}
    bw = rank0.comm_bandwidth
    hccs = sum(v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"]
               for v in ops.values())
    assert bw.loc[bw["transport"] == "HCCS", "size_bytes"].sum() == pytest.approx(hccs * 1e6)


def test_matrix_ranks_left_na_without_groups(rank0):
    mx = rank0.comm_matrix
    assert len(mx) > 0
    assert mx["src_rank"].isna().all() and mx["dst_rank"].isna().all()
    assert set(mx["src_local"].dropna().astype(int)) <= set(range(8))


@pytest.mark.parametrize("rank", [0, 1])
def test_the_matrix_total_op_info_is_not_an_operation(rank):
    # the older export (gpt3-old) sums every link of a step under "Total Op Info"; read as
    # one more operation, every link was listed twice in the Communication tab
    path = sample(PT_GPT3_OLD) / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT"
    data = json.loads((path / "communication_matrix.json").read_text())
    links = [(kind, key, link, v) for step in data.values() for kind, ops in step.items()
             for key, op in ops.items() for link, v in op.items()]
    assert any(key == "Total Op Info" for _, key, _, _ in links)
    ops = [x for x in links if x[1] != "Total Op Info"]
    meta, tables = ascend.parse(path.parent)
    mx = tables["comm_matrix"]
    assert "Total Op Info" not in set(mx["name"])
    assert len(mx) == len(ops)
    assert mx["size_bytes"].sum() == pytest.approx(
        sum(v["Transit Size(MB)"] for *_, v in ops) * 1e6)
    assert mx["time_us"].sum() == pytest.approx(sum(v["Transit Time(ms)"] for *_, v in ops)
                                                * 1000)


def test_memory_units(rank0):
    rows = _rows(OUT0 / "memory_record.csv")
    mem = rank0.memory
    rec = mem[mem["source"] == "memory_record"]
    assert len(rec) == len(rows)
    reserved = sum(float(r["Total Reserved(MB)"]) for r in rows if r["Total Reserved(MB)"])
    assert rec["reserved_bytes"].sum() == pytest.approx(reserved * 1024 * 1024)
    # APP rows have no allocated value: NA, not zero
    n_empty = sum(r["Total Allocated(MB)"] == "" for r in rows)
    assert rec["allocated_bytes"].isna().sum() == n_empty
    opm = rank0.op_memory
    rows = _rows(OUT0 / "operator_memory.csv")
    assert opm["size_bytes"].sum() == pytest.approx(sum(float(r["Size(KB)"]) for r in rows)
                                                    * 1024)
    assert opm["release_us"].isna().sum() == sum(not r["Release Time(us)"].strip()
                                                 for r in rows)


def test_ops_from_trace_view(rank0):
    trace = json.loads((OUT0 / "trace_view.json").read_text())
    cpu = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "cpu_op"
           and not e["name"].startswith("ProfilerStep#")]
    ops = rank0.ops
    assert len(ops) == len(cpu)
    assert ops["dur_us"].sum() == pytest.approx(sum(e["dur"] for e in cpu))
    # device time through the async_npu flows, recomputed here with plain dicts
    dev = {(e["pid"], e["tid"], e["ts"]): e["dur"] for e in trace if e.get("ph") == "X"}
    starts = {e["id"]: (e["tid"], e["ts"]) for e in trace
              if e.get("cat") == "async_npu" and e["ph"] == "s"}
    total = 0.0
    for e in trace:
        if e.get("cat") == "async_npu" and e["ph"] == "f" and e["id"] in starts:
            total += dev.get((e["pid"], e["tid"], e["ts"]), 0.0)
    assert ops["device_dur_us"].sum() == pytest.approx(total)
    assert ops["step"].dropna().unique().tolist() == [50]


def test_header_variants_old_export():
    """2023 export: 9-column step_trace_time without Preparing, old memory headers."""
    meta, tables = ascend.parse(OLD0)
    p = Profile(meta, tables)
    assert p.meta.rank == 0
    assert p.steps["preparing_us"].isna().all()
    assert len(p.steps) == len(_rows(OLD0 / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"))
    assert p.memory["active_bytes"].isna().all()  # 5-column memory_record has no Active
    assert len(p.kernels) == len(_rows(OLD0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"))


def test_mindspore_layout_and_renamed_columns(tmp_path):
    """A *_ascend_ms folder with MindSpore's 'Step ID' and CANN 8.5 'Block Num' headers."""
    dst = tmp_path / "host_1_20250101000000000_ascend_ms"
    out = dst / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    src = (OUT0 / "kernel_details.csv").read_text(encoding="utf-8")
    head, rest = src.split("\n", 1)
    head = head.replace("Step Id", "Step ID").replace("Block Dim", "Block Num")
    (out / "kernel_details.csv").write_text(head + "\n" + rest, encoding="utf-8")
    shutil.copy(OUT0 / "step_trace_time.csv", out)
    (dst / "profiler_info_3.json").write_text(json.dumps(
        {"profiler_parameters": {"profiler_level": "Level0"},
         "ms_profiler_info": {"rank_id": 3}, "ms_version": "2.9.0"}))
    p = detect.load(dst, cache=False)
    assert p.meta.framework == "mindspore"
    assert p.meta.rank == 3
    assert p.meta.profiler_level == "Level0"
    assert p.kernels["step"].dropna().unique().tolist() == [50]
    assert "block_dim" in p.kernels
    assert any("communication.json not found" in n and "Level0" in n for n in p.meta.notes)
    assert len(p.comm_ops) == 0


def test_output_dir_itself_is_accepted():
    p = detect.load(OUT0, cache=False)
    assert isinstance(p, Profile) and p.meta.rank == 0


def test_trace_view_numeric_or_string_times(tmp_path):
    """MindSpore >= 2.4 may write ts/dur as numbers or as strings: same tables either way."""
    src = sample(TRACE_VIEW_EXCERPT)
    events = json.loads(src.read_text())
    as_text = detect.load(src, cache=False)
    numeric, strings = [], []
    for e in events:
        n, s = dict(e), dict(e)
        if "ts" in e:
            n["ts"] = float(Decimal(str(e["ts"])))
            s["ts"] = str(e["ts"])
        if "dur" in e:
            n["dur"] = float(e["dur"])
            s["dur"] = str(e["dur"])
        numeric.append(n)
        strings.append(s)
    ms = tmp_path / "host_20250101_ascend_ms" / "ASCEND_PROFILER_OUTPUT"
    ms.mkdir(parents=True)
    (ms / "trace_view.json").write_text(json.dumps(numeric))
    st = tmp_path / "s" / "trace_view.json"
    st.parent.mkdir()
    st.write_text(json.dumps(strings))
    num = detect.load(ms / "trace_view.json", cache=False)
    txt = detect.load(st, cache=False)  # dur as text too
    np.testing.assert_allclose(txt.kernels["dur_us"], as_text.kernels["dur_us"])
    np.testing.assert_allclose(txt.kernels["start_us"], as_text.kernels["start_us"])
    assert num.meta.framework == "mindspore"
    # float ts keeps ~0.25 µs precision at epoch magnitudes: compare with that tolerance
    for name in ("kernels", "ops"):
        a, b = getattr(as_text, name), getattr(num, name)
        assert len(a) == len(b) > 0
        np.testing.assert_allclose(a["start_us"], b["start_us"], atol=0.5)
        np.testing.assert_allclose(a["dur_us"], b["dur_us"], rtol=1e-12)
    pd_steps = num.steps
    assert len(pd_steps) == len(as_text.steps)
    np.testing.assert_allclose(pd_steps["computing_us"], as_text.steps["computing_us"])
    x_events = [e for e in events if e.get("ph") == "X" and
                e.get("pid") in {m["pid"] for m in events if m.get("ph") == "M"
                                 and m.get("name") == "process_name"
                                 and m["args"]["name"] == "Ascend Hardware"}]
    assert len(as_text.kernels) == len(x_events)


def test_trace_view_empty_overlap_track_counts_zero_not_unknown():
    """The excerpt's Overlap Analysis process names four tracks but its
    Communication(Not Overlapped) track has no event: the step has no exposed
    communication (0), and its time is the device window, read here from the raw JSON,
    where it was once unknown (the Overview's steps row all dashes)."""
    src = sample(TRACE_VIEW_EXCERPT)
    events = json.loads(src.read_text())
    (ov_pid,) = {e["pid"] for e in events if e.get("ph") == "M"
                 and e.get("name") == "process_name" and e["args"]["name"] == "Overlap Analysis"}
    tracks = {e["tid"]: e["args"]["name"] for e in events
              if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == ov_pid}
    spans = [e for e in events if e.get("ph") == "X" and e["pid"] == ov_pid]
    busy = {name: sum(float(e["dur"]) for e in spans if e["tid"] == tid)
            for tid, name in tracks.items()}
    assert busy["Communication(Not Overlapped)"] == 0.0 < busy["Computing"]
    window = (max(Decimal(str(e["ts"])) + Decimal(str(e["dur"])) for e in spans)
              - min(Decimal(str(e["ts"])) for e in spans))
    from perfkit.analysis import step_breakdown

    steps = step_breakdown(detect.load(src, cache=False))
    assert len(steps) == 1
    row = steps.iloc[0]
    assert row["comm_not_overlapped_us"] == 0.0
    assert row["computing_us"] == pytest.approx(busy["Computing"])
    assert row["free_us"] == pytest.approx(busy["Free"])
    # the tracks tile the window: the step is its length
    assert row["step_us"] == pytest.approx(float(window), abs=0.5)
