"""The task sequences read beside the operator rules count only the steps whose device tasks
were recorded in full, as the rules do: the Operators tab's roofline and unfused chains, and
the attention passes of :func:`perfkit.analysis.recompute_evidence`. Checked against the raw
``kernel_details.csv`` and ``step_trace_time.csv`` (read here with csv, no perfkit code).

- ``ascend/msinsight-pt-gpt3-old`` keeps 21 and 22 tasks of step 2, 16.8 % and 5.1 % of its
  busy time; rank 0's hold 4 forward attention tasks (FlashAttentionScore) and no backward.
- ``ascend/msinsight-pt-level1`` with rank 1's list cut to its last 20 tasks: rank 0's step
  is recorded in full, rank 1's not. The roofline summed rank 1's fragment into rank 0's
  operators (Conv2DBackpropFilter: 628.7 µs, rank 0's own 313.9 µs) and the unfused copies
  counted 9 per rank (the median of rank 0's 11 and the fragment's 7).
- a one-rank export of two steps: step 19 of msprof-analyze's ``compute_advice_v2`` (4
  forward and 4 backward attention tasks, recorded in full: a fifth forward row repeats
  task 60763, :mod:`perfkit.io.ascend.repeated_tasks`) and gpt3-old's rank 0 step 2 (4 forward,
  no backward, cut short). Counted whole, 8 forward over 4 backward read as full
  recompute; step 19 alone is 4 over 4, none.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

import pytest
from raw_ascend import csv_rows, distinct_tasks, keep_last_tasks, task_union_us
from shared_samples import PT_GPT3_OLD, PT_LEVEL1, sample, writable_copy
from widget_html import panel_html

import perfkit as pk
from perfkit.widgets import tab_panel

pytestmark = pytest.mark.shared_samples
OLD = sample(PT_GPT3_OLD)
LEVEL1 = sample(PT_LEVEL1)
ADVICE = sample("ascend/msprof-analyze-tests/compute_advice_v2/kernel_details.csv")
#: Tasks the cut copy of rank 1 keeps (its last).
_KEEP = 20
_FWD, _BWD = "FlashAttentionScore", "FlashAttentionScoreGrad"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))




def _busy_us(step: dict[str, str]) -> float:
    """A step trace row's busy time: Computing + Communication(Not Overlapped)."""
    return float(step["Computing"]) + float(step["Communication(Not Overlapped)"])


def _recorded(out: Path) -> dict[str, bool]:
    """Per step id of an ASCEND_PROFILER_OUTPUT: whether its tasks cover half its busy
    time or more (a cut list covers far less: 16.8 % and 5.1 % on gpt3-old)."""
    tasks = defaultdict(list)
    for r in csv_rows(out / "kernel_details.csv"):
        tasks[r["Step Id"]].append(r)
    return {s["Step"]: task_union_us(tasks[s["Step"]]) >= 0.5 * _busy_us(s)
            for s in csv_rows(out / "step_trace_time.csv")}


def test_gpt3_old_counts_no_attention_pass_of_its_fragments():
    out = OLD / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    assert _recorded(out) == {"2": False}
    types = [r["Type"] for r in csv_rows(out / "kernel_details.csv")]
    assert types.count(_FWD) > 0 and types.count(_BWD) == 0  # a forward without backward
    seen = pk.analysis.recompute_evidence(pk.load(OLD, cache=False, progress=False))
    assert seen.empty
    assert "attention passes counted over the steps whose device tasks were recorded in " \
           "full: no step of 1" in seen.attrs["notes"]


def _two_steps(tmp_path: Path) -> Path:
    """gpt3-old's rank 0 with compute_advice_v2's step 19 added: its tasks to
    kernel_details.csv, and to step_trace_time.csv a row whose Computing is the time its
    tasks cover (what the step trace records of a step recorded in full)."""
    root = writable_copy(OLD / "test_rank_0", tmp_path / "two_steps" / "test_rank_0")
    out = root / "ASCEND_PROFILER_OUTPUT"
    old, extra = csv_rows(out / "kernel_details.csv"), csv_rows(ADVICE)
    heads = list(old[0]) + [h for h in extra[0] if h not in old[0]]
    with (out / "kernel_details.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, heads, restval="N/A")
        w.writeheader()
        w.writerows(old + extra)
    trace = csv_rows(out / "step_trace_time.csv")
    busy = task_union_us(extra)
    row = {h: "0" for h in trace[0]} | {"Step": extra[0]["Step Id"], "Computing": str(busy),
                                         "Stage": str(busy)}
    with (out / "step_trace_time.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(trace[0]))
        w.writeheader()
        w.writerows([*trace, row])
    return root.parent


def test_attention_passes_are_counted_over_the_steps_recorded_in_full(tmp_path):
    folder = _two_steps(tmp_path)
    out = folder / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    recorded = _recorded(out)
    assert recorded == {"2": False, "19": True}
    fwd = bwd = every_fwd = 0
    for r in distinct_tasks(csv_rows(out / "kernel_details.csv")):  # each task once
        every_fwd += r["Type"] == _FWD
        if recorded[r["Step Id"]]:
            fwd += r["Type"] == _FWD
            bwd += r["Type"] == _BWD
    assert (fwd, bwd) == (4, 4) and every_fwd == 8  # the fragment's 4 forwards left out
    seen = pk.analysis.recompute_evidence(pk.load(folder, cache=False, progress=False))
    (row,) = seen.itertuples()
    assert (row.forward, row.backward) == (fwd, bwd)
    assert row.ratio == pytest.approx(fwd / bwd)
    assert row.recompute == "none"  # 8 / 4 read as full recompute
    assert row.recompute_share == pytest.approx((fwd / bwd - 1) / (fwd / bwd + 2))
    assert any("recorded in full: step 19 of 2" in n for n in seen.attrs["notes"])


def _with_rank1_cut(tmp_path: Path) -> Path:
    root = writable_copy(LEVEL1, tmp_path / "level1")
    path = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    keep_last_tasks(path, _KEEP)
    return root


def _roofline_rows(panel) -> list[dict]:
    """The operator points the Operators tab's roofline chart ships to the browser."""
    spec = next(c.chart.to_dict() for c in panel.charts
                if "Roofline" in str(c.chart.to_dict().get("title", "")))
    return next(rows for rows in spec["datasets"].values() if rows and "key" in rows[0])


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_operators_tab_roofline_and_unfused_chains_are_the_recorded_steps(tmp_path):
    root = _with_rank1_cut(tmp_path)
    outs = {r: root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" for r in (0, 1)}
    assert _recorded(outs[0]) == {"50": True} and _recorded(outs[1]) == {"50": False}
    # rank 0's time per operator type and input shapes, the tasks of its recorded step
    want: dict[tuple[str, str], float] = defaultdict(float)
    for r in csv_rows(outs[0] / "kernel_details.csv"):
        want[r["Type"], r["Input Shapes"].strip('"')] += float(r["Duration(us)"])
    cut = csv_rows(outs[1] / "kernel_details.csv")
    assert any((r["Type"], r["Input Shapes"].strip('"')) in want for r in cut)

    panel = tab_panel("Operators", str(root))
    points = _roofline_rows(panel)
    assert points
    for p in points:
        assert p["total_us"] == pytest.approx(want[p["key"], p["input_shapes"]], rel=1e-9), p
    html = panel_html(panel)
    assert "The roofline and the unfused chains are over the steps whose device tasks were " \
           "recorded in full (step 50 of 1 on rank 0; no step of 1 on rank 1)" in html
    # the unfused copies (TensorMove) of rank 0's step alone, not the median with the cut
    # rank's fragment
    copies = [r for r in csv_rows(outs[0] / "kernel_details.csv") if r["Type"] == "TensorMove"]
    table = next(t for t in re.findall(r"<table.*?</table>", html, flags=re.S)
                 if "Unfused chains" in t)
    heads = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)]
    row = next(tr for tr in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
               if ">copies<" in tr)
    cells = dict(zip(heads, [re.sub(r"<[^>]+>", "", c)
                             for c in re.findall(r"<td[^>]*>.*?</td>", row)], strict=True))
    assert int(cells["occurrences per rank"]) == len(copies)
    assert cells["min (µs)"] == cells["max (µs)"] == str(round(
        sum(float(r["Duration(us)"]) for r in copies)))  # one rank's: rank 0's
    assert cells["worst rank"] == "0"
    assert sum(r["Type"] == "TensorMove" for r in cut) != len(copies)
