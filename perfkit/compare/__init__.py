"""Did my change help? Two runs compared, with a noise-aware verdict.

:func:`compare` (``pk.compare(a, b)``, ``perfkit compare A B``) takes two profiles of any
formats perfkit reads and returns a :class:`Comparison`: each run's step time and spread,
the verdict (faster / slower / no change within the noise, :mod:`.verdict`), the
difference by step part, kernel kind and matched operator (:mod:`.matching`), and what
changed in the job. Layout: :mod:`.verdict` (noise and verdict), :mod:`.matching`
(operators across runs), :mod:`.build` (the function), :mod:`.result` (the result and its
JSON layout), :mod:`.page` (text and HTML),
:mod:`.stored` (the verdict on two runs of a tuning journal, from what it stores).
"""

from __future__ import annotations

from .build import compare
from .matching import match_operators, normalise_name
from .page import verdict_sentence
from .result import SCHEMA_VERSION, Comparison, Side
from .stored import stored_verdict
from .verdict import DEFAULT_THRESHOLD_PCT, Verdict, step_verdict

__all__ = ["compare", "Comparison", "Side", "Verdict", "step_verdict", "match_operators",
           "normalise_name", "stored_verdict", "SCHEMA_VERSION", "DEFAULT_THRESHOLD_PCT",
           "verdict_sentence"]
