"""The questions of a lab pack: one small class each, in the order of the tuning cycle.

A question is registered with :func:`question` and answers three things:

* :meth:`Question.solve` — from a student's own data (:class:`~perfkit.lab.data.
  StudentData`: their profiles read with :func:`perfkit.load` and perfkit's analyses, their
  IR dump, the calculators, the planner) it returns a :class:`Solution`: the prompt, the
  expected answer, the choices, how the answer was derived (for the instructor) and the
  explanation the student sees after a right answer;
* :attr:`Question.hint` — what the student sees after a wrong try: where to look and
  which rule to apply, never the answer;
* :meth:`Question.truth` — for the choices the simulator's inputs decide (the planted
  fault, the slow rank or link, wait or transit), what those inputs say.
  :func:`perfkit.lab.make` requires the data's answer to agree, and draws again when the
  symptom is not clear enough to ask about.

Numbers are checked within ``rel_tol`` / ``abs_tol`` (:func:`math.isclose`); a choice
exactly (case and spaces aside); several choices as a set.

:mod:`~perfkit.lab.questions.registry` holds the base class and the registry; one module a
stretch of the cycle holds its questions: :mod:`~perfkit.lab.questions.metrics` (and the
bubble), :mod:`~perfkit.lab.questions.operators`,
:mod:`~perfkit.lab.questions.communication`, :mod:`~perfkit.lab.questions.faults` (the slow
component, the planted fault), :mod:`~perfkit.lab.questions.memory` (and recompute),
:mod:`~perfkit.lab.questions.planning`. They are imported here in that order, which is the
order the questions are asked. :mod:`~perfkit.lab.questions.tolerance` registers none: it
works out the tolerances that come from the rounding of the figures a student reads.

:meth:`Question.asks` says which students a question is asked of: every one, except where
a question only makes sense for some layouts (exposed communication for jobs with
collectives, the bubble in the step for pipeline jobs: a student of a pipeline alone has
a few µs of exposed communication, and a bubble to read instead).
"""

from __future__ import annotations

# isort: off
# the stage modules register their questions when imported: this order is the order asked
from .metrics import Throughput, MFU, HFU, Bubble
from .operators import TopOperator, OperatorBound, OperatorIntensity
from .communication import ExposedComm, StepBubble, WaitOrTransit, WaitShare
from .faults import SlowComponent, PlantedFault
from .memory import MemoryNeed, MemoryFit, RecomputeEffective, RecomputeMul
from .planning import PlannerLayout, PlannerStep
# isort: on
from .registry import (
    FAULT_WORDS,
    GIB,
    KINDS,
    NONE_TAKES_EFFECT,
    QUESTIONS,
    STAGES,
    Question,
    Solution,
    question,
    questions_for,
)

__all__ = ["Solution", "Question", "QUESTIONS", "question", "questions_for", "KINDS",
           "STAGES", "FAULT_WORDS", "NONE_TAKES_EFFECT", "GIB",
           "Throughput", "MFU", "HFU", "Bubble", "TopOperator", "OperatorBound",
           "OperatorIntensity", "ExposedComm", "StepBubble", "WaitOrTransit", "WaitShare",
           "SlowComponent", "PlantedFault", "MemoryNeed", "MemoryFit", "RecomputeEffective",
           "RecomputeMul", "PlannerLayout", "PlannerStep"]
