"""Legacy MindSpore / MindInsight files (rank suffixes), checked with the csv/json modules."""

from __future__ import annotations

import csv
import json

import pytest
from raw_mindspore import legacy_cluster
from shared_samples import MINDINSIGHT, sample

import perfkit as pk
import perfkit.io.engines.local as detect
from perfkit.profile import Cluster, Profile

pytestmark = pytest.mark.shared_samples  # every test reads the real MindInsight outputs
DATA = sample(MINDINSIGHT)
PROPOSE = DATA / "cluster_propose"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))


def test_cluster_propose_ranks():
    c = detect.load(PROPOSE, cache=False)
    assert isinstance(c, Cluster)
    assert c.ranks == [0, 1, 2, 3]
    assert c.meta.source_format == "mindspore_legacy"


def test_steps_and_comm_rank0():
    c = detect.load(PROPOSE, ranks=[0], cache=False)
    p = c[0]
    with open(PROPOSE / "ascend_cluster_analyse_pipeline-parallel_2_4_0.csv") as fh:
        rows = list(csv.DictReader(fh))[:-1]  # the last row is the steps' mean
    assert len(p.steps) == len(rows)
    assert p.steps["computing_or_free_us"].sum() == pytest.approx(
        sum(float(r["computation_time"]) for r in rows) * 1000)
    assert p.steps["bubble_us"].sum() == pytest.approx(
        sum(float(r["receive_alone_time"]) for r in rows) * 1000)
    with open(PROPOSE / "step_trace_raw_0_detail_time.csv") as fh:
        trace = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()
                 and int(r["step_num"]) > 0]
    by_step = p.steps.set_index("step")["total_us"]
    assert [by_step[int(r["step_num"])] for r in trace] == pytest.approx(
        [int(r["total"]) / 100 for r in trace])  # 10 ns ticks
    with open(PROPOSE / "hccl_raw_0.csv") as fh:
        hccl = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()]
    ops = [v for r in hccl for v in json.loads(r["communication_operator_cost"]).values()]
    cost, wait = sum(v[1] for v in ops), sum(v[2] for v in ops)
    # MindInsight's HcclParser: the cost is the link tasks' transfer time, the wait the
    # notify waits outside them; two parts apart, the op's time their sum (a walk found
    # receive waits 196× their "elapse" when the cost alone was taken for it)
    assert p.comm_ops["transit_us"].sum() == pytest.approx(cost * 1000)
    assert p.comm_ops["wait_us"].sum() == pytest.approx(wait * 1000)
    assert p.comm_ops["elapse_us"].sum() == pytest.approx((cost + wait) * 1000)
    assert p.meta.origin_ns is None


def test_no_communication_share_is_above_one():
    """comm_summary on the whole legacy cluster: transit and wait shares of each kind of
    collective sum to 1 (they read 0.16 and 196.5 before)."""
    summary = pk.analysis.comm_summary(detect.load(PROPOSE, cache=False))
    assert len(summary)
    shares = summary[["transit_share", "wait_share"]]
    assert (shares <= 1 + 1e-9).all().all()
    assert shares.sum(axis=1).tolist() == pytest.approx([1.0] * len(summary))


def test_the_cluster_analyse_files_last_row_is_the_mean_not_a_step():
    """MindSpore writes ascend_cluster_analyse_*.csv with one row per step and, after them,
    their mean (``metric.append(sum(metric) / step_num)`` in _write_cluster_metrices,
    mindspore/profiler/parser/integrator.py): each rank's file here has 6 rows for the 5
    numbered steps of its step_trace_raw file. The mean was read as a step 6 (rank 3:
    224.06 ms, pulled up by its 2.38 s first step) and the measured step was 180.08 ms. It
    is the median over the 5 steps of the slowest rank's step-trace total, µs: step maxima
    2,376,132.45, 181,012.69, 179,139.73, 178,875.16, 178,785.73, median 179,139.73."""
    c = detect.load(PROPOSE, cache=False)
    totals: dict[int, list[float]] = {}
    for rank in range(4):
        with open(PROPOSE / f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv") as fh:
            rows = list(csv.DictReader(fh))
        with open(PROPOSE / f"step_trace_raw_{rank}_detail_time.csv") as fh:
            trace = [r for r in csv.DictReader(fh) if r["step_num"].isdigit()]
        assert len(rows) == len(trace) + 1 == 6
        steps = c[rank].steps
        assert steps["step"].tolist() == [int(r["step_num"]) for r in trace]
        assert steps["computing_or_free_us"].tolist() == pytest.approx(
            [float(r["computation_time"]) * 1000 for r in rows[:-1]])
        assert steps["bubble_us"].tolist() == pytest.approx(
            [float(r["receive_alone_time"]) * 1000 for r in rows[:-1]])
        for r in trace:
            totals.setdefault(int(r["step_num"]), []).append(int(r["total"]) / 100)
    slowest = sorted(max(v) for v in totals.values())
    assert slowest[2] == pytest.approx(179_139.73)
    breakdown = pk.analysis.step_breakdown(c)
    assert pk.analysis.measured_step_s(breakdown) * 1e6 == pytest.approx(slowest[2])


def test_computation_time_is_computing_or_idle_and_the_split_reads_the_files():
    """MindSpore writes ``computation_time`` as its step's duration less the communication
    that runs alone (``computation_time.append(step duration - comm_alone_time[step])`` in
    its timeline generators), so the device's idle time is in it: it is no computing time.
    These files do not tell computing from idle; what they say adds up to MindSpore's step:
    computation_time + communication_alone_time, the latter being receive_alone_time (the
    pipeline bubble) + collective_communication_alone_time (the exposed communication).
    The headline's split is those three parts and the step trace's interval before the
    step, summed over every rank and step (each file's last row, the steps' mean, left
    out), read here with the csv module; it was empty (no free time), with computing_us
    the file's computation_time. Step 1, a warm-up 13 times the median step, is left out
    of the split as of the median step time (the split says so)."""
    from perfkit.widgets.headline import headline, headline_html, step_split

    c = detect.load(PROPOSE, cache=False)
    comp = alone = receive = collective = 0.0
    for rank in range(4):
        with open(PROPOSE / f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv") as fh:
            rows = list(csv.DictReader(fh))[:-1]
        steps = c[rank].steps
        assert steps["computing_us"].isna().all() and steps["free_us"].isna().all()
        assert steps["computing_or_free_us"].tolist() == pytest.approx(
            [float(r["computation_time"]) * 1000 for r in rows])
        for r in rows[1:]:  # step 1 (the warm-up) left out
            comp += float(r["computation_time"])
            alone += float(r["communication_alone_time"])
            receive += float(r["receive_alone_time"])
            collective += float(r["collective_communication_alone_time"])
    assert alone == pytest.approx(receive + collective)  # the files' own identity
    assert comp > 0
    # the step trace's interval (fp_point - start_point: from the previous step's end to
    # the forward pass), which MindSpore's own step leaves out, is the wait before the step
    interval = sum(r["interval_ms"] for rows in legacy_cluster(PROPOSE).values()
                   for r in rows[1:])
    assert interval > 0
    breakdown = pk.analysis.step_breakdown(c)
    split = step_split(breakdown)
    assert split["part"].tolist() == ["computing_or_free_us", "comm_exposed_us", "bubble_us",
                                      "iteration_interval_us"]
    assert split["us"].tolist() == pytest.approx(
        [comp * 1000, collective * 1000, receive * 1000, interval * 1000], rel=1e-6)
    step = comp + alone + interval  # MindSpore's step and the interval before it
    assert split["share"].tolist() == pytest.approx(
        [comp / step, collective / step, receive / step, interval / step], rel=1e-6)
    assert split.attrs["rows"] == 16 and "step 1 (" in split.attrs["left_out"]
    page = headline_html(headline(c, breakdown, None))
    assert "computing or device idle" in page and "No step split" not in page
    assert any("computation_time" in n and "idle" in n for n in c[0].meta.notes)


def test_single_rank_run_with_timeline():
    p = detect.load(DATA / "run_2_normal_run", cache=False)
    assert isinstance(p, Profile) and p.meta.rank == 1
    events = json.loads((DATA / "run_2_normal_run" / "profiler" /
                         "ascend_timeline_display_1.json").read_text())
    assert len(p.kernels) == sum(e.get("ph") == "X" for e in events)
    assert any("computation_time" in n for n in p.meta.notes)


def _ticks_and_timeline(folder):
    """The step trace's (step, start, end) in 10 ns ticks and ``output_timeline_data``'s
    (op, start in ms) rows, read here with the csv module."""
    with open(next(folder.glob("step_trace_raw_*_detail_time.csv")), newline="") as fh:
        steps = [(int(r["step_num"]), int(r["start_point"]), int(r["end_point"]))
                 for r in csv.DictReader(fh) if r["step_num"].strip().isdigit()
                 and int(r["step_num"]) > 0]
    with open(next(folder.glob("output_timeline_data_*.txt")), newline="") as fh:
        rows = list(csv.reader(fh, skipinitialspace=True))[1:]
    return steps, [(r[0].strip(), float(r[2])) for r in rows if len(r) >= 3]


def test_steps_of_a_timeline_without_the_counter_file():
    """run_2_normal_run has no min_cycle_counter file, so its kernels had no step and the
    Timeline showed nothing in step 1. output_timeline_data lists the same operators in ms
    on the step trace's counter (1 ms = 1e5 ticks): the operators that start inside step
    1's tick window, counted here, are the kernels perfkit puts in step 1."""
    folder = DATA / "run_2_normal_run" / "profiler"
    assert not list(folder.glob("min_cycle_counter_*"))
    steps, ops = _ticks_and_timeline(folder)
    p = detect.load(DATA / "run_2_normal_run", cache=False)
    device = p.kernels[p.kernels["name"].isin({name for name, _ in ops})]
    assert len(device) == len(ops)  # the other events are the host's (pid 9000)
    for step, start, end in steps:
        inside = sum(start <= ms * 1e5 < end for _, ms in ops)
        assert inside > 0
        assert int((device["step"] == step).sum()) == inside, step
    assert p.steps["tasks_recorded"].all()
    assert any("output_timeline_data_1.txt" in n for n in p.meta.notes)


def test_the_timeline_data_gives_the_counter_files_zero():
    """mi_run1 has both files: the time 0 matched from output_timeline_data is the value
    of min_cycle_counter (10 ns ticks), read here."""
    from perfkit.io.mindspore.legacy_steps import _timeline_zero_us

    folder = sample("wild/mi_run1") / "profiler"
    zero_ticks = float((folder / "min_cycle_counter_1.txt").read_text().split()[0])
    p = detect.load(folder.parent, cache=False)
    got = _timeline_zero_us(folder / "output_timeline_data_1.txt", p.kernels)
    assert got == pytest.approx(zero_ticks * 0.01, abs=0.05)


def test_aggregate_only_files_are_recognised(tmp_path):
    import shutil

    src = DATA / "run_2_normal_run" / "profiler"
    user = tmp_path / "profiler"
    user.mkdir()
    for name in ("minddata_pipeline_raw_1.csv", "device_queue_profiling_1.txt",
                 "aicore_intermediate_1_type.csv", "aicore_intermediate_1_detail.csv"):
        shutil.copy(src / name, user)
    p = detect.load(user, cache=False)
    assert isinstance(p, Profile) and p.meta.rank == 1
    assert p.meta.source_format == "mindspore_legacy"
    assert "minddata_pipeline_raw_1.csv" in p.meta.extra["files"]
    assert any("aggregate" in n for n in p.meta.notes)
    assert len(p.kernels) == 0 and len(p.steps) == 0


def test_a_step_trace_value_that_is_not_a_number_is_named(tmp_path):
    """A walk: step 4's end_point set to ``abc`` left that step with no device tasks and
    only a note blaming the timeline. The note now names the file, line and field."""
    import shutil

    from shared_samples import sample as wild

    folder = tmp_path / "profiler"
    shutil.copytree(wild("wild/mi_run1") / "profiler", folder)
    trace = folder / "step_trace_raw_1_detail_time.csv"
    with open(trace, newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    line = next(i for i, r in enumerate(rows) if r[0] == "4") + 1  # 1-based line
    rows[line - 1][header.index("end_point")] = "abc"
    with open(trace, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    p = pk.load(folder, progress=False, cache=False)
    notes = [str(n) for n in p.meta.notes]
    assert any(f"step_trace_raw_1_detail_time.csv: end_point is not a number on line {line} "
               "('abc')" in n for n in notes), notes
    kernels = p.kernels
    assert (kernels["step"] == 4).sum() == 0 and (kernels["step"] == 5).sum() > 0
