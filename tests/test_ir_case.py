"""Notebook 06's IR case: which dump and patterns it checks, and the patterns it suggests.

The suggested patterns are appended as MindFormers reads ``select_recompute`` in its three
forms (a list of patterns, a dict of pattern to per-stage counts, ``True`` for its
defaults); the expected values are written out by hand."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from perfkit.widgets.ir_case import (
    BUNDLED_PATTERNS,
    bundled_fixed_config,
    ir_case,
    with_suggested,
)

ROOT = Path(__file__).resolve().parents[1]
DIAGNOSIS = pd.DataFrame({"suggested_pattern": ["a\\.reshape", None, "a\\.reshape", "b"]})


def test_suggested_patterns_join_each_form_of_select_recompute() -> None:
    assert with_suggested({"select_recompute": ["x", "b"]}, DIAGNOSIS)["select_recompute"] \
        == ["x", "b", "a\\.reshape"]
    per_stage = {"recompute": [1, 0], "select_recompute": {"x": [4, 0], "y": [2, 3]}}
    out = with_suggested(per_stage, DIAGNOSIS)
    assert out["select_recompute"] == {"x": [4, 0], "y": [2, 3], "a\\.reshape": [4, 3],
                                       "b": [4, 3]}
    assert out["recompute"] == [1, 0] and per_stage["select_recompute"] == {
        "x": [4, 0], "y": [2, 3]}  # the input is left as it was
    assert with_suggested({"select_recompute": True}, DIAGNOSIS)["select_recompute"] == [
        "a\\.reshape", "b"]


def test_the_case_says_whose_dump_and_patterns() -> None:
    bundled = ir_case(ROOT / "data" / "ir" / "silu_mul.ir")
    assert bundled.bundled and dict(bundled.recompute_config) == dict(BUNDLED_PATTERNS)
    assert bundled.sentence.startswith("Checked: the bundled example silu_mul.ir")
    yaml_file = ROOT / "tests" / "data" / "configs" / "llama2_13b_pp2_select.yaml"
    mine = ir_case(ROOT / "data" / "ir" / "control.ir.gz", None, [str(yaml_file)])
    assert not mine.bundled
    assert mine.recompute_config["select_recompute"] == [
        "feed_forward\\.mul", "feed_forward\\.w1\\.activation", "feed_forward\\.w1\\.reshape",
        "feed_forward\\.w2\\.reshape"]  # the YAML's line 25, as written there
    assert mine.sentence.endswith("against the recompute_config of "
                                  "llama2_13b_pp2_select.yaml.")


def test_the_bundled_second_dump_gets_the_reshape_patterns() -> None:
    """The guide's fix: the two Reshape neighbours added (notebook 06, section 3)."""
    fixed = bundled_fixed_config()["select_recompute"]
    assert fixed[:2] == BUNDLED_PATTERNS["select_recompute"]
    assert len(fixed) == 4 and all("reshape" in p.lower() for p in fixed[2:])

