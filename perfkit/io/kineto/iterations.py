"""Steps of a Kineto trace without ``ProfilerStep`` marks, from the optimizer's annotations.

``torch.optim.Optimizer`` wraps every ``step()`` call in ``record_function(
"Optimizer.step#<Class>.step")`` (and ``zero_grad()`` in ``Optimizer.zero_grad#<Class>.
zero_grad``), in every PyTorch version since 1.8; Kineto writes them as host annotations
(``user_annotation``; ``Operator`` in PyTorch 1.8-1.9). PyTorch's own on-demand tracing
counts training iterations at the same place (``torch.profiler`` registers an optimizer
step post hook that calls ``KinetoStepTracker.increment_step("Optimizer")``), and the loop
a ``ProfilerStep#N`` is recorded in calls ``prof.step()`` right after
``optimizer.step()``: on the shared PyTorch 1.9 trace that has both, each ProfilerStep
span ends 10 to 12 µs after its optimizer step.

:func:`optimizer_spans` makes step windows of them, as :func:`~perfkit.io.trace_tables.
step_spans` does of ``ProfilerStep#N``, when the trace has no ``ProfilerStep``:

- the marks are the outermost host ``Optimizer.step#<Class>.step`` annotations (one
  nested in another on the same thread, an optimizer wrapping another, is not a mark of
  its own);
- they are used only when there are at least 2 of them, all on one thread, of one
  optimizer class, none overlapping the next: several classes (two optimizers stepping
  in each iteration, a GAN's) or several threads leave the boundaries unknown, and the
  trace stays one step (a note says why);
- step ``k`` (numbered from 0, as ``ProfilerStep#0`` of a profile without schedule) ends
  at the end of the ``k``-th optimizer step, and the next one begins right there, so the
  steps are contiguous as ProfilerStep spans are; the first begins at the trace's first
  host event (host operator, annotation or runtime call, any thread), as ProfilerStep#0
  begins when the profiler starts: the data loading before the first ``zero_grad`` is
  then in the first step as it is in the others;
- what runs after the last optimizer step (a ``loss.item()``, the profiler's stop) is
  in no step.

An iteration whose ``optimizer.step()`` was skipped (AMP's ``GradScaler`` after an
overflow) is counted with the next one; a gradient-accumulation loop's step holds its
micro-batches: a step is one optimizer update.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..distinct import per_distinct
from ..trace_tables import NA_NS
from .kinds import _bool
from .nesting import _thread_codes

__all__: list[str] = []  # private to the Kineto reader and its preview (io.preview)

#: What ``torch.optim.Optimizer`` names the annotation around ``step()``.
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#([^#]+)\.step$")
#: What the steps of a trace are read from, for the reader's notes.
FROM_OPTIMIZER = "the optimizer's annotations"


def optimizer_spans(cpu: pd.DataFrame, runtime: pd.DataFrame, notes: list[str]
                    ) -> tuple[pd.DataFrame, str | None]:
    """Step windows (``step``, ``start_ns``, ``end_ns``) from the optimizer's annotations.

    Parameters
    ----------
    cpu : DataFrame
        The host operators and annotations (``name``, ``tid``, ``ts_ns``, ``dur_us``).
    runtime : DataFrame
        The runtime calls (``ts_ns``): the trace's first host event may be one.
    notes : list of str
        Where to say why the annotations were not used, when there are some.

    Returns
    -------
    (DataFrame, str or None)
        The windows (empty when the rule of the module does not hold) and the name of the
        annotation they come from (``Optimizer.step#SGD.step``), None when empty.
    """
    none = pd.DataFrame({"step": pd.Series([], dtype="int64"),
                         "start_ns": pd.Series([], dtype="int64"),
                         "end_ns": pd.Series([], dtype="int64")})
    if not len(cpu):
        return none, None
    hit = _bool(per_distinct(cpu["name"], lambda u: u.str.match(OPTIMIZER_STEP.pattern)))
    ts = cpu["ts_ns"].to_numpy(np.int64)
    dur = cpu["dur_us"].to_numpy(np.float64)
    hit &= (ts != NA_NS) & np.isfinite(dur)
    if not hit.any():
        return none, None
    start = ts[hit]
    end = start + np.round(dur[hit] * 1000).astype(np.int64)
    (thread,) = _thread_codes(cpu["tid"])
    thread = thread[hit]
    names = cpu["name"].astype("string").to_numpy(dtype=object)[hit]
    order = np.lexsort((-end, start))  # by start; an enclosing mark before what it holds
    start, end, thread, names = start[order], end[order], thread[order], names[order]
    outer = _outermost(end, thread)
    start, end, thread, names = start[outer], end[outer], thread[outer], names[outer]
    kinds = sorted(set(names))
    why = None
    if len(start) < 2:
        why = "only one optimizer step"
    elif len(kinds) > 1:
        why = (f"several optimizers step ({', '.join(kinds)}), so where an iteration ends "
               "cannot be told")
    elif len(np.unique(thread)) > 1:
        why = "the optimizer steps on several threads"
    elif (start[1:] < end[:-1]).any():
        why = "optimizer steps overlap"
    if why is not None:
        notes.append(f"steps: the optimizer's annotations ({len(start)} Optimizer.step) are "
                     f"not used as step boundaries: {why}")
        return none, None
    first = _first_host_ns(cpu, runtime)
    bounds = np.r_[min(first, int(start[0])), end]
    return pd.DataFrame({"step": np.arange(len(end), dtype=np.int64),
                         "start_ns": bounds[:-1].astype(np.int64),
                         "end_ns": bounds[1:].astype(np.int64)}), kinds[0]


def _outermost(end: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Which intervals (sorted by start, the longer first at a tie) no earlier interval of
    their thread encloses: one that ends no later than the furthest end before it on its
    thread lies inside that interval."""
    keep = np.ones(len(end), dtype=bool)
    reach: dict[int, int] = {}
    for i, (e, t) in enumerate(zip(end.tolist(), thread.tolist(), strict=True)):
        if t in reach and e <= reach[t]:
            keep[i] = False
        else:
            reach[t] = e
    return keep


def _first_host_ns(cpu: pd.DataFrame, runtime: pd.DataFrame) -> int:
    """The start of the trace's first host event (operator, annotation, runtime call)."""
    ts = np.concatenate([cpu["ts_ns"].to_numpy(np.int64),
                         runtime["ts_ns"].to_numpy(np.int64)])
    return int(ts[ts != NA_NS].min())
