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
    typed each in. Picking a row sets the knobs to it and predicts the row's own figures,
    the settings without a knob kept and said, until a knob is changed."""
    from perfkit.widgets import dashboard
    from perfkit.widgets.planner_layout import NO_PICK, NO_PICK_TEXT

    board = dashboard("simulated/llama2-13b-baseline-dp16")
    board.select("Planner")
    panel = board.panels["Planner"]
    box, best, job = panel.chosen, panel.best, panel.current
    ranked = best[~best["profiled"]]
    assert len(ranked) >= 3 and not box.pick.disabled
    assert box.pick.value == NO_PICK and box.pick.label == NO_PICK_TEXT  # says what it is
    offered = [value for _, value in box.pick.options if value != NO_PICK]
    assert len(offered) == len(ranked)
    hidden_seen = False
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
        # the step and band come first: a cut label still tells rows apart
        assert box.pick.label == f"rank {int(row['rank'])}: {row['step_band']}, " \
                                 f"{row['changes']}"
        said = _said(box)
        assert said.startswith(f"dp {layout.dp} × tp {layout.tp} × pp {layout.pp}")
        assert "False" not in said and "None" not in said
        # the button, pressed without an edit, predicts the same layout
        box.button.click()
        assert box.prediction.step_s == pytest.approx(row["step_s"], rel=1e-9)
        if layout.optimizer_shard != job.parallel.optimizer_shard:
            hidden_seen = True
            assert f"optimizer shard {job.parallel.optimizer_shard} → " \
                   f"{layout.optimizer_shard}" in box.kept_note.value
    assert hidden_seen  # the sample's ranking has such a row
    # a knob changed by hand: no longer the picked row, and the run's other settings
    box.pick.value = offered[0]
    box.knobs["dp"].value = box.knobs["dp"].value // 2 or 1
    assert box.pick.value == NO_PICK and box.kept == {} and box.kept_note.value == ""
    assert box.said.value == "" and box.prediction is None  # the line was the picked row's
    box.pick.value = offered[0]  # the same row again is picked again
    assert box.prediction.step_s == pytest.approx(ranked["step_s"].iloc[0], rel=1e-9)
    # a new search (assumptions edited) drops the old line; opening a profile clears all
    box.offer(None)
    assert box.said.value == "" and box.prediction is None and box.pick.disabled
    panel.show(panel.profile)
    assert box.pick.disabled and box.offered == {} and box.said.value == ""
    assert all(w.value == 0 for w in box.knobs.values())
    assert box.recompute.value == "the run's"
