"""Operator analyses: the top operators, bound type, AI CPU, tiny-kernel storms, unfused patterns.

All functions read the canonical ``kernels`` table (one row per device task) and work the
same on Ascend and GPU profiles; on a CPU-only run (no device task) :func:`top_operators`
reads the host operators by self time instead (:func:`host_tasks`). Shares are of *device
time*: the sum of the durations of the tasks in scope (by default every non-communication
task), not of wall time.

Unfused patterns are found in the order tasks run on each (rank, stream): every task gets
a one-letter token from its type or name (``Pow`` -> ``P``, ``ReduceMean`` -> ``R``, ...),
the tokens of a stream form a string, and a regular expression per pattern finds the
decomposed sequences (the search is vectorised over the string, not a Python loop over
tasks). The time a fusion could save is ``sum(durations) - max(duration)`` per occurrence:
a fused kernel still has to make one pass over the data, which is about as long as the
slowest member of the chain; the other passes disappear. Copies (``TensorMove``,
contiguous) are saved entirely (``saving = duration``) because an in-place or
stride-aware operator does not need them.

One module a job, every name re-exported here: :mod:`~perfkit.analysis.operators.scope`
(the tasks in scope, their types and stream order), :mod:`~perfkit.analysis.operators.top`
(:func:`top_operators`), :mod:`~perfkit.analysis.operators.host` (:func:`host_tasks`),
:mod:`~perfkit.analysis.operators.bound` (:func:`operator_bound`),
:mod:`~perfkit.analysis.operators.ai_cpu` (:func:`ai_cpu_operators`),
:mod:`~perfkit.analysis.operators.tiny` (:func:`tiny_kernels`),
:mod:`~perfkit.analysis.operators.tokens` (:func:`kernel_tokens`),
:mod:`~perfkit.analysis.operators.unfused` (:func:`unfused_patterns`) and
:mod:`~perfkit.analysis.operators.attention_passes` (:func:`recompute_evidence`).
"""

from __future__ import annotations

from .ai_cpu import ai_cpu_operators
from .attention_passes import recompute_evidence
from .bound import _bound_frame, operator_bound  # noqa: F401 - tests read _bound_frame
from .host import host_tasks
from .tiny import TINY_COLUMNS, _name_counts, tiny_kernels  # noqa: F401 - and _name_counts
from .tokens import _TOKEN_RE, TOKENS, kernel_tokens  # noqa: F401 - and _TOKEN_RE
from .top import TOP_COLUMNS, top_operators
from .unfused import PATTERNS, UNFUSED_COLUMNS, unfused_patterns

__all__ = ["top_operators", "operator_bound", "ai_cpu_operators", "tiny_kernels",
           "unfused_patterns", "host_tasks", "kernel_tokens", "recompute_evidence", "PATTERNS",
           "TOKENS", "TOP_COLUMNS", "UNFUSED_COLUMNS", "TINY_COLUMNS"]
