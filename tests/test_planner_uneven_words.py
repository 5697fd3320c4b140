"""How the Planner words a layout whose stages the layers do not divide (a browser walk:
the search ranked 40 layers on 16 stages and nothing on the page said how they split), a
band whose lower end is 0, and the fields of a prediction's changes."""

from __future__ import annotations

import dataclasses

import pytest

import perfkit as pk
from perfkit import plan
from perfkit.calc.pipeline import split_layers
from perfkit.widgets.planner_layout import prediction_line
from perfkit.widgets.planner_words import change_words, stages_text

LLAMA13 = pk.ModelSpec.preset("llama2-13b")  # 40 layers
NPU = pk.Hardware.preset("ascend-910b")
#: torchtitan's split of 40 layers on 16 ranks, by hand: 40 + 2 effective layers, 2 per
#: rank and one more on the first 10; the first and last rank one fewer.
BY_HAND = (2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 1)


def test_the_search_says_each_uneven_split() -> None:
    assert sum(BY_HAND) == 40
    space = plan.SearchSpace(tp=(1,), pp=(8, 16), cp=(1,), micro_batch_size=(1,),
                             vpp=(1,), recompute=("full",), sequence_parallel=(False,),
                             optimizer_shard=("off",))
    frame = plan.search(LLAMA13, NPU, 16, 64, space=space, include_rejected=True)
    by_pp = dict(zip(frame["pp"], frame["stage_layers"], strict=True))
    assert by_pp == {8: "", 16: ",".join(map(str, BY_HAND))}  # 40 / 8 is even


def test_words_of_a_split_and_of_changes() -> None:
    assert stages_text("10,11,10,9") == ", stages of 10, 11, 10, 9 layers"
    assert stages_text((15, 16)) == ", stages of 15, 16 layers"
    assert stages_text("") == stages_text(None) == stages_text(float("nan")) == ""
    assert change_words("micro_batch_size 2 → 1") == "micro-batch 2 → 1"
    assert change_words("num_micro_batches 1 → 16") == "micro-batches 1 → 16"
    assert change_words("devices 16 → 32") == "devices 16 → 32"  # not a field: as it is
    # Python's values said in words (a walk read "sequence parallel False → True")
    assert change_words("sequence_parallel False → True") == "sequence parallel off → on"
    assert change_words("recompute_layers None → 2") == \
        "fully recomputed layers per stage none → 2"
    assert change_words("optimizer_shard 16 → 8") == "optimizer shard 16 → 8"


def test_a_prediction_of_uneven_stages_says_them_and_a_band_from_zero_says_so() -> None:
    par = pk.ParallelConfig(dp=1, pp=16, num_micro_batches=64, recompute="full")
    pred = plan.predict(None, LLAMA13, par, NPU)
    line = prediction_line(pred)
    assert ", stages of " + ", ".join(map(str, BY_HAND)) + " layers:" in line
    assert "band " in line and " – " in line
    wide = prediction_line(dataclasses.replace(pred, low_s=0.0))
    assert "band up to " in wide and "0 µs" not in wide


def test_a_split_that_leaves_a_stage_empty_names_pp_and_vpp() -> None:
    """Entered on the Planner: pp 2, vpp 3 on 8 layers said "6 stages leave the last
    without a decoder layer (got 2)", blaming pp alone."""
    with pytest.raises(pk.PerfkitError) as err:
        split_layers(8, 2, 3)
    said = str(err.value)
    assert "pp × vpp = 2 × 3 = 6 stages" in said
    assert "the embedding and head counted as 1 and 1" in said


def test_a_ranked_row_whose_band_reaches_zero_reads_up_to() -> None:
    from perfkit.widgets.prediction_ranking import band_text

    row = {"step_s": 2.33, "low_s": 0.0, "high_s": 11.0}
    assert band_text(row) == "2.33 s (up to 11.0 s)"
    assert band_text({**row, "low_s": 2.0}) == "2.33 s (2.00 s – 11.0 s)"


def test_a_band_reaching_zero_reads_up_to_everywhere() -> None:
    # a walk read "band 0 µs – 14.4 s" in the Planner's first line and "up to 9.25 s" in
    # its table for the same kind of band
    from perfkit.format import band_range_text

    assert band_range_text(0.0, 14.4e6) == "up to 14.4 s"
    assert band_range_text(-5.0, 14.4e6) == "up to 14.4 s"
    assert band_range_text(1.15e6, 1.27e6) == "1.15 s – 1.27 s"
    assert band_range_text(None, 2e3) == "up to 2.00 ms"
    assert band_range_text(1.0, None) == "–"
