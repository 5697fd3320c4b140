"""Notebook 06 and the dashboard's Recompute tab show the same trade-off for a profile.

Both predict each recompute mode with the Planner's model calibrated on the profile
(:func:`perfkit.widgets.prediction.fit_job`, :func:`~perfkit.widgets.prediction.
recompute_modes`). The notebook is executed as stored (its ``PROFILE``), one cell added
at the end to print its ``tradeoff`` frame; the dashboard is opened on the same profile
and its Recompute tab drawn: the two frames, each made by its own public path, must be
equal, and so must the sentence that names the static-memory scheme.
"""

from __future__ import annotations

import io
import re
from html import unescape
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from widget_html import panel_html

import perfkit as pk
from perfkit import report
from perfkit.plan.predict import STYLE_NOTE
from perfkit.widgets import dashboard
from perfkit.widgets.prediction import RECOMPUTE_COLUMNS, fit_job, recompute_modes

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "06_recompute.ipynb"
#: Printed by the cell the test adds, around the frame's JSON and the sentences.
MARK = "=== perfkit test ==="


def _stored_profile() -> str:
    """The notebook's ``PROFILE`` parameter, as stored."""
    first = nbformat.read(NOTEBOOK, as_version=4).cells[0].source
    found = re.search(r"^PROFILE\s*=\s*[\"']([^\"']+)[\"']", first, flags=re.M)
    assert found, "notebook 06 has no PROFILE parameter"
    return found.group(1)


def _notebook_outputs() -> tuple[pd.DataFrame, str]:
    """Run notebook 06 as stored; its ``tradeoff`` frame and the scheme sentence it
    printed."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        f"print({MARK!r})\n"
        "print(tradeoff.to_json(orient='split', double_precision=15))\n"
        f"print({MARK!r})\n"
        "print(scheme_sentence(fit, job))"))
    client = report.notebook_client(nb, cwd=NOTEBOOK.parent, timeout=240, transport="ipc")
    client.execute()
    text = "".join(out.get("text", "") for out in nb.cells[-1].outputs
                   if out.output_type == "stream")
    _, frame, sentence = text.split(MARK + "\n")
    return pd.read_json(io.StringIO(frame), orient="split"), sentence.strip()


@pytest.mark.slow
@pytest.mark.notebooks
def test_notebook_06_shows_the_recompute_tabs_figures() -> None:
    shown, sentence = _notebook_outputs()
    board = dashboard(_stored_profile())
    assert board.error is None
    panel = board.select("Recompute")
    tab = panel.tradeoff
    assert tab is not None, "the Recompute tab drew no trade-off"
    assert list(shown.columns) == list(RECOMPUTE_COLUMNS) == list(tab.columns)
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), tab.reset_index(drop=True),
                                  check_dtype=False, rtol=1e-12)
    # the profiled layout's row is the Planner's prediction, in both
    own = shown[shown["profiled"]].iloc[0]
    assert own["step_s"] == pytest.approx(panel.fit.prediction.step_s, rel=1e-12)
    # the page names the static-memory scheme in the notebook's words
    assert "scheme" in sentence and sentence in unescape(panel_html(panel))


@pytest.mark.slow
def test_each_mode_trades_memory_for_time_on_the_bundled_sample() -> None:
    profile = pk.load(_stored_profile())
    job = pk.infer_job(profile)
    fit = fit_job(profile, job)
    rows = recompute_modes(fit, job).set_index("recompute")
    assert list(rows.index)[:3] == ["none", "selective", "full"]
    assert rows.loc["none", "activation_GiB"] > rows.loc["selective", "activation_GiB"] \
        > rows.loc["full", "activation_GiB"]
    assert rows.loc["full", "step_s"] > rows.loc["none", "step_s"]
    # static memory is the same in every mode: memory minus activations
    static = rows["memory_GiB"] - rows["activation_GiB"]
    assert static.to_numpy() == pytest.approx([fit.prediction.static_bytes / 2**30] * len(rows))


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_the_full_row_says_which_recompute_style_it_assumed() -> None:
    """A profile without recompute cannot show what the next run's full recompute reruns:
    the page says the full row assumed the whole forward, and gives the step of rerunning
    only what the backward reads, which is less (docs/planner.md)."""
    trace = ROOT / "tests" / "data" / "kineto_llama_layouts_h100" / "a.pt.trace.json.gz"
    board = dashboard(str(trace))
    assert board.error is None
    panel = board.select("Recompute")
    notes = panel.tradeoff.attrs["notes"]
    assert len(notes) == 1 and notes[0].startswith(STYLE_NOTE)
    assert notes[0] in unescape(panel_html(panel))
    full = panel.tradeoff.set_index("recompute").loc["full", "step_s"]
    needed_ms = float(re.search(r"gives ([\d,.]+) ms", notes[0]).group(1).replace(",", ""))
    assert 0.8 * full * 1e3 < needed_ms < full * 1e3
