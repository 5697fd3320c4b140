"""The figures a finding's evidence tab shows are the finding's, read again from the raw files.

:mod:`test_finding_evidence_tabs` checks that the tab a finding points to shows what it
names; here its numbers are checked against arithmetic on the profile's own files, read
with the csv and json modules: the pipeline stages' times on the Communication tab
(``ascend/msinsight-cluster-output``: msprof-analyze's ``cluster_step_trace_time.csv``),
the legacy MindSpore step interval in the Overview's split (``cluster_propose``:
``ascend_cluster_analyse_*.csv`` and ``step_trace_raw_*_detail_time.csv``, read by
``raw_mindspore.legacy_cluster``), and the wait
the Timeline says where it draws none (``wild/mi_run1``'s step trace in 10 ns ticks, the
raw CANN folder ``PROF_000001``'s ``step_trace_*.json``).
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from typing import Any

import pytest
from raw_mindspore import legacy_cluster
from shared_samples import CLUSTER_OUTPUT, MINDINSIGHT, shared_sample
from widget_html import panel_words

from perfkit.format import time_text

pytestmark = pytest.mark.shared_samples

_PROF = f"{MINDINSIGHT}/PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def _board(name: str) -> Any:
    from perfkit.widgets.dashboard import Dashboard

    board = Dashboard(background_bytes=None)
    assert board.load_profile(str(shared_sample(name))), board.error
    return board


def _finding(board: Any, rule: str) -> Any:
    (f,) = [f for f in board.context.findings(board.profile) if f.rule == rule]
    return f


def test_the_stage_table_is_the_stage_findings() -> None:
    """Each stage's own work (msprof-analyze's ``Stage`` column: the step less the
    receive wait) is the median over the stage's ranks, the ranks its ``stage`` rows list;
    the table and the finding give the same times, and the slow stage's excess over the
    fast one (46.5 %) is their ratio."""
    path = shared_sample(CLUSTER_OUTPUT) / "cluster_analysis_output" / \
        "cluster_step_trace_time.csv"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    stages = [[int(r) for r in re.findall(r"\d+", row["Index"])]
              for row in rows if row["Type"] == "stage"]
    own = {int(row["Index"]): float(row["Stage"]) for row in rows if row["Type"] == "rank"}
    wait = {int(row["Index"]): float(row["Bubble"]) for row in rows if row["Type"] == "rank"}
    assert len(stages) == 2 and sorted(sum(stages, [])) == sorted(own)
    work = [statistics.median(own[r] for r in ranks) for ranks in stages]
    waits = [statistics.median(wait[r] for r in ranks) for ranks in stages]
    board = _board(CLUSTER_OUTPUT)
    f = _finding(board, "stage_imbalance")
    words = panel_words(board.select("Communication"))
    table = words.split("Pipeline stages: ")[1]
    cells = table.split("longer than the fastest stage (%) | ")[1].split(" | ")
    shown = [cells[i:i + 7] for i in range(0, 14, 7)]
    slow, fast = max(range(2), key=work.__getitem__), min(range(2), key=work.__getitem__)
    excess = work[slow] / work[fast] - 1
    assert f"Pipeline stage {slow} takes {100 * excess:.1f} % longer than stage {fast}" \
        in f.title
    for i, (ranks, us, waited) in enumerate(zip(stages, work, waits, strict=True)):
        stage, members, _step, own_ms, wait_ms, beyond_ms, longer = shown[i]
        assert int(stage) == i and members == ",".join(map(str, sorted(ranks)))
        assert float(own_ms) == pytest.approx(us / 1e3, rel=5e-3)
        assert float(wait_ms) == pytest.approx(waited / 1e3, abs=0.5)
        # the wait beyond the schedule's bubble: (pp − 1) / m = 1 / 2 of the stage's own
        # work (pp 2 from the stage rows; m unread here, so pp, the fewest a pipeline runs)
        assert float(beyond_ms) == pytest.approx(max(0.0, waited - us / 2) / 1e3, abs=0.5)
        assert float(longer.rstrip(" |")) == pytest.approx(100 * (us / work[fast] - 1), abs=0.05)
        assert f"stage {i} (ranks {members}) {time_text(us)}" in f.evidence


def test_the_overview_split_counts_the_legacy_step_interval() -> None:
    """``cluster_propose``: MindSpore's own step (computation + communication alone) leaves
    out the step trace's interval (from the previous step's end to the forward pass's
    start), which the data-loading finding counts; the Overview's split adds it as the wait
    before the forward pass, its share that of all ranks' and steps' intervals in the sum
    of both, and the finding's figure is each step's slowest rank's interval, averaged."""
    folder = shared_sample(f"{MINDINSIGHT}/cluster_propose")
    steps = legacy_cluster(folder)  # ms
    assert len(steps) == 4 and all(len(rank) == 5 for rank in steps.values())
    # the split leaves out step 1, a warm-up 13 times the median step, as the step time does
    rows = [s for rank in steps.values() for s in rank[1:]]
    share = sum(s["interval_ms"] for s in rows) / sum(
        s["interval_ms"] + s["computation_time"] + s["communication_alone_time"] for s in rows)
    board = _board(f"{MINDINSIGHT}/cluster_propose")
    words = panel_words(board.select("Overview"))
    shown = re.search(r"step interval, before the forward pass \(data, launch\) ([\d.]+) %",
                      words)
    assert shown and float(shown[1]) == pytest.approx(100 * share, abs=0.051)
    assert share > 0.002  # 0.8 to 2.1 ms of a 179 ms step after the first
    slowest = [max((steps[r][i] for r in steps), key=lambda s: s["total_ms"])
               for i in range(5)]
    f = _finding(board, "data_loading")
    assert f.ms_per_step == pytest.approx(statistics.mean(s["interval_ms"] for s in slowest),
                                          rel=1e-6)


def test_the_timeline_says_the_legacy_step_interval() -> None:
    """``wild/mi_run1`` (legacy MindSpore, one rank): the drawn step's interval, its
    ``fp_point`` less its ``start_point`` in the step trace (10 ns ticks), is said where
    the Timeline does not draw it, as the data-loading finding counts it."""
    board = _board("wild/mi_run1")
    f = _finding(board, "data_loading")
    words = panel_words(board.select("Timeline"))
    step = int(re.match(r"step (\d+): the median-duration step", words)[1])
    path = shared_sample("wild/mi_run1") / "profiler" / "step_trace_raw_1_detail_time.csv"
    with path.open(newline="") as fh:
        rows = {r["step_num"]: r for r in csv.DictReader(fh)}
    ticks = int(rows[str(step)]["fp_point"]) - int(rows[str(step)]["start_point"])
    assert ticks > 0
    assert (f"not drawn: the step trace's wait between steps, {time_text(ticks / 100)} "
            "(its step interval") in words
    intervals = [(int(r["fp_point"]) - int(r["start_point"])) / 100 for s, r in rows.items()
                 if s != "-"]
    assert f.ms_per_step == pytest.approx(statistics.mean(intervals) / 1e3, rel=1e-6)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_timeline_says_the_waits_of_steps_it_cannot_draw() -> None:
    """``PROF_000001`` (raw CANN, 10 iterations, the device tasks of the first only): the
    Timeline draws iteration 1, which waits for nothing, and says the longest wait of the
    others, the gap from an iteration's end to the next one's start in its
    ``step_trace_*.json`` (at most its Data_aug Bound), the finding's longest."""
    timeline = shared_sample(_PROF) / "device_0" / "timeline"
    (path,) = timeline.glob("step_trace_*.json")
    events = json.loads(path.read_text())
    its = sorted((e for e in events if e.get("cat") == "Iteration Time"),
                 key=lambda e: e["ts"])
    bound = {int(e["name"].rsplit(" ", 1)[1]): e["args"]["Data_aug Bound(us)"]
             for e in events if e.get("cat") == "Data_aug Bound" and e["ph"] == "t"}
    waits = {b["args"]["Iteration ID"]: min(b["ts"] - (a["ts"] + a["dur"]),
                                           bound[b["args"]["Iteration ID"]])
             for a, b in zip(its[:-1], its[1:], strict=True)}
    step, longest = max(waits.items(), key=lambda kv: kv[1])
    board = _board(_PROF)
    f = _finding(board, "data_loading")
    words = panel_words(board.select("Timeline"))
    assert words.startswith("step 1: ")
    assert (f"no wait before the step's first device task in step 1; other steps wait up "
            f"to {time_text(longest)} before theirs (step {step}), not drawn: the device "
            "tasks of that step were not recorded") in words
    assert f"longest: step {step}, {time_text(longest)}" in f.evidence
