"""The advisor: run every analysis, turn what is abnormal into ranked :class:`Finding` s.

**One currency.** Every finding that can be measured carries the step time at stake:
``ms_per_step`` (what the problem costs, or what fixing it wins back, per training step)
and ``score`` = that time as a share of the measured step (the mean over steps of the
slowest rank's device span plus its preparing time). Findings are ranked by it, and
``severity`` follows it: ``high`` >= 10 %, ``medium`` >= 3 %, ``low`` >= 1 %, else
``info`` (:data:`SEVERITY_THRESHOLDS`; docs/analysis.md says why). There are no floors
and no cut-offs: a 0.3 % stall is reported as a 0.3 % ``info`` finding, never dropped
nor inflated.

A finding whose cost cannot be measured from the profile (memory close to the limit, a
risky setting, a peak that the device could not hold, MFU) has ``measured=False``,
``score=0``, severity ``warning`` or ``info``, and always comes after every measured
finding.

**No double counting.** Causes are attributed before their symptoms: exposed
communication is measured on the rank that waits for nobody (the least exposed one), so
time spent waiting for a slow rank or a stalled loader is not counted again as
communication; the part of it that a slow link explains goes to the link.

**Plain words.** Each finding says what was seen (``title``, ``evidence``), what it
costs (``ms_per_step``) and what to change (``recommendation``) in the terms of the
profiled framework (MindSpore / MindFormers, torch_npu, or PyTorch on GPU, from
``meta.framework`` and ``meta.device_type``); rule ids and statistics (robust z-scores,
the seed's check order) stay in ``details``.

A rule that fails on an unusual profile is reported as an ``info`` finding; the advisor
itself never raises on a loadable profile.

**Layout.** :mod:`~perfkit.advisor.finding` (the :class:`Finding` type and severity),
:mod:`~perfkit.advisor.context` (what the rules share), :mod:`~perfkit.advisor.words`
(numbers and framework terms), one module of rules per area (:mod:`~.cluster`,
:mod:`~.communication` and :mod:`~.step_tail`, :mod:`~.host` and :mod:`~.idle`, :mod:`~.operators`,
:mod:`~.memory_recompute`, :mod:`~.job`), :mod:`~perfkit.advisor.registry` (where each
rule declares its area, order, tables, inputs, frameworks and the rules it reads) and
:mod:`~perfkit.advisor.runner`.
A new rule is one decorated function in its area's module (docs/analysis.md).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from .._freed_memory import freed_memory_kept
from .._hugepages import small_pages
from ..analysis._shared import shared_results
from . import (
    cluster,
    communication,
    host,
    idle,
    job,
    memory_recompute,
    operators,
    precision,
    runner,
    step_tail,
)
from .context import ASSUMPTIONS, Context
from .finding import NOTEBOOKS, SEVERITY_ORDER, SEVERITY_THRESHOLDS, Finding, severity_of
from .registry import registered
from .words import FRAMEWORKS, framework_of

__all__ = ["Finding", "advise", "advise_iter", "NOTEBOOKS", "RULES", "severity_of", "framework_of",
           "SEVERITY_THRESHOLDS", "SEVERITY_ORDER", "ASSUMPTIONS", "FRAMEWORKS",
           "COMPUTE_AHEAD"]

#: The areas whose rules register themselves on import (each module's ``@rule``).
_AREA_MODULES = (cluster, communication, step_tail, host, idle, operators, precision,
                 memory_recompute, job)

RULES = tuple(r.check for r in registered())
"""The rules run by :func:`advise`, in the seeds' order of checks (causes before symptoms),
each after the rules it reads (``after=`` in :mod:`perfkit.advisor.registry`)."""

#: Compute the shared analyses the rules declare ``ahead=`` (pricing the operators) on a
#: second thread while the rules run; the findings are the same either way.
COMPUTE_AHEAD = True


def advise(profile_or_cluster: Any, model: Any = None, parallel: Any = None,
           hardware: Any = None, max_findings: int | None = None,
           assumptions: dict[str, float] | None = None,
           assumed: Iterable[str] = (), planner: Any = None) -> list[Finding]:
    """Run every analysis and return ranked findings: what to fix first.

    Parameters
    ----------
    profile_or_cluster : Profile or Cluster
        A loaded profile (``perfkit.load``); a lazy cluster (``engine="dask"``) gives the
        same findings, its analyses computed on the Dask workers.
    model : perfkit.ModelSpec or str, optional
        Enables the MFU check (a preset name: :meth:`perfkit.ModelSpec.preset`).
    parallel : perfkit.ParallelConfig, optional
        Pipeline stages and the schedule's own bubble.
    hardware : perfkit.Hardware or str, optional
        Memory capacity, nominal bandwidths and the operators' roofline (a preset name:
        :meth:`perfkit.Hardware.preset`). Default: the
        profiled device where the profile says (:func:`perfkit.analysis.infer_hardware`).
    max_findings : int, optional
        Keep only the first findings.
    assumptions : dict, optional
        Override :data:`ASSUMPTIONS` (e.g. ``{"kernel_efficiency": 0.8}``).
    assumed : iterable of str, optional
        The fields of ``parallel`` the caller assumed rather than read (names of
        :data:`perfkit.job.JOB_FIELDS`, e.g. ``"num_micro_batches"``; the dashboard passes
        the job's fields of source ``"default"``): a finding resting on one says so.
    planner : callable, optional
        ``planner()`` gives the Planner's calibration of this profile and job
        (:func:`perfkit.plan.calibrate`) or None; with one, the recompute finding prices
        turning recompute off by the Planner's model (:func:`perfkit.plan.
        layout_saving_s`), the figure the dashboard's Recompute tab shows for that change.

    Returns
    -------
    list of Finding
        Measured findings first, most milliseconds per step at stake first; then the
        findings whose cost cannot be measured (``warning`` before ``info``). Empty when
        nothing was found.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        ``profile_or_cluster`` is not a profile (a path: load it first), or ``model``,
        ``parallel`` or ``hardware`` is neither its spec nor a known preset name.

    Notes
    -----
    For a profile in memory with a known device, the operators are priced on a second
    thread while the rules run (:data:`COMPUTE_AHEAD`, docs/analysis.md "Speed"); the
    findings are the same as on one thread, and the thread has ended on return.
    """
    # analyses share their intermediate tables for this call; huge pages off (_hugepages);
    # the arrays one analysis frees kept for the next (_freed_memory)
    with shared_results(), small_pages(), freed_memory_kept():
        ctx = Context(profile_or_cluster, model, parallel, hardware,
                      {**ASSUMPTIONS, **(assumptions or {})}, assumed, planner)
        ranked = runner.run(ctx, RULES, compute_ahead=COMPUTE_AHEAD)
    return ranked[:max_findings] if max_findings is not None else ranked


_DONE = object()


def advise_iter(profile_or_cluster: Any, model: Any = None, parallel: Any = None,
                hardware: Any = None, assumptions: dict[str, float] | None = None,
                assumed: Iterable[str] = (), planner: Any = None) -> Iterator[Finding]:
    """The findings of :func:`advise`, each as soon as it is known.

    The rules run on a worker thread in the seeds' order of checks (causes first: slow
    ranks, pipeline, links, exposed communication, data loading, host, then operators,
    memory, the job); each finding is yielded once its rule has run and so have the rules
    that may drop or fold it (``perfkit.advisor.runner.DECIDED_BY``). On the 1 M-task
    benchmark rank the first findings come before the operators are priced, the slowest
    part (``benchmarks/bench_first_answer.py``).

    Parameters
    ----------
    profile_or_cluster, model, parallel, hardware, assumptions, assumed, planner
        As for :func:`advise`.

    Yields
    ------
    Finding
        The same findings as :func:`advise` returns (every field equal), in the order
        they become final (the rules' order, but for a finding held for a later rule),
        not ranked: rank them with :func:`advise`, or sort what has come so far by
        ``(not f.measured, -f.score)``.

    Notes
    -----
    Stop early (``break``, or closing the iterator) and no further rule starts; the rule
    running then ends on the worker thread. A failure outside the rules (each rule's own
    errors become ``info`` findings, as in :func:`advise`) is raised here.
    """
    found: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    def work() -> None:
        try:
            with shared_results(), small_pages(), freed_memory_kept():
                ctx = Context(profile_or_cluster, model, parallel, hardware,
                              {**ASSUMPTIONS, **(assumptions or {})}, assumed, planner)
                runner.run(ctx, RULES, compute_ahead=COMPUTE_AHEAD, on_final=found.put,
                           stop=stop)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            found.put(_Failed(exc))
        finally:
            found.put(_DONE)

    worker = threading.Thread(target=work, name="perfkit-advise-iter", daemon=True)
    worker.start()
    try:
        while (item := found.get()) is not _DONE:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()


class _Failed:
    """An error of the worker thread, carried to the caller's."""

    def __init__(self, error: BaseException):
        self.error = error
