"""Teaching exercises: a question, a widget to answer it, a button that checks the answer.

The expected answers are never typed into a notebook: they come from perfkit functions run
on the data of the exercise (:func:`slow_rank_answer` from
:func:`perfkit.analysis.slow_ranks`, :func:`missing_patterns` from
:func:`perfkit.analysis.recompute_check`, a calculator such as
:func:`perfkit.bubble_fraction`). :class:`Exercise` only compares and shows the verdict.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as W
import pandas as pd

from ..analysis import slow_ranks
from ..errors import InvalidArgumentError

__all__ = ["Exercise", "slow_rank_answer", "rank_options", "missing_patterns",
           "pattern_options"]

#: What :func:`slow_rank_answer` returns when no rank is flagged.
NO_SLOW_RANK = "none"


class Exercise:
    """A question answered with a widget and checked by a button.

    Parameters
    ----------
    question : str
        The question, shown above the answer widget (plain text; HTML is escaped).
    answer : object or callable
        The expected answer, or a function of no argument that computes it (called once,
        on the first check). A number is compared within ``rel_tol``/``abs_tol``; a
        string case- and space-insensitively; a list, tuple or set as a set of strings
        (every element must be chosen, nothing else).
    options : sequence, optional
        Choices: a dropdown for a single answer, a multiple selection when the answer is a
        list, tuple or set. Without options: a number box for a numeric answer, else a
        text box.
    rel_tol, abs_tol : float
        Tolerances for numeric answers (:func:`math.isclose`).
    explanation : str
        Shown after a right answer, and after a wrong one once ``reveal`` is True.
    reveal : bool
        Show the expected answer after a wrong attempt.

    Attributes
    ----------
    input : ipywidgets.Widget
        The answer widget (set ``input.value`` to answer from code).
    button : ipywidgets.Button
        "Check": compares and fills :attr:`feedback`.
    feedback : ipywidgets.HTML
        The verdict.
    correct : bool or None
        The outcome of the last check (None before any).
    widget : ipywidgets.VBox
        Question, input, button and feedback; displaying the exercise displays this.
    """

    def __init__(self, question: str, answer: Any, options: Sequence[Any] | None = None,
                 *, rel_tol: float = 0.01, abs_tol: float = 0.0, explanation: str = "",
                 reveal: bool = False) -> None:
        if not question:
            raise InvalidArgumentError("question", "must not be empty", question)
        self.question = question
        self._answer = answer
        self._computed = not callable(answer)
        self.options = list(options) if options is not None else None
        self.rel_tol = rel_tol
        self.abs_tol = abs_tol
        self.explanation = explanation
        self.reveal = reveal
        self.correct: bool | None = None
        self.input = self._make_input()
        self.button = W.Button(description="Check", button_style="primary")
        self.button.on_click(lambda _button: self.check())
        self.feedback = W.HTML("")
        self.widget = W.VBox([W.HTML(f"<b>{html.escape(question)}</b>"), self.input,
                              self.button, self.feedback])

    @property
    def answer(self) -> Any:
        """The expected answer (computed on first use when a function was given)."""
        if not self._computed:
            self._answer = self._answer()
            self._computed = True
        return self._answer

    def _multiple(self) -> bool:
        return isinstance(self._answer, (list, tuple, set, frozenset))

    def _make_input(self) -> W.Widget:
        if self.options is not None:
            labels = [str(o) for o in self.options]
            if self._computed and self._multiple():
                return W.SelectMultiple(options=labels, rows=min(len(labels), 8))
            return W.Dropdown(options=labels, value=None)
        if self._computed and _is_number(self._answer):
            return W.FloatText(value=0.0)
        return W.Text(placeholder="your answer")

    def is_right(self, value: Any) -> bool:
        """Whether ``value`` matches the expected answer (see the class docstring)."""
        expected = self.answer
        if value is None:
            return False
        if isinstance(expected, (list, tuple, set, frozenset)):
            given = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
            return {_norm(v) for v in given} == {_norm(v) for v in expected}
        if _is_number(expected):
            try:
                number = float(value)
            except (TypeError, ValueError):
                return False
            return math.isclose(number, float(expected), rel_tol=self.rel_tol,
                                abs_tol=self.abs_tol)
        return _norm(value) == _norm(expected)

    def check(self, value: Any = None) -> bool:
        """Check ``value`` (default: the widget's value); updates :attr:`feedback`."""
        given = self.input.value if value is None else value
        self.correct = self.is_right(given)
        if self.correct:
            text = "<span style='color:#1a7f37'>&#10004; Right.</span>"
            if self.explanation:
                text += " " + html.escape(self.explanation)
        else:
            text = "<span style='color:#cf222e'>&#10008; Not yet, try again.</span>"
            if self.reveal:
                text += (" Expected: <code>" + html.escape(_show(self.answer)) + "</code>. "
                         + html.escape(self.explanation))
        self.feedback.value = text
        return self.correct

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or (
        hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iuf")


def _norm(value: Any) -> str:
    return " ".join(str(value).split()).lower()


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(sorted(str(v) for v in value))
    return str(value)


def slow_rank_answer(profile: Any, **kwargs: Any) -> str:
    """The slow rank of a profile as :func:`perfkit.analysis.slow_ranks` finds it.

    Parameters
    ----------
    profile : Cluster or Profile
    **kwargs
        Passed to :func:`~perfkit.analysis.slow_ranks` (``parallel``, ``threshold``...).

    Returns
    -------
    str
        The rank (as text) with the largest relative excess among the flagged rows, or
        ``"none"`` when no rank is flagged.
    """
    ranks = slow_ranks(profile, **kwargs)
    flagged = ranks[ranks["slow"]]
    if flagged.empty:
        return NO_SLOW_RANK
    return str(int(flagged.sort_values("excess_pct", ascending=False)["rank"].iloc[0]))


def rank_options(profile: Any) -> list[str]:
    """Choices for :func:`slow_rank_answer`: ``"none"`` and every rank of the profile."""
    ranks = pd.unique(profile.steps["rank"])
    return [NO_SLOW_RANK] + [str(int(r)) for r in sorted(ranks)]


def missing_patterns(check: Any) -> list[str]:
    """Patterns a :class:`~perfkit.analysis.RecomputeCheck` suggests adding, in order."""
    suggested = check.diagnosis["suggested_pattern"].dropna()
    return list(dict.fromkeys(str(p) for p in suggested))


def pattern_options(check: Any, decoys: Callable[[Any], Sequence[str]] | None = None
                    ) -> list[str]:
    """Choices for a pattern question: the configured, the suggested and decoy patterns.

    Parameters
    ----------
    check : RecomputeCheck
    decoys : callable, optional
        Given the check, returns more wrong choices. Default: one pattern per operator of
        the diagnosed layers' paths that is neither configured nor suggested.
    """
    configured = [str(p) for p in check.patterns["pattern"]]
    suggested = missing_patterns(check)
    if decoys is None:
        paths = check.matches["path"].dropna() if "path" in check.matches else []
        extra = [_path_pattern(p) for p in paths]
        neighbours = check.diagnosis.get("neighbour_path", pd.Series(dtype=object)).dropna()
        extra += [_path_pattern(p.rsplit(".", 1)[0] + ".cast") for p in neighbours]
    else:
        extra = list(decoys(check))
    return list(dict.fromkeys(configured + suggested + extra))


def _path_pattern(path: str) -> str:
    return str(path).replace(".", r"\.")
