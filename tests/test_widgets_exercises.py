"""perfkit.widgets.exercises: the check button marks right and wrong answers."""

from __future__ import annotations

from pathlib import Path

import ipywidgets as W
import pytest

import perfkit as pk
from perfkit.analysis import recompute_check
from perfkit.errors import InvalidArgumentError
from perfkit.widgets import bundled_ir, bundled_profile
from perfkit.widgets.exercises import (
    Exercise,
    missing_patterns,
    pattern_options,
    rank_options,
    slow_rank_answer,
)

__all__: list[str] = []

SELECT = {"recompute": [1],
          "select_recompute": [r"feed_forward\.mul", r"feed_forward\.w1\.activation"]}


def _click(exercise: Exercise) -> None:
    exercise.button.click()


def test_numeric_answer_checked_by_the_button() -> None:
    ex = Exercise("Bubble fraction of pp=4, m=8?", pk.bubble_fraction(4, 8),
                  explanation="(pp - 1) / m")
    assert isinstance(ex.input, W.FloatText)
    assert ex.correct is None
    ex.input.value = 0.5
    _click(ex)
    assert ex.correct is False and "Not yet" in ex.feedback.value
    ex.input.value = 0.375
    _click(ex)
    assert ex.correct is True and "Right" in ex.feedback.value
    assert "(pp - 1) / m" in ex.feedback.value


def test_slow_rank_from_the_profile() -> None:
    prof = pk.load(bundled_profile("simulated/slow-rank"))
    answer = slow_rank_answer(prof)
    assert answer == "2"  # the fault the simulation injected (see its README)
    options = rank_options(prof)
    assert options == ["none", "0", "1", "2", "3"]
    ex = Exercise("Which rank is slow?", lambda: slow_rank_answer(prof), options)
    assert isinstance(ex.input, W.Dropdown)
    ex.input.value = "1"
    _click(ex)
    assert ex.correct is False
    ex.input.value = "2"
    _click(ex)
    assert ex.correct is True


def test_no_slow_rank_is_an_answer_too() -> None:
    assert slow_rank_answer(pk.load(bundled_profile("simulated/slow-link"))) == "none"


def test_pattern_question_needs_every_missing_pattern() -> None:
    check = recompute_check(pk.load_ir(bundled_ir("silu_mul.ir")), SELECT)
    missing = missing_patterns(check)
    assert missing == [r"feed_forward\.w1\.reshape", r"feed_forward\.w2\.reshape"]
    options = pattern_options(check)
    assert set(missing) < set(options) and len(options) == len(set(options))
    ex = Exercise("Which patterns make the Mul recompute?", missing, options)
    assert isinstance(ex.input, W.SelectMultiple)
    ex.input.value = (missing[0],)
    _click(ex)
    assert ex.correct is False
    ex.input.value = tuple(missing) + (r"feed_forward\.mul",)
    _click(ex)
    assert ex.correct is False
    ex.input.value = tuple(missing)
    _click(ex)
    assert ex.correct is True


def test_text_answers_ignore_case_and_spaces_and_reveal() -> None:
    ex = Exercise("Recompute mode?", "Full", reveal=True, explanation="ratio 2")
    assert isinstance(ex.input, W.Text)
    assert ex.check("  full ") is True
    assert ex.check("none") is False
    assert "Full" in ex.feedback.value and "ratio 2" in ex.feedback.value
    assert ex.check(None) is False  # the empty text box


def test_bad_input_is_wrong_not_an_error() -> None:
    ex = Exercise("A number", 1.0)
    assert ex.check("abc") is False


def test_empty_question_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        Exercise("", 1)


def test_bundled_ir_is_used_by_the_exercises() -> None:
    assert isinstance(bundled_ir("silu_mul.ir"), Path)
