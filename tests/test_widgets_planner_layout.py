"""The Planner's "Predict a layout" box predicts a typed layout as ``perfkit plan`` does.

A new user's walk: the dashboard had no dp/tp/pp box, so ``perfkit plan PATH --dp 8
--pp 2`` could not be reproduced there (the ranking's nearest row was another layout).
"""

from __future__ import annotations

import html
import json
import re

import pytest

from perfkit import cli

SAMPLE = "sample:llama2-13b-baseline-dp16"


def _said(box) -> str:
    return " ".join(html.unescape(re.sub(r"<style>.*?</style>|<[^>]+>", " ",
                                         box.said.value)).split())


@pytest.mark.slow  # the whole dashboard built: over about 5 s on a busy 2-core machine
def test_a_typed_layout_is_predicted_as_the_command_predicts_it(capsys) -> None:
    from perfkit.widgets import dashboard

    board = dashboard("simulated/llama2-13b-baseline-dp16")
    board.select("Planner")
    box = board.panels["Planner"].chosen
    box.knobs["dp"].value, box.knobs["pp"].value = 8, 2
    box.button.click()
    assert cli.main(["plan", SAMPLE, "--dp", "8", "--pp", "2", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    pred = box.prediction
    assert pred.step_s * 1e3 == pytest.approx(answer["step_ms"], rel=1e-9)
    assert (pred.low_s * 1e3, pred.high_s * 1e3) == pytest.approx(
        (answer["low_ms"], answer["high_ms"]), rel=1e-9)
    said = _said(box)
    assert said.startswith("dp 8 × tp 1 × pp 2, micro-batch 2 × 2, recompute full: step")
    assert "changes from the run: dp 16 → 8, pp 1 → 2" in said
    # a layout that breaks a rule says which, and predicts nothing
    box.knobs["tp"].value = 3
    box.button.click()
    assert box.prediction is None and "tp" in _said(box) and "step" not in _said(box)
