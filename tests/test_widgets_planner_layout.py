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


@pytest.mark.slow  # the whole dashboard built: over about 5 s on a busy 2-core machine
def test_a_ranked_layout_picked_is_predicted_as_its_row_says() -> None:
    """A walk: the ranking offered no way to see one of its layouts' prediction; a user
    typed each in. Picking a row sets the knobs to it and predicts the row's own figures."""
    from perfkit.widgets import dashboard

    board = dashboard("simulated/llama2-13b-baseline-dp16")
    board.select("Planner")
    panel = board.panels["Planner"]
    box, best = panel.chosen, panel.best
    ranked = best[~best["profiled"]]
    assert len(ranked) >= 3 and not box.pick.disabled
    offered = [value for _, value in box.pick.options if value is not None]
    assert len(offered) == len(ranked)
    for value, (_, row) in zip(offered, ranked.iterrows(), strict=True):
        box.pick.value = value
        pred, layout = box.prediction, row["parallel"]
        assert pred.step_s == pytest.approx(row["step_s"], rel=1e-9)
        assert (pred.low_s, pred.high_s) == pytest.approx((row["low_s"], row["high_s"]),
                                                           rel=1e-9)
        assert pred.memory_bytes == pytest.approx(row["memory_bytes"], rel=1e-9)
        assert pred.parallel == layout
        assert [box.knobs[k].value for k in ("dp", "tp", "pp", "micro_batch_size",
                                             "num_micro_batches")] == [
            layout.dp, layout.tp, layout.pp, layout.micro_batch_size,
            layout.num_micro_batches]
        assert box.recompute.value == layout.recompute
        label = dict((v, t) for t, v in box.pick.options)[value]
        assert label.startswith(f"rank {int(row['rank'])}: {row['changes']}")
        assert _said(box).startswith(f"dp {layout.dp} × tp {layout.tp} × pp {layout.pp}")
    # opening another profile empties the picker
    panel.show(panel.profile)
    assert box.pick.disabled and box.offered == {}
