"""``perfkit plan`` and the Planner tab fit a profile alike (one calibration, closed).

A new user's walk found the two disagree on the same run: on the H100 layouts folder the
command said the model gives the run 96.1 ms, "outside the band", where the tab said
202 ms against the measured 191 ms, "inside the band" — the command's fit was not closed.
The same folder holds four separate runs: both now say so where the fit is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import cli
from perfkit.widgets.prediction_fit import fit_job

H100_LAYOUTS = Path(__file__).resolve().parents[1] / "data" / "kineto_llama_layouts_h100"


@pytest.mark.slow  # two calibrations of a 4-rank H100 folder: about 3 s
def test_the_command_predicts_the_profiled_layout_as_the_tab(
        capsys: pytest.CaptureFixture[str]) -> None:
    profile = pk.load(H100_LAYOUTS, progress=False)
    tab = fit_job(profile, pk.infer_job(profile))
    assert cli.main(["plan", str(H100_LAYOUTS), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["step_ms"] == pytest.approx(tab.prediction.step_s * 1e3, rel=1e-9)
    assert (answer["low_ms"], answer["high_ms"]) == pytest.approx(
        (tab.prediction.low_s * 1e3, tab.prediction.high_s * 1e3), rel=1e-9)
    cal = answer["calibration"]
    assert cal["closed"] and cal["closed_step_ms"] == pytest.approx(answer["step_ms"])
    inside = answer["low_ms"] <= cal["measured_step_ms"] <= answer["high_ms"]
    assert cli.main(["plan", str(H100_LAYOUTS)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("inside the band" in text) is inside and ("outside the band" in text) is not inside
    # the four traces share no step number nor time: the fit says it mixes runs
    warned = "These ranks look like 4 separate runs"
    assert cal["notes"][0].startswith(warned) and warned in text
    assert tab.sentence.startswith(f"⚠ {warned}")
