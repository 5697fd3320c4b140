"""The timeline of one step: window, lanes, labels and the time-preserving event cap.

Every expected number is computed here from the canonical tables (or the raw trace file)
with plain arithmetic: step times from the profiler's step table, windows from the
kernels' first start and last end, lane totals as the kernels' durations clipped to the
window, free time as the window minus the union of the kernels.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shared_samples import CLUSTER_OUTPUT, PT_LEVEL1, shared_sample

import perfkit as pk
from perfkit.analysis.timeline import (
    DEFAULT_MAX_EVENTS,
    TIMELINE_COLUMNS,
    TimelineError,
    merge_tiny_events,
    pack_sublanes,
    short_label,
)

ROOT = Path(__file__).resolve().parents[2]
SLOW_RANK = ROOT / "data" / "simulated" / "slow-rank"
SIM16 = ROOT / "data" / "simulated" / "llama2-13b-baseline-dp16"
KINETO = ROOT / "data" / "kineto-tiny-llama"


@pytest.fixture(scope="module")
def slow() -> Any:
    return pk.load(SLOW_RANK, cache=False, progress=False)


@pytest.fixture(scope="module")
def sim16() -> Any:
    return pk.load(SIM16, cache=False, progress=False)


@pytest.fixture(scope="module")
def kineto() -> Any:
    return pk.load(KINETO, cache=False, progress=False)


@pytest.fixture(scope="module")
def real() -> Any:
    return pk.load(shared_sample(PT_LEVEL1), cache=False, progress=False)


# --------------------------------------------------------------------------- helpers

def _step_us(steps: pd.DataFrame) -> pd.Series:
    """Step time per (rank, step) from the profiler's step table: the three parts."""
    s = steps.set_index(["rank", "step"])
    return s["computing_us"] + s["comm_not_overlapped_us"] + s["free_us"]


def _window(kernels: pd.DataFrame, rank: int, step: int) -> tuple[float, float]:
    k = kernels[(kernels["rank"] == rank) & (kernels["step"] == step)]
    return float(k["start_us"].min()), float((k["start_us"] + k["dur_us"]).max())


def _clipped(kernels: pd.DataFrame, rank: int, ws: float, we: float) -> pd.DataFrame:
    k = kernels[kernels["rank"] == rank]
    s = k["start_us"].clip(ws, we)
    e = (k["start_us"] + k["dur_us"]).clip(ws, we)
    return k.assign(cs=s, ce=e)[(e > s).to_numpy(bool)]


def _union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(zip(starts, ends, strict=True)):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0.0)


# --------------------------------------------------------------------------- window

def test_default_step_and_ranks_are_the_median_step_of_the_slowest_and_fastest(slow):
    per = _step_us(slow.steps)
    med = per.groupby(level="rank").median()
    slowest, fastest = int(med.idxmax()), int(med.idxmin())
    mine = per.xs(slowest, level="rank")
    expected_step = int((mine - mine.median()).abs().sort_index().idxmin())
    f = pk.analysis.timeline(slow)
    info = f.attrs["timeline"]
    assert info["ranks"] == [slowest, fastest]
    assert info["step"] == expected_step
    assert info["slowest_rank"] == slowest and info["fastest_rank"] == fastest
    assert f"slowest rank {slowest}" in f.attrs["notes"][0]
    assert list(f["rank"].unique()) == [slowest, fastest]


def test_window_is_the_device_span_of_the_step_and_times_are_relative_to_it(slow):
    f = pk.analysis.timeline(slow, step=2, ranks=[0, 2])
    w = {r: _window(slow.kernels, r, 2) for r in (0, 2)}
    info = f.attrs["timeline"]
    origin = min(ws for ws, _ in w.values())
    for r in (0, 2):
        assert info["start_us"][str(r)] == pytest.approx(w[r][0])
        assert info["end_us"][str(r)] == pytest.approx(w[r][1])
        rows = f[f["rank"] == r]
        assert rows["start_us"].min() == pytest.approx(w[r][0] - origin)
        assert rows["end_us"].max() == pytest.approx(w[r][1] - origin)
    assert (f["start_us"] >= 0).all() and (f["end_us"] >= f["start_us"]).all()
    # its Preparing, about 0.3 ms of a 350 ms step, is under 1 % of it: no wait lane
    assert info["wait_us"] == {} and not (f["kind"] == "wait").any()
    g = pk.analysis.timeline(slow, step=2, ranks=[0, 2], align="rank")
    assert g.groupby("rank")["start_us"].min().tolist() == pytest.approx([0.0, 0.0])


def test_the_wait_for_data_is_drawn_just_before_the_step():
    """data-stall's ranks wait 120 ms for data before step 3 (Preparing in their raw
    step_trace_time.csv, read here): a wait bar that long ends where the first device task
    starts, and the times count from the earliest wait."""
    import csv

    folder = pk.widgets.bundled_profile("simulated/data-stall")
    prof = pk.load(folder)
    waits = {}
    for path in folder.glob("*/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"):
        for row in csv.DictReader(path.open(newline="", encoding="utf-8")):
            if int(row["Step"]) == 3:
                waits[int(row["Device_id"])] = float(row["Preparing"])
    assert min(waits[r] for r in (0, 2)) > 100e3
    f = pk.analysis.timeline(prof, step=3, ranks=[0, 2])
    w = {r: _window(prof.kernels, r, 3) for r in (0, 2)}
    origin = min(ws - waits[r] for r, (ws, _) in w.items())
    for r in (0, 2):
        (wait,) = f[(f["rank"] == r) & (f["kind"] == "wait")].itertuples()
        assert wait.lane == "wait" and wait.dur_us == pytest.approx(waits[r])
        assert wait.start_us == pytest.approx(w[r][0] - waits[r] - origin)
        assert wait.end_us == pytest.approx(w[r][0] - origin)
        tasks = f[(f["rank"] == r) & (f["kind"] != "wait")]
        assert tasks["start_us"].min() == pytest.approx(w[r][0] - origin)
    assert "the device's wait for it (data, launch)" in f.attrs["notes"][0]


def test_stream_lanes_hold_every_kernel_of_the_window_clipped(slow):
    f = pk.analysis.timeline(slow, step=1, ranks=[1, 3], max_events=None)
    assert list(f.columns) == list(TIMELINE_COLUMNS)
    for r in (1, 3):
        ws, we = _window(slow.kernels, r, 1)
        k = _clipped(slow.kernels, r, ws, we)
        rows = f[(f["rank"] == r) & (f["kind"] != "wait")]
        assert len(rows) == len(k)
        for stream, part in k.groupby(k["stream"].fillna(-1)):
            lane = "no stream (HCCL)" if stream == -1 else f"stream {int(stream)}"
            mine = rows[rows["lane"].str.startswith(lane)]
            assert len(mine) == len(part)
            assert mine["dur_us"].sum() == pytest.approx((part["ce"] - part["cs"]).sum(),
                                                         rel=1e-12)


def test_category_lanes_add_up_to_the_step_breakdown(slow):
    f = pk.analysis.timeline(slow, step=2, ranks=[2], lanes="categories", max_events=None)
    ws, we = _window(slow.kernels, 2, 2)
    k = _clipped(slow.kernels, 2, ws, we)
    comm = k["category"] == "communication"
    lanes = f.groupby(f["lane"].str.split(" · ").str[0])["dur_us"].sum()
    assert lanes["computing"] == pytest.approx((k["ce"] - k["cs"])[~comm].sum(), rel=1e-12)
    assert lanes["communication"] == pytest.approx((k["ce"] - k["cs"])[comm].sum(),
                                                   rel=1e-12)
    busy = _union_length(k["cs"].to_numpy(), k["ce"].to_numpy())
    assert lanes["free"] == pytest.approx((we - ws) - busy, abs=1e-6)
    # the derived step breakdown says the same free time for this window
    derived = pk.analysis.step_breakdown(slow, derive="always")
    row = derived[(derived["rank"] == 2) & (derived["step"] == 2)].iloc[0]
    assert lanes["free"] == pytest.approx(row["free_us"], abs=1e-6)


def test_overlapping_collectives_get_sub_lanes_that_never_overlap(sim16):
    f = pk.analysis.timeline(sim16, max_events=None)
    for _, lane in f.groupby("track"):
        lane = lane.sort_values("start_us")
        overlap = lane["start_us"].to_numpy()[1:] - lane["end_us"].to_numpy()[:-1]
        assert (overlap >= -1e-3).all()


# --------------------------------------------------------------------------- the cap

def test_cap_merges_tiny_events_without_losing_time(sim16):
    full = pk.analysis.timeline(sim16, lanes="categories", max_events=None)
    assert len(full) > 1200
    capped = pk.analysis.timeline(sim16, lanes="categories", max_events=1000)
    assert len(capped) <= 1000
    a = full.groupby("track")[["dur_us", "n_events"]].sum()
    b = capped.groupby("track")[["dur_us", "n_events"]].sum()
    pd.testing.assert_series_equal(a["n_events"], b["n_events"])
    np.testing.assert_allclose(b["dur_us"], a["dur_us"], rtol=1e-12)
    blocks = capped[capped["kind"] == "block"]
    assert len(blocks) and (blocks["n_events"] > 1).all()
    assert (blocks["dur_us"] <= blocks["end_us"] - blocks["start_us"] + 1e-6).all()
    assert blocks["name"].str.fullmatch(r"\d+ (kernels|gaps)").all()
    # labelled events are never merged
    keep = ["track", "name", "start_us", "end_us"]
    pd.testing.assert_frame_equal(full.loc[full["labelled"], keep].reset_index(drop=True),
                                  capped.loc[capped["labelled"], keep].reset_index(drop=True))
    info = capped.attrs["timeline"]
    assert info["events"] == len(full) and info["blocks"] == len(blocks)
    assert any("merged" in n and "no time is dropped" in n for n in capped.attrs["notes"])
    # under the cap nothing changes
    same = pk.analysis.timeline(sim16, lanes="categories", max_events=len(full))
    assert same.attrs["timeline"]["blocks"] == 0 and len(same) == len(full)


def test_default_cap_holds_on_every_rank_of_a_16_rank_job(sim16):
    f = pk.analysis.timeline(sim16, ranks=sim16.ranks)
    assert len(f) <= DEFAULT_MAX_EVENTS
    assert f["n_events"].sum() == len(sim16.kernels)  # one step: every kernel is in it


def test_merge_tiny_events_by_hand():
    # one track: 4 tiny events close together, one long, 2 tiny far apart
    s = np.array([0.0, 2.0, 4.0, 6.0, 10.0, 200.0, 400.0])
    d = np.array([1.0, 1.0, 1.0, 1.0, 50.0, 1.0, 1.0])
    f = pd.DataFrame({"track_order": 0, "track": "t", "lane": "l", "rank": 0,
                      "name": [f"k{i}" for i in range(7)], "label": "k",
                      "category": "compute", "kind": "event", "start_us": s,
                      "end_us": s + d, "dur_us": d, "n_events": 1, "labelled": False,
                      "clipped": False})
    out, info = merge_tiny_events(f, 4)
    # threshold 1 µs cannot join (gaps are 1 µs: 2-1): the smallest sufficient is 1.0
    assert len(out) == 4 and info["threshold_us"] == 1.0
    assert out["name"].tolist() == ["4 kernels", "k4", "k5", "k6"]
    assert out["dur_us"].tolist() == [4.0, 50.0, 1.0, 1.0]
    assert out.loc[0, "start_us"] == 0.0 and out.loc[0, "end_us"] == 7.0
    out, info = merge_tiny_events(f, 7)
    assert len(out) == 7 and info["blocks"] == 0


def test_pack_sublanes():
    s = np.array([0.0, 1.0, 2.0, 6.0])
    e = np.array([5.0, 3.0, 8.0, 7.0])
    assert pack_sublanes(s, e).tolist() == [0, 1, 2, 0]
    # nested: (1, 3) lies inside (0, 5); (2, 8) crosses its end
    assert pack_sublanes(s, e, nested=True).tolist() == [0, 0, 1, 0]


# --------------------------------------------------------------------------- labels

def test_longest_kernels_and_collectives_are_labelled(real):
    f = pk.analysis.timeline(real, n_labels=3, max_events=None)
    k = real.kernels
    for r in f["rank"].unique():
        mine = f[(f["rank"] == r) & f["labelled"] & (f["kind"] != "wait")]  # wait: its own
        kr = k[k["rank"] == r]
        comm = kr[kr["category"] == "communication"].nlargest(3, "dur_us")
        comp = kr[kr["category"] != "communication"].nlargest(3, "dur_us")
        assert sorted(mine["dur_us"].round(3)) == sorted(
            pd.concat([comm, comp])["dur_us"].round(3))
        assert "hcom_allReduce" in set(mine["label"])


def test_short_label():
    assert short_label("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
                       "FlashAttentionScore") == "FlashAttentionScore"
    assert short_label("hcom_allReduce__586_0_1", "hcom_allReduce_") == "hcom_allReduce"
    assert short_label("void at::native::elementwise_kernel<128, 4, at::native::Foo<float>>"
                       "(int, at::native::Foo<float>)", "kernel") == "elementwise_kernel"
    nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert short_label(nccl + "(ncclDevKernelArgsStorage)", None) == nccl[:27] + "…"
    assert len(short_label("x" * 100, None)) == 28
    anon = ("void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::"
            "arange_cuda_out(c10::Scalar const&)::{lambda()#1}>(int, long)")
    assert short_label(anon, None, max_len=48) == "elementwise_kernel_with_index"
    assert short_label("Memcpy DtoD (Device -> Device)", None) == "Memcpy DtoD"
    assert short_label("Memset (Device)", None) == "Memset"
    assert short_label("void gemv2T_kernel(int, float)", None) == "gemv2T_kernel"
    # vLLM's, in the B200 trace: a ">" inside parentheses is a comparison, not a template's
    # end (it was cut to "enable_if", the return type's name)
    vllm = ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>"
            "::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, "
            "c10::BFloat16*, c10::BFloat16 const*, float, int, int)")
    assert short_label(vllm, None, max_len=48) == "fused_add_rms_norm_kernel"


# --------------------------------------------------------------------------- samples

def _ops_depth0(ops: pd.DataFrame) -> pd.DataFrame:
    """Host ops not contained in another op of the same thread (independent O(n^2) test)."""
    keep = pd.Series(False, index=ops.index)
    for _, g in ops.groupby("thread"):
        s = g["start_us"].to_numpy()
        e = (g["start_us"] + g["dur_us"]).to_numpy()
        longer = g["dur_us"].to_numpy()
        for i in range(len(g)):
            inside = (s <= s[i]) & (e >= e[i]) & ((longer > longer[i]) | (s < s[i]))
            keep[g.index[i]] = not inside.any()
    return ops[keep.to_numpy(bool)] if len(ops) else ops


def test_cpu_only_kineto_trace_uses_host_lanes_that_match_its_step_table(kineto):
    f = pk.analysis.timeline(kineto, lanes="categories", max_events=None)
    step = f.attrs["timeline"]["step"]
    steps = kineto.steps.set_index(["rank", "step"])
    for r in f["rank"].unique():
        row = steps.loc[(r, step)]
        lanes = f[f["rank"] == r].groupby("lane")["dur_us"].sum()
        assert lanes["free"] == pytest.approx(row["free_us"], abs=1e-6)
        assert lanes["communication"] == pytest.approx(row["communication_us"], abs=1e-6)
        assert lanes["computing"] == pytest.approx(row["computing_us"], abs=1e-6)
    # streams mode: one lane per thread and depth; the outermost lane is every top-level op
    g = pk.analysis.timeline(kineto, max_events=None)
    r = int(g["rank"].iloc[0])
    ws = float(steps.loc[(r, step), "step_start_us"])
    we = ws + float(steps.loc[(r, step), "total_us"])
    ops = kineto.ops[kineto.ops["rank"] == r]
    top = _ops_depth0(ops[(ops["start_us"] < we) & (ops["start_us"] + ops["dur_us"] > ws)])
    clipped = ((top["start_us"] + top["dur_us"]).clip(ws, we) - top["start_us"].clip(ws, we))
    lane = g[(g["rank"] == r) & ~g["lane"].str.contains("depth")]
    assert len(lane) == len(top)
    assert lane["dur_us"].sum() == pytest.approx(clipped.sum(), rel=1e-12)
    assert set(g["category"]) <= {"host", "communication"}
    assert any("nested deeper" in n for n in g.attrs["notes"])


def test_kineto_step_window_is_the_profiler_step_span_of_the_raw_trace(kineto):
    """ProfilerStep#N read straight from the file, for a rank whose clock is shifted."""
    f = pk.analysis.timeline(kineto, step=3, ranks=[1], lanes="categories")
    trace = json.loads(gzip.decompress((KINETO / "rank1.pt.trace.json.gz").read_bytes()))
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    step = next(e for e in ev if e["name"] == "ProfilerStep#3")
    assert f["end_us"].max() - f["start_us"].min() == pytest.approx(step["dur"], abs=1e-3)
    # the cluster clock starts at the earliest event of both ranks: rank 1 is shifted
    info = f.attrs["timeline"]
    assert info["end_us"]["1"] - info["start_us"]["1"] == pytest.approx(step["dur"], abs=1e-3)


@pytest.fixture(scope="module")
def bundled() -> dict[str, Any]:
    return {name: pk.load(path, cache=False, progress=False)
            for name, path in zip(pk.samples()["short_name"], pk.samples()["path"],
                                  strict=True)}


@pytest.mark.parametrize("lanes", ["streams", "categories"])
def test_every_bundled_sample_draws(bundled, lanes):
    for name, p in bundled.items():
        f = pk.analysis.timeline(p, lanes=lanes)
        assert 0 < len(f) <= DEFAULT_MAX_EVENTS, name
        assert f["labelled"].any(), name
        assert (f["dur_us"] >= 0).all() and (f["end_us"] >= f["start_us"]).all(), name
        assert f.attrs["notes"][0].startswith("step "), name


def test_one_profile_of_one_rank(tmp_path):
    p = pk.load(KINETO / "rank0.pt.trace.json.gz", cache=False, progress=False)
    f = pk.analysis.timeline(p)
    assert f["rank"].unique().tolist() == [0]
    assert f.attrs["timeline"]["ranks"] == [0]


# --------------------------------------------------------------------------- errors

def test_bad_arguments_are_explained(slow):
    with pytest.raises(TimelineError, match=r"rank 7 is not in this profile"):
        pk.analysis.timeline(slow, ranks=[7])
    with pytest.raises(TimelineError, match=r"no timed event in step 9 .*: \[1, 2\]"):
        pk.analysis.timeline(slow, step=9)
    with pytest.raises(TimelineError, match="lanes"):
        pk.analysis.timeline(slow, lanes="threads")
    with pytest.raises(TimelineError, match="max_events"):
        pk.analysis.timeline(slow, max_events=3)
    with pytest.raises(TimelineError, match="ranks"):
        pk.analysis.timeline(slow, ranks="0")
    with pytest.raises(pk.PerfkitError):
        pk.analysis.timeline(slow, step=1.5)


def test_a_profile_of_summaries_only_is_refused_with_the_reason():
    p = pk.load(shared_sample(CLUSTER_OUTPUT), cache=False, progress=False)
    with pytest.raises(TimelineError, match="no device task or host operator with a time"):
        pk.analysis.timeline(p)


def test_whether_a_profile_has_anything_to_draw_in_time(slow):
    """msprof-analyze's cluster summary holds step totals and per-collective figures (its
    JSON has a start per collective, but no device task or host operator at all): the
    views ask this before drawing, and explain instead of showing the refusal above."""
    from perfkit.analysis.timeline import has_timed_events

    folder = shared_sample(CLUSTER_OUTPUT) / "cluster_analysis_output"
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["cluster_communication.json", "cluster_communication_matrix.json",
                     "cluster_step_trace_time.csv", "communication_group.json"]
    assert not has_timed_events(pk.load(folder, cache=False, progress=False))
    assert has_timed_events(slow)  # device tasks
    assert has_timed_events(pk.load(KINETO, cache=False, progress=False))  # host ops


def test_a_default_rank_without_the_step_is_left_out_with_a_note():
    from perfkit.profile import Cluster, Profile, ProfileMeta

    def rank(r: int, rows: list[tuple[int, float, float]]) -> Profile:
        k = pd.DataFrame(rows, columns=["step", "start_us", "dur_us"]).assign(
            name="k", category="compute", stream=1)
        return Profile(ProfileMeta(source_format="test", rank=r, origin_ns=0), {"kernels": k})

    # rank 0: steps of 100 and 200 µs (median 150: both as near, the earlier wins);
    # rank 1: faster, but only step 5 was recorded
    c = Cluster([rank(0, [(1, 0.0, 100.0), (2, 200.0, 200.0)]), rank(1, [(5, 0.0, 50.0)])],
                ProfileMeta(source_format="cluster", origin_ns=0))
    f = pk.analysis.timeline(c)
    assert f.attrs["timeline"]["step"] == 1 and f.attrs["timeline"]["ranks"] == [0]
    assert "rank 1 left out: it has no timed event in step 1" in f.attrs["notes"][0]
    assert f["dur_us"].tolist() == [100.0]
    with pytest.raises(TimelineError, match=r"steps with events on rank 1: \[5\]"):
        pk.analysis.timeline(c, ranks=[0, 1])


def test_the_caption_says_when_only_one_rank_has_step_times():
    from perfkit.profile import Cluster, Profile, ProfileMeta

    def rank(r: int, rows: list[tuple[Any, float, float]]) -> Profile:
        k = pd.DataFrame(rows, columns=["step", "start_us", "dur_us"]).assign(
            name="k", category="compute", stream=1)
        k["step"] = k["step"].astype("Int64")
        return Profile(ProfileMeta(source_format="test", rank=r, origin_ns=0), {"kernels": k})

    # ranks 1 and 2 recorded kernels outside any step: they have no median to compare
    c = Cluster([rank(0, [(1, 0.0, 100.0), (2, 200.0, 200.0)]),
                 rank(1, [(None, 0.0, 50.0)]), rank(2, [(None, 0.0, 50.0)])],
                ProfileMeta(source_format="cluster", origin_ns=0))
    reason = pk.analysis.timeline(c).attrs["timeline"]["reason"]
    assert "rank 0: the only rank with step times (2 other ranks without)" in reason
    assert "same median" not in reason


# --------------------------------------------------------------------------- lazy

@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_lazy_cluster_gives_the_eager_frame(dask_client):
    eager = pk.load(SLOW_RANK, cache=False, progress=False)
    lazy = pk.load(SLOW_RANK, engine="dask", client=dask_client, progress=False)
    a = pk.analysis.timeline(eager, lanes="categories")
    b = pk.analysis.timeline(lazy, lanes="categories")
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["timeline"]["ranks"] == b.attrs["timeline"]["ranks"]
    from perfkit.export import chrome_trace

    assert chrome_trace(lazy)["traceEvents"] == chrome_trace(eager)["traceEvents"]


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.shared_samples
def test_a_data_loading_wait_is_drawn_before_the_step_and_counted_in_its_time():
    """PyTorch 1.9's ResNet-50 with num_workers=0 (its raw JSON read by raw_kineto): the
    representative step is chosen by its wall time, the reason says it, and the wait
    before its first kernel is one bar as long as the raw trace's."""
    import statistics

    from raw_kineto import raw_walls, raw_windows

    path = shared_sample("wild/k_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz")
    walls = {s: float(w) for s, w in raw_walls(path).items()}
    windows, _spans, _ = raw_windows(path)
    f = pk.analysis.timeline(pk.load(path, cache=False, progress=False))
    step = f.attrs["timeline"]["step"]
    med = statistics.median(walls.values())
    assert step == min(walls, key=lambda s: (abs(walls[s] - med), s))
    own = pk.format.time_text(walls[step])
    assert (f"the median-duration step of rank 0, {own} long; the median over its 6 steps "
            f"is {pk.format.time_text(med)};") in f.attrs["notes"][0]
    (wait,) = f[f["kind"] == "wait"].itertuples()
    lo, hi, _ = windows[step]
    assert wait.dur_us == pytest.approx(walls[step] - (float(hi) - float(lo)), abs=1e-3)
    assert wait.dur_us > 40e3  # the batch is fetched on the training thread: ~57 ms


@pytest.mark.shared_samples
def test_the_representative_step_is_one_whose_device_tasks_were_recorded():
    """mi_run1's step 140 (its median step over all 322) holds only the step trace's 11
    all-reduce phases: the timeline's device operators stop inside step 15 (read with json
    / csv). The representative step is the median of steps 1-14, drawn with its compute
    tasks, and the caption says which steps were recorded; step 140 asked for says that
    its gaps are not idle time."""
    import statistics

    from raw_mindspore import mi_run1

    folder = shared_sample("wild/mi_run1")
    raw = mi_run1(folder)
    total = {int(r["step_num"]): int(r["total"]) / 100 for r in raw["rows"]}
    walls = {s: total[s] for s in raw["recorded"]}
    med = statistics.median(walls.values())
    p = pk.load(folder, cache=False, progress=False)
    f = pk.analysis.timeline(p)
    step = f.attrs["timeline"]["step"]
    # 14 steps: the two middle ones are equally near the median; the earlier is shown
    dist = {s: abs(w - med) for s, w in walls.items()}
    assert step == min(s for s in dist if dist[s] <= min(dist.values()) + 1e-3)
    note = f.attrs["notes"][0]
    assert "device tasks recorded for steps 1–14 of 322" in note
    # 14 steps: the median lies between two, which show the same to three figures
    assert pk.format.time_text(walls[step]) == pk.format.time_text(med)
    assert (f"the median-duration step of rank {p.meta.rank}, {pk.format.time_text(med)} "
            "long, the median over its 14 steps whose device tasks were recorded") in note
    lo, hi = raw["windows"][step]
    tasks = [e for e in raw["tasks"] if lo <= e["ts"] < hi]
    assert (f["category"] == "compute").sum() == len(tasks) > 100
    g = pk.analysis.timeline(p, step=140)
    assert set(g["category"]) == {"communication"}
    assert "its device tasks were not recorded in full" in g.attrs["notes"][0]
    assert "the gaps drawn are not idle time" in g.attrs["notes"][0]


@pytest.mark.shared_samples
def test_a_mindspore_wait_for_data_is_drawn_before_the_iteration():
    """mi_prof (raw CANN, read with json): msprof's Iteration Time starts after the wait for
    data (Data_aug Bound, 16 ms of a 33 ms step). The representative step is the slowest
    rank's median by its wall (iteration and wait), each rank's wait is one bar as long
    as its raw bound, and the drawn window spans the step time the caption gives."""
    import statistics

    from raw_mindspore import mi_prof

    root = shared_sample("wild/mi_prof")
    raw = mi_prof(root)
    walls: dict[int, dict[int, float]] = {}
    for r, d in raw.items():  # the device span (its three tracks) and the wait before it
        order = sorted(d["iters"])
        walls[r] = {}
        for i, it in enumerate(order):
            t, e = d["tracks"][it], d["iters"][it]
            wait = d["bounds"].get(it, 0.0)
            if i:  # measured to the FP start: at most the gap to the iteration before
                prev = d["iters"][order[i - 1]]
                wait = min(wait, e["ts"] - (prev["ts"] + prev["dur"]))
            walls[r][it] = (t["Computing"] + t["Communication(Not Overlapped)"] + t["Free"]
                            + wait)
    slowest = max(walls, key=lambda r: statistics.median(walls[r].values()))
    med = statistics.median(walls[slowest].values())
    f = pk.analysis.timeline(pk.load(root, cache=False, progress=False))
    step = f.attrs["timeline"]["step"]
    # ten steps: the two middle ones are equally near the median; the earlier is shown
    dist = {s: abs(w - med) for s, w in walls[slowest].items()}
    assert step == min(s for s in dist if dist[s] <= min(dist.values()) + 1e-3)
    assert (f"step {step}: the median-duration step of the slowest rank {slowest}, "
            f"{pk.format.time_text(walls[slowest][step])} long; the median over its 10 "
            f"steps is {pk.format.time_text(med)};") in f.attrs["notes"][0]
    assert "the device's wait for it (data, launch)" in f.attrs["notes"][0]
    for rank, d in raw.items():
        (wait,) = f[(f["rank"] == rank) & (f["kind"] == "wait")].itertuples()
        assert wait.dur_us == pytest.approx(d["bounds"][step], rel=0.01)
        mine = f[f["rank"] == rank]
        drawn = float(mine["end_us"].max() - mine["start_us"].min())
        assert drawn == pytest.approx(walls[rank][step], rel=0.01)


def test_names_joined_by_commas_are_split_outside_brackets_only():
    """The advisor's "most frequent" list: the vLLM kernel above was said as two names,
    "enable_if" and a fragment, split at the comma inside its template."""
    from perfkit.advisor.words import kernel_names
    from perfkit.analysis.timeline.labels import split_top_level, top_level

    vllm = ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>"
            "::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)")
    joined = f"Memcpy DtoD (Device -> Device), {vllm}, void k<4, float>(int, float)"
    assert len(split_top_level(joined)) == 3
    assert top_level(vllm) == "std::enable_if::type vllm::fused_add_rms_norm_kernel"
    assert kernel_names(joined) == "Memcpy DtoD, fused_add_rms_norm_kernel, k"


@pytest.mark.slow  # two 16- and 4-rank samples drawn: about 3 s
def test_the_default_slowest_rank_does_not_contradict_the_slow_rank_check():
    """A walk: the Timeline drew "the slowest (13)" where the Overview says no rank is
    slower than its peers: 13 has the longest median step, within the others' noise. The
    note now says so; on the slow-rank sample, which has one, it names its phase."""
    calm = pk.analysis.timeline(pk.load("sample:llama2-13b-baseline-dp16", progress=False))
    (note,) = calm.attrs["notes"][:1]
    assert ("by median step time; no rank is slower than its peers beyond their "
            "step-to-step noise") in note
    slow = pk.analysis.timeline(pk.load("sample:slow-rank", progress=False))
    said = " ".join(slow.attrs["notes"])
    assert "slower than its peers in" in said and "beyond their step-to-step noise" not in said
