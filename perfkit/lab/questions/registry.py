"""What a question is and the registry of them, in the order of the tuning cycle.

:class:`Question` (the base class: its id, stage, kind, tolerances, hint and
:meth:`~Question.solve`), the :class:`Solution` it gives, :func:`question` (the decorator
that registers one in :data:`QUESTIONS`), :func:`questions_for` (a level's questions), the
words the choices use, and the helpers the questions share. See :mod:`perfkit.lab.questions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...errors import InvalidArgumentError
from ..data import StudentData
from ..scenario import LEVELS, Setup

__all__ = ["Solution", "Question", "QUESTIONS", "question", "questions_for", "KINDS",
           "STAGES", "FAULT_WORDS", "NONE_TAKES_EFFECT", "GIB"]

#: Answer kinds: a number, one choice, several choices.
KINDS = ("number", "choice", "choices")
#: Steps of the tuning cycle, in order (a question belongs to one).
STAGES = ("metrics", "parallel strategy", "operators", "communication", "cluster",
          "diagnosis", "memory", "recompute", "planning")
#: The planted problems in the words of the fault question.
FAULT_WORDS = {
    "DataLoadingStall": "data-loading stall",
    "UnfusedOperators": "unfused operators",
    "MemoryPressure": "memory pressure",
    "UnbalancedStage": "unbalanced pipeline stage",
    "FullRecompute": "full recompute where selective was configured",
    "NoOverlap": "gradient communication not overlapped",
    "HostBound": "host-bound kernel launch",
    "SlowRank": "a slow rank",
    "SlowLink": "a slow link",
}
#: The choice of the recompute question when no configured pattern takes effect.
NONE_TAKES_EFFECT = "none of them"
GIB = 2**30


@dataclass(frozen=True)
class Solution:
    """One question solved for one student.

    Attributes
    ----------
    prompt : str
        The question as the student reads it.
    answer : float, str or list of str
        The expected answer.
    options : list of str, optional
        The choices (None for a number).
    derivation : str
        How the answer was derived, with the figures read (for the instructor).
    explanation : str
        Shown to the student after a right answer.
    settings : tuple of str
        The parts of the student's settings (key.json) the answer comes from.
    facts : dict
        Figures a re-derivation needs beyond the settings (e.g. the operator asked about).
    rel_tol, abs_tol : float, optional
        This student's tolerance, where the question derives it from the student's own
        figures (e.g. from the rounding of the figures the student reads); None: the
        question's (:attr:`Question.rel_tol`, :attr:`Question.abs_tol`).
    """

    prompt: str
    answer: Any
    options: list[str] | None
    derivation: str
    explanation: str
    settings: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)
    rel_tol: float | None = None
    abs_tol: float | None = None

    def tolerance(self, q: Question) -> dict[str, float]:
        """``rel_tol`` and ``abs_tol`` of this answer: its own where set, else ``q``'s."""
        return {"rel_tol": q.rel_tol if self.rel_tol is None else self.rel_tol,
                "abs_tol": q.abs_tol if self.abs_tol is None else self.abs_tol}


class Question:
    """Base class of the questions (see :mod:`perfkit.lab.questions`)."""

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    stage: ClassVar[str] = ""
    kind: ClassVar[str] = "number"
    unit: ClassVar[str] = ""
    rel_tol: ClassVar[float] = 0.0
    abs_tol: ClassVar[float] = 0.0
    #: The tolerance in words, where each student has their own (see
    #: :attr:`Solution.abs_tol`); "" where the question's figures above are everyone's.
    tolerance_words: ClassVar[str] = ""
    levels: ClassVar[tuple[str, ...]] = LEVELS
    hint: ClassVar[str] = ""
    #: The guided notebook that teaches what the question asks.
    guide: ClassVar[str] = ""
    #: The views of the student app that hold what the question needs.
    evidence: ClassVar[tuple[str, ...]] = ()
    #: Whose job the question is asked about, in words ("" for every student; see
    #: :meth:`asks`).
    asked_of: ClassVar[str] = ""

    def asks(self, setup: Setup) -> bool:
        """Whether this student is asked the question (every student unless a question
        only makes sense for some layouts, e.g. the pipeline's bubble)."""
        return True

    def solve(self, data: StudentData) -> Solution:
        """The question for this student, answered from their data."""
        raise NotImplementedError

    def truth(self, setup: Setup) -> Any:
        """What the simulator's inputs say the answer is, where they decide it; else None."""
        return None

    def meta(self) -> dict[str, Any]:
        """The question's fixed description (key.json's ``questions``)."""
        return {"id": self.id, "title": self.title, "stage": self.stage, "kind": self.kind,
                "unit": self.unit, "rel_tol": self.rel_tol, "abs_tol": self.abs_tol,
                "levels": list(self.levels), "guide": self.guide,
                "evidence": list(self.evidence), "asked_of": self.asked_of}


#: Every question, by id, in the order of the tuning cycle.
QUESTIONS: dict[str, Question] = {}


def question(cls: type[Question]) -> type[Question]:
    """Register a question class (decorator); the order of registration is the order asked."""
    if not cls.id or cls.id in QUESTIONS:
        raise InvalidArgumentError("id", "a question needs a new, non-empty id", cls.id)
    if cls.kind not in KINDS or cls.stage not in STAGES:
        raise InvalidArgumentError(cls.id, f"kind must be in {KINDS} and stage in {STAGES}",
                                   (cls.kind, cls.stage))
    QUESTIONS[cls.id] = cls()
    return cls


def questions_for(level: str, setup: Setup | None = None) -> list[Question]:
    """The questions of a pack of that level, in order: every one the level may ask, or,
    given a student's ``setup``, those that student is asked (:meth:`Question.asks`)."""
    if level not in LEVELS:
        raise InvalidArgumentError("level", f"must be one of {LEVELS}", level)
    return [q for q in QUESTIONS.values()
            if level in q.levels and (setup is None or q.asks(setup))]


# ---- helpers ---------------------------------------------------------------------------

def _shuffled(options: list[str], setup: Setup, salt: int) -> list[str]:
    """The options in an order drawn from the student's setup (stable for a pack)."""
    order = np.random.default_rng([setup.pick, salt]).permutation(len(options))
    return [options[int(i)] for i in order]


def _job_line(data: StudentData) -> str:
    f = data.facts
    p = f.parallel
    return (f"{f.devices} devices (dp {p.dp} × tp {p.tp} × pp {p.pp}), global batch "
            f"{f.global_batch_size} sequences of {f.seq_length} tokens")
