"""The Planner's comparison where the model was scaled to the measured step time alone
(the profile's steps could not be fitted): the match is by construction, so it is not
called "inside the band", and parts the model prices far from the run's are named (the
walk of session 32: "0.0 %, inside the band" over a compute part 10x off)."""

from __future__ import annotations

import types

import pandas as pd

from perfkit.widgets.planner_words import comparison_sentence

PARTS = ("compute", "exposed communication and pipeline waits", "idle")


def _frame(measured: tuple[float, ...], predicted: tuple[float, ...], step: float
           ) -> pd.DataFrame:
    rows = [{"run": "measured", "part": p, "seconds": s, "step_s": step}
            for p, s in zip(PARTS, measured, strict=True)]
    rows += [{"run": "predicted", "part": p, "seconds": s, "step_s": step,
              "low_s": 0.9 * step, "high_s": 1.1 * step}
             for p, s in zip(PARTS, predicted, strict=True)]
    return pd.DataFrame(rows)


def _fit(source: str, step: float) -> types.SimpleNamespace:
    pred = types.SimpleNamespace(step_s=step, low_s=0.9 * step, high_s=1.1 * step)
    return types.SimpleNamespace(prediction=pred, source=source, calibrated=True)


def test_a_step_time_fit_is_equal_by_construction_and_names_parts_far_off() -> None:
    # a 0.5 s step: measured 0.05 / 0.35 / 0.10 s, the model 0.43 / 0.07 / 0 s
    said = comparison_sentence(_frame((0.05, 0.35, 0.10), (0.43, 0.07, 0.0), 0.5),
                               _fit("step time", 0.5))
    assert "it was scaled to: equal by construction" in said
    assert "inside the band" not in said and "+0.0 %" not in said
    # each apart by more than 10 % of the step (50 ms) and 2x off, in either direction
    assert ("Its parts are not the run's: compute 430 ms predicted against 50.0 ms "
            "measured; exposed communication and pipeline waits 70.0 ms predicted against "
            "350 ms measured; idle 0 µs predicted against 100 ms measured") in said


def test_parts_near_their_measure_are_not_named() -> None:
    # 2x off but only 40 ms apart (under 10 % of the 0.5 s step); the others within 2x
    said = comparison_sentence(_frame((0.40, 0.06, 0.04), (0.44, 0.04, 0.02), 0.5),
                               _fit("step time", 0.5))
    assert "equal by construction" in said and "parts are not the run's" not in said
    # a fit on the profile keeps its residual and band words
    said = comparison_sentence(_frame((0.40, 0.06, 0.04), (0.44, 0.04, 0.02), 0.5),
                               _fit("profile", 0.5))
    assert ": 0.0 %, inside the band." in said and "by construction" not in said
