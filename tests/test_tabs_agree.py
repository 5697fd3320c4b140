"""The same quantity on two tabs is one figure: what turning the full recompute off saves
per step is the same on the Advice tab (the recompute finding's ms at stake) and on the
Recompute tab (its sentence, and the difference of its table's rows for the profiled
layout and for no recompute).

The profile is the bundled simulated Llama2-13B baseline (16 ranks, full recompute of
every layer, memory at 7.5 % of 64 GiB: room to spare). Before, the Advice tab put 216 ms
at stake (a quarter of the computation, from the attention counts) beside the Recompute
tab's 177 ms.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from widget_html import panel_html

from perfkit.format import time_text
from perfkit.widgets import dashboard

BASELINE = Path(__file__).resolve().parents[1] / "data/simulated/llama2-13b-baseline-dp16"


@pytest.fixture(scope="module")
def board():
    return dashboard(str(BASELINE), background_bytes=None)


def test_the_recompute_saving_is_one_figure_on_advice_and_recompute(board) -> None:
    board.select("Recompute")
    panel = board.panels["Recompute"]
    rows = panel.tradeoff.set_index("recompute")
    assert bool(rows.loc["full", "profiled"])
    table_saving_ms = 1e3 * (rows.loc["full", "step_s"] - rows.loc["none", "step_s"])
    assert table_saving_ms > 100  # a real change: a sixth of the step or so

    board.select("Advice")
    found = board.context.findings(board.profile)
    (rc,) = [f for f in found if f.rule == "recompute_headroom"]
    assert rc.ms_per_step == pytest.approx(table_saving_ms, rel=1e-9)
    # both tabs state it in the same words of the one formatting module
    shown = time_text(table_saving_ms * 1e3)
    text = re.sub(r"<[^>]+>", " ", panel_html(panel))
    assert f"Turning recompute off saves {shown} per step" in text
    assert f"saves {shown} per step (the Recompute tab's figure)" in rc.evidence
    # and no other time per step beside it in the finding (the 216 ms it gave before)
    assert re.findall(r"[\d.,]+ (?:ms|s) per step", rc.evidence) == [f"{shown} per step"]
