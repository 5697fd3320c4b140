"""Run the registered rules on one context, in order, and rank what they found.

The rules run one after another on the calling thread, in the order of the registry
(:func:`~perfkit.advisor.registry.run_order`); a rule whose tables, inputs or framework
are missing is not run, and a rule that fails becomes an ``info`` finding. Meanwhile the
shared analyses that the rules declare ``ahead=`` are computed on a second thread
(:func:`_start_ahead`). Then symptoms that a cause already explains are dropped
(:func:`dedupe`) and the findings are ranked.

Each finding is also handed on as soon as it is final (``on_final``): when its rule has
run and so have the rules whose findings may drop or fold it (:data:`DECIDED_BY`). That
is what :func:`perfkit.advisor.advise_iter` streams, so that the first findings show while
the slowest rule (pricing the operators) still runs.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from collections.abc import Callable, Collection, Iterable, Sequence

from ..analysis._frames import is_lazy
from .context import Context
from .finding import SEVERITY_ORDER, Finding, unmeasured
from .registry import Rule, registered, rule_of, run_order

__all__ = ["run", "dedupe", "ahead_of", "DECIDED_BY"]

_SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITY_ORDER)}

#: The rules (by registered name) whose findings :func:`dedupe` reads to decide the fate
#: of a finding (by its ``rule``): a finding is final once these have run.
DECIDED_BY: dict[str, tuple[str, ...]] = {
    "slow_ranks": ("data_loading",),  # a late start is the loader's stall seen per rank
    "synchronisation": ("host_bound", "long_gaps"),  # its idle time is in the host's gaps
}


def run(ctx: Context, rules: Iterable[Callable[[Context], list[Finding]]],
        compute_ahead: bool = True, on_final: Callable[[Finding], None] | None = None,
        stop: threading.Event | None = None) -> list[Finding]:
    """Run ``rules`` (registered rule functions) on ``ctx`` and rank their findings.

    Parameters
    ----------
    ctx : Context
        The profile, the job and the shared analyses of this ``advise`` call.
    rules : iterable of rule functions
        Which rules to run; they run in the registry's order whatever this order.
    compute_ahead : bool
        Whether the analyses the rules declare ``ahead=`` may be computed on a second
        thread (the findings are the same either way).
    on_final : callable, optional
        Called with each finding as soon as it is final (as :func:`dedupe` leaves it), in
        the order the rules run; the returned list holds the same findings, ranked.
    stop : threading.Event, optional
        When set, no further rule starts (the findings so far are returned).

    Returns
    -------
    list of Finding
        Measured findings first, most time at stake first; then the unmeasured ones
        (``warning`` before ``info``); among equals, the earlier rule's first.
    """
    plan = run_order(rule_of(r) for r in rules)
    ctx.ahead = ahead_of(plan, ctx) if compute_ahead else ()
    thread = _start_ahead(ctx)
    try:
        found = _run_rules(ctx, plan, on_final, stop)
    finally:
        if thread is not None:
            thread.join()  # its results live in the caller's shared_results block
    kept = dedupe(found, folded_order=len(plan))
    return [f for _, f in sorted(kept, key=lambda of: (
        not of[1].measured, -of[1].score, _SEVERITY_RANK[of[1].severity], of[0]))]


def ahead_of(plan: Sequence[Rule], ctx: Context) -> tuple[str, ...]:
    """Shared analyses that the rules of ``plan`` which apply to the job declare ``ahead=``."""
    names: dict[str, None] = {}
    for r in plan:
        if r.ahead and r.applies_to(ctx):
            names.update(dict.fromkeys(r.ahead))
    return tuple(names)


def _start_ahead(ctx: Context) -> threading.Thread | None:
    """Start :meth:`Context.compute_ahead` on a second thread, when its rules will ask.

    The analyses are ``ctx.ahead`` (from the rules to run, :func:`ahead_of`; every
    registered rule when not set): none when the rules that read them do not apply (the
    pricing rules need the device's roofline). A lazy cluster's analyses already run on
    the Dask workers.
    """
    analyses = ctx.ahead if ctx.ahead is not None else ahead_of(registered(), ctx)
    if not analyses or is_lazy(ctx.profile):
        return None
    thread = threading.Thread(target=contextvars.copy_context().run,
                              args=(ctx.compute_ahead, analyses),
                              name="perfkit-advise-ahead", daemon=True)
    thread.start()
    return thread


def _run_rules(ctx: Context, plan: Sequence[Rule],
               on_final: Callable[[Finding], None] | None = None,
               stop: threading.Event | None = None) -> list[tuple[int, Finding]]:
    """Every rule of ``plan`` in order: (its position, finding) for each finding."""
    found: list[tuple[int, Finding]] = []
    planned = {r.name for r in plan}
    ran: set[str] = set()
    held: list[tuple[int, Finding]] = []  # found, not yet final
    skipped: dict[str, str] = {}  # rule -> why the job is not of its workload
    for order, r in enumerate(plan):
        if stop is not None and stop.is_set():
            break
        ctx.start(r.name, r.after)
        try:
            unfit = r.unfit(ctx) if r.runs_on(ctx) else "not run"
            if unfit.startswith("phase: "):  # worth saying: the job does not do what it checks
                skipped[r.name] = unfit.removeprefix("phase: ")
            got = r.check(ctx) if unfit == "" else []
        except Exception as exc:  # noqa: BLE001 - one rule must not hide the others
            got = [unmeasured(
                r.name, "metrics", f"Rule {r.name} could not run on this profile",
                f"{type(exc).__name__}: {exc}", "Report this with the profile's format.",
                severity="info")]
        ctx.record(r.name, got)
        found.extend((order, f) for f in got)
        ran.add(r.name)
        if on_final is not None:
            held.extend((order, f) for f in got)
            held = _hand_on_final(held, found, ran, planned, len(plan), on_final)
    if skipped:
        note = (len(plan), skipped_finding(skipped))
        found.append(note)
        held.append(note)
    if on_final is not None and held:  # stopped early: what is held is final as it stands
        _hand_on_final(held, found, planned, planned, len(plan), on_final)
    return found


def skipped_finding(skipped: dict[str, str]) -> Finding:
    """The ``info`` finding that says which rules did not run because the profiled step is
    not of the phase they advise on (a training-only check on an inference step,
    :meth:`~perfkit.advisor.registry.Rule.unfit`), and why. Rules skipped on another axis
    (the fp32 rule on a bf16 job) are not listed: nothing was missed there."""
    names = ", ".join(f"{name} ({why})" for name, why in skipped.items())
    return unmeasured(
        "workload_fit", "metrics",
        f"{len(skipped)} {'check does' if len(skipped) == 1 else 'checks do'} not apply to "
        "this job and did not run",
        f"Not run: {names}",
        "Nothing to change for them here; if the profile is not of the job you meant "
        "(a training step, say), profile that one.", severity="info")


def _hand_on_final(held: list[tuple[int, Finding]], found: list[tuple[int, Finding]],
                   ran: Collection[str], planned: Collection[str], folded_order: int,
                   on_final: Callable[[Finding], None]) -> list[tuple[int, Finding]]:
    """Hand the findings of ``held`` that are final to ``on_final``; those still held."""
    def final(f: Finding) -> bool:
        return all(r in ran or r not in planned for r in DECIDED_BY.get(f.rule, ()))

    ready = [of for of in held if final(of[1])]
    if ready:
        # dedupe reads only the findings of DECIDED_BY's rules, all of which have run
        for _, f in dedupe(ready, folded_order, found):
            on_final(f)
    return [of for of in held if not final(of[1])]


def dedupe(found: list[tuple[int, Finding]], folded_order: int,
           context: list[tuple[int, Finding]] | None = None) -> list[tuple[int, Finding]]:
    """Drop symptoms that a cause already explains.

    ``found`` holds (rule position, finding); a finding folded into another (its time
    counted there) keeps ``score=0`` and goes after the rules' own: ``folded_order``.
    ``context``: every finding found so far, whose causes decide (default ``found``);
    the rules each decision reads are :data:`DECIDED_BY`.
    """
    rules = {f.rule for _, f in (found if context is None else context)
             if f.measured and f.score > 0}
    out = []
    for order, f in found:
        # a late step start on a few ranks is the data-loading stall seen per rank
        if f.rule == "slow_ranks" and "data_loading" in rules and "start" in f.title:
            continue
        # launch gaps are counted by host_bound; a synchronisation's idle time is in them
        if f.rule == "synchronisation" and {"host_bound", "host_stalls"} & rules:
            f = dataclasses.replace(f, evidence=f.evidence + " (its idle time is part of the "
                                    "gaps reported in the host finding)", score=0.0,
                                    ms_per_step=0.0, severity="info",
                                    details=f.details + "; counted in the host gaps")
            order = folded_order
        out.append((order, f))
    return out
