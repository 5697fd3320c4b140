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

The annotation names the optimizer's class, not the optimizer: a loop with two optimizers
of one class (a GAN's discriminator and generator, each an ``Adam``) writes two identical
annotations per iteration. What tells them apart is the backward pass that comes before
each: :func:`optimizer_spans` makes step windows of the annotations, as
:func:`~perfkit.io.chrome.tables.step_spans` does of ``ProfilerStep#N``, when the trace has
no ``ProfilerStep``, by these rules:

- the marks are the outermost host ``Optimizer.step#<Class>.step`` annotations (one
  nested in another on the same thread, an optimizer wrapping another, is not a mark of
  its own); there must be at least 2, all on one thread, none overlapping the next;
- the backward work before a mark is the backward functions that start between the end
  of the previous mark and its start (host events named ``...Backward<N>`` or
  ``...AccumulateGrad``: ``autograd::engine::evaluate_function: AddmmBackward0``, or
  ``AddmmBackward`` in PyTorch 1.9), on any thread. A trace with no backward function at
  all cannot be checked and stays one step: the DataLoader's fetches alone cannot tell
  two iterations from two optimizers stepping in turn, each on its own batch, and the
  other host events (operators, annotations) between optimizer steps differ from one
  iteration to the next on the shared traces (Kineto's ResNet-50 with 4 workers: 2592 or
  2602 between updates; the MI300 trace: 905 before its first update, 907 between the
  others);
- a mark with no backward work since the previous one steps on the same gradients
  (``loss.backward(); opt_a.step(); opt_b.step()``): it is in the previous mark's update;
- each update must follow the same backward work, and be made of the same optimizer
  classes in the same order, as every other (the same backward functions, as many times,
  or where their counts vary, as a gradient-accumulation loop skipping an update does, the
  same set of them): then each update is one iteration. With 3 updates or more, the work
  compared is that between updates (2 intervals or more);
- a trace of exactly 2 updates has one such interval, nothing to compare it with: the
  backward work before the first update (from the trace's start) is compared with it
  instead. The two updates are two iterations when they are made of the same optimizer
  classes and follow the same backward functions, as many times (a GAN's discriminator and
  generator steps of one iteration follow different backward passes: the generator's goes
  through both networks), and, where the marks' thread has DataLoader fetches, a fetch
  opens each update. Otherwise (a profiler started in the middle of a backward pass, a
  backward pass that changes from one iteration to the next) the trace stays one step;
- where the updates come in turns of ``p`` after different backward work (a GAN: the
  discriminator's update after the discriminator's backward pass, the generator's after
  one through both), ``p`` updates make one iteration, but where it begins is only told
  by the loop's DataLoader: the ``enumerate(DataLoader)#<Iterator>.__next__`` annotation
  PyTorch writes around each batch it gives, on the marks' thread. It must open every
  ``p``-th update, from the trace's first, and the trace must hold whole iterations;
  otherwise the trace stays one step;
- any other pattern leaves the boundaries unknown, and the trace one step (a note says
  why).

Step ``k`` (numbered from 0, as ``ProfilerStep#0`` of a profile without schedule) ends at
the end of the last optimizer step of the ``k``-th iteration, and the next one begins right
there, so the steps are contiguous as ProfilerStep spans are; the first begins at the
trace's first host event (host operator, annotation or runtime call, any thread), as
ProfilerStep#0 begins when the profiler starts: the data loading before the first
``zero_grad`` is then in the first step as it is in the others. What runs after the last
optimizer step (a ``loss.item()``, the profiler's stop) is in no step.

An iteration whose ``optimizer.step()`` was skipped (AMP's ``GradScaler`` after an
overflow) is counted with the next one; a gradient-accumulation loop's step holds its
micro-batches: a step is one optimizer update.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from .._common.distinct import codes as text_codes
from .._common.distinct import per_distinct
from ..chrome.tables import NA_NS
from .kinds import _bool
from .nesting import _thread_codes

__all__: list[str] = []  # private to the Kineto reader and its preview (io.preview)

#: What ``torch.optim.Optimizer`` names the annotation around ``step()``.
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#([^#]+)\.step$")
#: What a backward function of autograd is named (the engine's wrapper and the node).
BACKWARD = re.compile(r"(?:Backward\d*|AccumulateGrad)$")
#: What ``torch.utils.data.DataLoader`` names the annotation around each batch it gives.
FETCH = re.compile(r"^enumerate\(DataLoader\)#[^#]+\.__next__$")
#: How the note of a trace with no backward function begins.
NO_BACKWARD = ("no backward pass is recorded in the trace (no host event named "
               "...Backward<N> or ...AccumulateGrad)")
#: What the steps of a trace are read from, for the reader's notes.
FROM_OPTIMIZER = "the optimizer's annotations"


def one_step_note(optimizer_said: bool) -> str:
    """The note of a Kineto trace whose steps are neither ProfilerStep spans nor iterations
    (one step over the whole trace); ``optimizer_said``: whether it has optimizer
    annotations, whose own note (:func:`optimizer_spans`) then says why they were not used.
    Without any, the trace has no training iteration to tell apart (inference, or a
    forward-only loop), and one step is right."""
    if optimizer_said:
        return ("steps: no ProfilerStep#N events (profile without schedule): one step over "
                "the whole trace, step number NA")
    return ("steps: no ProfilerStep#N events and no optimizer step (Optimizer.step#<Class>."
            "step annotation), as in inference or a forward-only loop: with no training "
            "iteration to tell apart, the whole trace is one step, step number NA")


def optimizer_spans(cpu: pd.DataFrame, runtime: pd.DataFrame, notes: list[str]
                    ) -> tuple[pd.DataFrame, str | None]:
    """Step windows (``step``, ``start_ns``, ``end_ns``) from the optimizer's annotations.

    Parameters
    ----------
    cpu : DataFrame
        The host operators and annotations (``name``, ``tid``, ``ts_ns``, ``dur_us``): the
        optimizer's annotations, the backward functions and the DataLoader's annotations
        among them.
    runtime : DataFrame
        The runtime calls (``ts_ns``): the trace's first host event may be one.
    notes : list of str
        Where to say why the annotations were not used, when there are some.

    Returns
    -------
    (DataFrame, str or None)
        The windows (empty when the rules of the module do not hold) and the name of the
        annotation that ends each (``Optimizer.step#SGD.step``), None when empty.
    """
    none = pd.DataFrame({"step": pd.Series([], dtype="int64"),
                         "start_ns": pd.Series([], dtype="int64"),
                         "end_ns": pd.Series([], dtype="int64")})
    if not len(cpu):
        return none, None
    ts = cpu["ts_ns"].to_numpy(np.int64)
    dur = cpu["dur_us"].to_numpy(np.float64)
    timed = ts != NA_NS
    hit = _bool(per_distinct(cpu["name"], lambda u: u.str.match(OPTIMIZER_STEP.pattern)))
    hit &= timed & np.isfinite(dur)
    if not hit.any():
        return none, None
    start = ts[hit]
    end = start + np.round(dur[hit] * 1000).astype(np.int64)
    (codes,) = _thread_codes(cpu["tid"])
    thread = codes[hit]
    name_code, texts = text_codes(cpu["name"])  # the names as codes: each text once
    texts = np.asarray(texts, dtype=object)
    names = texts[name_code[hit]]
    order = np.lexsort((-end, start))  # by start; an enclosing mark before what it holds
    start, end, thread, names = start[order], end[order], thread[order], names[order]
    outer = _outermost(end, thread)
    start, end, thread, names = start[outer], end[outer], thread[outer], names[outer]
    why = None
    if len(start) < 2:
        why = "only one optimizer step"
    elif len(np.unique(thread)) > 1:
        why = "the optimizer steps on several threads"
    elif (start[1:] < end[:-1]).any():
        why = "optimizer steps overlap"
    else:
        back = timed & _bool(per_distinct(cpu["name"], lambda u: u.str.contains(
            BACKWARD.pattern, regex=True)))
        fetch = timed & (codes == thread[0]) & _bool(per_distinct(
            cpu["name"], lambda u: u.str.match(FETCH.pattern)))
        work = _backward_work(start, end, ts[back], texts[name_code[back]])
        fetches = np.sort(ts[fetch])  # a fetch from the end of mark i - 1 to mark i:
        fetched = np.searchsorted(fetches, start[1:]) > np.searchsorted(fetches, end[:-1])
        # what came before the first mark, from the trace's start (2 updates: see module)
        before = Counter(texts[name_code[back]][ts[back] < start[0]].tolist())
        first_fetched = None if not len(fetches) else bool(fetches[0] < start[0])
        iterations, why = _iterations(names, work, fetched, bool(back.any()))
        if why == _TWO_UPDATES:
            iterations, why = _two_updates(names, work, fetched, before, first_fetched)
    if why is not None:
        notes.append(f"steps: the optimizer's annotations ({len(start)} Optimizer.step) are "
                     f"not used as step boundaries: {why}")
        return none, None
    last = np.array([it[-1] for it in iterations])
    first = _first_host_ns(cpu, runtime)
    bounds = np.r_[min(first, int(start[0])), end[last]]
    return pd.DataFrame({"step": np.arange(len(last), dtype=np.int64),
                         "start_ns": bounds[:-1].astype(np.int64),
                         "end_ns": bounds[1:].astype(np.int64)}), str(names[last[0]])


def _backward_work(start: np.ndarray, end: np.ndarray, at: np.ndarray, names: np.ndarray
                   ) -> list[Counter[str]]:
    """For each mark after the first, the backward functions (name -> how many) that start
    from the end of the previous mark to its start."""
    order = np.argsort(at, kind="stable")
    at, names = at[order], names[order]
    lo = np.searchsorted(at, end[:-1], side="left")
    hi = np.searchsorted(at, start[1:], side="left")
    return [Counter(names[a:b].tolist()) for a, b in zip(lo, hi, strict=True)]


def _iterations(names: np.ndarray, work: list[Counter[str]], fetched: np.ndarray,
                backward: bool) -> tuple[list[list[int]], str | None]:
    """The marks of each iteration (positions), or why they cannot be told (see the module):
    ``work[i - 1]`` and ``fetched[i - 1]`` are the backward functions and whether a
    DataLoader fetch ran between mark ``i - 1`` and mark ``i``; ``backward``: whether the
    trace has any backward function."""
    if not backward:
        return [], (NO_BACKWARD + ", so whether each optimizer step ends an iteration "
                    "cannot be checked: optimizers stepping in turn in one iteration (a "
                    "GAN's discriminator and generator, even each after its own "
                    "DataLoader batch) look the same as iterations, and the other host "
                    "events between optimizer steps are not always the same from one "
                    "iteration to the next")
    updates: list[list[int]] = [[0]]
    for i, w in enumerate(work, start=1):
        if w:
            updates.append([i])
        else:  # no backward since the previous optimizer step: the same update
            updates[-1].append(i)
    if len(updates) == 1:
        return [], "they all step after one backward pass, in one iteration"
    if len(updates) == 2:
        return [], _TWO_UPDATES
    steps = [tuple(names[u].tolist()) for u in updates]
    exact = [(steps[k], frozenset(work[u[0] - 1].items())) for k, u in
             enumerate(updates) if k]
    loose = [(steps[k], frozenset(work[u[0] - 1])) for k, u in enumerate(updates) if k]
    turn = _period(exact) or _period(loose)
    kinds = sorted(set(names.tolist()))
    if turn is None:
        if len(kinds) > 1:
            return [], (f"several optimizers step ({', '.join(kinds)}), so where an "
                        "iteration ends cannot be told")
        return [], ("the backward pass before each optimizer step changes with no repeating "
                    "pattern, so where an iteration ends cannot be told")
    if turn == 1:
        if steps[0] != steps[1]:
            return [], (f"the first update's optimizers ({', '.join(steps[0])}) are not the "
                        f"others' ({', '.join(steps[1])})")
        return updates, None
    opens = [bool(fetched[u[0] - 1]) for u in updates[1:]]
    whole = len(updates) % turn == 0 and steps[0] == steps[turn] and \
        opens == [(k + 1) % turn == 0 for k in range(len(opens))]
    if not whole:
        return [], (f"the updates come in turns of {turn}, each after a different backward "
                    "pass (several optimizers stepping in turn, as a GAN's discriminator "
                    "and generator do), and nothing in the trace (a DataLoader fetch on "
                    f"their thread before every {_nth(turn)} update) tells where an "
                    "iteration begins")
    return [[i for u in updates[k:k + turn] for i in u]
            for k in range(0, len(updates), turn)], None


#: :func:`_iterations`' answer for 2 updates, which :func:`_two_updates` then checks.
_TWO_UPDATES = "two updates"


def _two_updates(names: np.ndarray, work: list[Counter[str]], fetched: np.ndarray,
                 before: Counter[str], first_fetched: bool | None
                 ) -> tuple[list[list[int]], str | None]:
    """The marks of each of the 2 iterations of a trace with exactly 2 updates, or why they
    are not told apart (see the module): ``before`` is the backward work from the trace's
    start to the first mark, ``first_fetched`` whether a DataLoader fetch on the marks'
    thread came before the first mark (None: the thread has no fetch at all); ``names``,
    ``work`` and ``fetched`` as for :func:`_iterations`."""
    second = next(i for i, w in enumerate(work, start=1) if w)
    updates = [list(range(second)), list(range(second, len(names)))]
    first, other = (tuple(names[u].tolist()) for u in updates)
    if first != other:
        return [], (f"only two updates, of different optimizers ({', '.join(first)}, then "
                    f"{', '.join(other)}), so they may be one iteration of optimizers "
                    "stepping in turn")
    if before != work[second - 1]:
        return [], ("only two updates, and the backward pass before the first (from the "
                    "trace's start) is not the same as the one before the second, so they "
                    "may be one iteration of two optimizers stepping in turn, as a GAN's "
                    "discriminator and generator do, or the trace begins inside a backward "
                    "pass")
    if first_fetched is not None and not (first_fetched and bool(fetched[second - 1])):
        return [], ("only two updates, and the loop's DataLoader does not fetch a batch "
                    "before each, so they may be one iteration of two optimizers stepping in "
                    "turn")
    return updates, None


def _nth(n: int) -> str:
    """``2nd``, ``3rd``, ``4th`` ... ``11th``, ``21st``."""
    tail = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{tail}"


def _period(keys: list[tuple[object, ...]]) -> int | None:
    """The shortest ``p`` with ``keys[i] == keys[i + p]`` throughout, seen at least twice
    over (``2 p <= len(keys)``; ``p = 1``: all equal, with 2 keys or more), or None."""
    for p in range(1, len(keys) // 2 + 1):
        if all(keys[i] == keys[i + p] for i in range(len(keys) - p)):
            return p
    return None


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
