"""The Planner's choice of how its calibration is closed (:func:`perfkit.plan.calibrate`'s
``closing``), in words: the choices the tab offers (:data:`CLOSING_OPTIONS`), which closing
a fit's figures use (:func:`closing_used`, read from the calibration's own terms, not from
what was asked) and the sentence the page says it in, with when to prefer which
(:func:`closing_sentence`).

Pure functions, no widgets: :class:`perfkit.widgets.tabs.planner.PlannerTab` draws them.
"""

from __future__ import annotations

from ..plan import Calibration
from ..plan.calibrate import BACKWARD_CLOSING, FORWARD_CLOSING, MATRIX_CLOSING, VECTOR_CLOSING
from .prediction_fit import PlannerFit

__all__ = ["CLOSING_OPTIONS", "CLOSING_ADVICE", "CHOSEN_IN_PLANNER", "closing_used",
           "closing_label", "closing_sentence"]

#: The Planner's choices (label, ``closing``), the default first.
CLOSING_OPTIONS = (("one factor (default)", "one"), ("by kernel kind and pass", "kernels"))

#: When to prefer which closing: the measured checks of ``docs/planner.md`` ("The two
#: closings side by side", H100 Llama traces calibrated on layout ``a``; the errors of a
#: tp-4 rank's computing time against its raw trace, ``tests/data/kineto_llama_tp_h100``
#: ``i``, and of the H200 step against its timed run, ``tests/data/kineto_llama_h200``
#: ``a``), also the table of :mod:`perfkit.plan.calibrate`.
CLOSING_ADVICE = ("Which to choose: on measured H100 Llama traces, closing by kernel kind "
                  "and pass predicted a tensor-parallel or recompute change better (a tp-4 "
                  "rank's computing −8.5 % off where one factor is −21 %), one factor a move "
                  "to other hardware (an H200's step −2.6 % off where by kernel kind it is "
                  "−7.8 %); docs/planner.md, “The two closings side by side”.")

#: What the tabs that predict with the Planner's model but do not offer the choice say of
#: it: one closing for the dashboard (:attr:`perfkit.widgets.tabs.base.Context.closing`).
CHOSEN_IN_PLANNER = ("The closing is chosen in the Planner tab (“calibration closed”) and "
                     "holds for every tab that predicts with its model.")

_WORDS = {
    "one": "with one factor on every compute rate but the optimizer's (the default)",
    "passes": "by kernel kind and pass: the matrix kernels to their share of the profile's "
              "kernel time, the forward's and the backward's memory-bound kernels each to "
              "their pass's share of the rest",
    "kinds": "by kernel kind, not by pass (the notes below say why): the matrix kernels to "
             "their share of the profile's kernel time, the memory-bound kernels to the rest",
}


def closing_used(calibration: Calibration | None) -> str:
    """How a calibration was closed, from its terms: ``"one"`` (the ``closing scale``
    term: one factor), ``"passes"`` (:data:`~perfkit.plan.calibrate.MATRIX_CLOSING`,
    :data:`~perfkit.plan.calibrate.FORWARD_CLOSING` and
    :data:`~perfkit.plan.calibrate.BACKWARD_CLOSING`), ``"kinds"`` (the matrix and the
    memory-bound kernels, :data:`~perfkit.plan.calibrate.VECTOR_CLOSING`: the passes not
    told apart) or ``""`` (not closed, or no calibration)."""
    if calibration is None:
        return ""
    terms = {t for t, _v, _h in calibration.terms}
    if "closing scale" in terms:
        return "one"
    if {MATRIX_CLOSING, FORWARD_CLOSING, BACKWARD_CLOSING} <= terms:
        return "passes"
    if {MATRIX_CLOSING, VECTOR_CLOSING} <= terms:
        return "kinds"
    return ""


def closing_label(calibration: Calibration | None) -> str:
    """A short tail for the figures' titles and the search's sentence: ``""`` for the
    default (one factor; the titles then read as before the choice existed), else
    ``" (closed by kernel kind and pass)"`` or ``" (closed by kernel kind)"``."""
    used = closing_used(calibration)
    return {"passes": " (closed by kernel kind and pass)",
            "kinds": " (closed by kernel kind)"}.get(used, "")


def closing_sentence(fit: PlannerFit, closing: str) -> str:
    """Which closing the Planner's figures use, in words, then :data:`CLOSING_ADVICE`.

    Parameters
    ----------
    fit : PlannerFit
        :func:`~perfkit.widgets.prediction.fit_job`'s, with ``closing``.
    closing : {"one", "kernels"}
        What was asked. The sentence says what the calibration did
        (:func:`closing_used`): a profile whose kernels do not split, and a fit on the
        step time alone, are closed with one factor whatever was asked, and it says so;
        default rates (no calibration) and an unclosed fit (no backward pass) are not
        closed at all.
    """
    used = closing_used(fit.calibration)
    if fit.source == "step time":  # one factor by construction, whatever its terms say
        said = ("The figures use the calibration on the measured step time alone: one "
                "factor on every compute rate, the only closing a step time allows"
                + (" (by kernel kind needs the profile's kernels)." if closing != "one"
                   else "."))
    elif fit.source != "profile" or fit.calibration is None:
        said = ("The figures use perfkit's default rates, not calibrated on this run, so "
                "how a calibration is closed changes nothing here.")
    elif not used:
        said = ("The fit is not closed on the measured step (a step without a backward "
                "pass is not the training step the model predicts), so how it would be "
                "closed changes nothing here.")
    elif used == "one" and closing != "one":
        said = ("The figures use the calibration closed with one factor on every compute "
                "rate, not by kernel kind: the profile's kernels do not split (the notes "
                "below say so).")
    else:
        said = f"The figures use the calibration closed {_WORDS[used]}."
    return f"{said} {CLOSING_ADVICE}"
