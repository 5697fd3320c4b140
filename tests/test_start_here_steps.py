"""``00_start_here``'s chart of the step per rank and its table of steps over the ranks
give the step time the headline and the dashboard give (the device span and the wait
before it), and no column of dashes: a Kineto trace has no pipeline bubble, a legacy
MindSpore step trace no computing / communication / free split but its phases.

The notebook's own cells run here in one namespace (no kernel): the imports, ``pk.load``,
``A.step_breakdown`` with its chart and the table, with ``PROFILE`` pointed at a real
profile.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from raw_kineto import raw_walls
from shared_samples import KINETO_TRACES, sample

pytestmark = pytest.mark.shared_samples

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "00_start_here.ipynb"
CAPTION = "Steps over the ranks"


def _steps_table(profile: Path) -> tuple[Any, Any, dict]:
    """The notebook's steps table on ``profile``: the frame it is given, the
    :class:`perfkit.tables.Table` it makes, and the chart of the steps (its spec)."""
    cells = ["".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
             if c["cell_type"] == "code"]
    ns: dict[str, Any] = {}
    exec(cells[0], ns)  # the parameters
    ns["PROFILE"] = str(profile)
    for code in cells[1:]:
        if code.startswith(("import perfkit", "prof = pk.load")):
            exec(code, ns)
            if "table" in ns and "_made" not in ns:  # keep the frame each table is given
                ns["_made"] = ns["table"]
                ns["table"] = lambda frame, *a, **k: (frame, ns["_made"](frame, *a, **k))
        elif code.startswith("steps = A.step_breakdown"):
            exec(code.replace("C.svg(", "_chart = ("), ns)  # the chart, not its SVG
        elif CAPTION in code:
            head, _, rest = code.rpartition("table(")
            exec(head + "_table = table(" + rest, ns)
            return (*ns["_table"], ns["_chart"].to_dict())
    raise AssertionError(f"no cell of {NOTEBOOK.name} makes the table {CAPTION!r}")


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
@pytest.mark.parametrize("name", ["k_resnet50_nw0", "tl_qwen_h100"])
def test_the_step_time_is_the_headline_s_with_the_wait(name: str) -> None:
    trace = sample(KINETO_TRACES[name])
    walls = raw_walls(trace)  # step -> µs: the device window, its idle tail, the wait
    frame, tab, chart = _steps_table(trace.parent)
    text = tab.text
    step_col = next(c for c in frame.columns if c.startswith("step_median"))
    assert len(frame) == len(walls)
    for step, wall in zip(frame["step"], frame[step_col], strict=True):
        assert float(wall) == pytest.approx(float(walls[int(step)]), rel=1e-6), step
    assert not any(text[c].eq("–").all() for c in text.columns), text.columns.tolist()
    # the chart stacks the same step: its parts add up to the wall time of each step
    (rows,) = chart["datasets"].values()
    stacked: dict[int, float] = {}
    for row in rows:
        stacked[int(row["step"])] = stacked.get(int(row["step"]), 0.0) + row["ms"] * 1e3
    assert stacked == pytest.approx({s: float(w) for s, w in walls.items()}, rel=1e-6)


def test_a_legacy_step_trace_gives_its_phases_not_dashes() -> None:
    folder = sample("wild/mi_run1")
    with open(folder / "profiler" / "step_trace_raw_1_detail_time.csv", newline="") as fh:
        rows = {int(r["step_num"]): r for r in csv.DictReader(fh) if r["step_num"].isdigit()}
    frame, tab, chart = _steps_table(folder)
    text = tab.text
    assert not any(text[c].eq("–").all() for c in text.columns), text.columns.tolist()
    headers = " ".join(text.columns)
    assert "forward and backward" in headers and "computing" not in headers
    (bars,) = chart["datasets"].values()
    assert {r["part"] for r in bars} == {"step interval (waiting for data)",
                                         "forward and backward",
                                         "step tail (gradients, update)"}
    for _, row in frame.iterrows():
        raw = rows[int(row["step"])]
        assert row["fp_and_bp_share"] == pytest.approx(
            int(raw["fp_and_bp"]) / int(raw["total"]), abs=1e-6)
        assert row["step_median_us"] == pytest.approx(int(raw["total"]) / 100, rel=1e-6)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_step_chart_of_every_notebook_stacks_the_wait_before_the_first_task() -> None:
    # a data-loading run: the wait before each step's first kernel is a large part of it
    import perfkit as pk
    from perfkit import analysis as A
    from perfkit.widgets import step_chart

    trace = sample(KINETO_TRACES["k_resnet50_nw0"])
    walls = raw_walls(trace)
    (rows,) = step_chart(A.step_breakdown(pk.load(trace.parent, progress=False))
                         ).to_dict()["datasets"].values()
    stacked: dict[int, float] = {}
    for row in rows:
        stacked[int(row["step"])] = stacked.get(int(row["step"]), 0.0) + row["ms"] * 1e3
    assert stacked == pytest.approx({s: float(w) for s, w in walls.items()}, rel=1e-6)
    # the guided notebooks draw the step per rank with it, none from the bare breakdown
    # (which stacks computing, communication and free only)
    for nb in sorted(NOTEBOOK.parent.glob("*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                       if c["cell_type"] == "code")
        assert "step_breakdown_chart(A.step_breakdown(" not in code, nb.name
        assert "step_breakdown_chart(" not in code or nb.name == "dashboard.ipynb", nb.name
