"""The rules of the advisor, each declared where it is written with :func:`rule`.

A rule is a function ``rule(ctx) -> list[Finding]`` in the module of its area. Its
decorator says everything the runner needs to know about it::

    @rule("operators", order=130, needs=("kernels",),
          frameworks=("mindspore", "torch_npu", "ascend"))
    def ai_cpu(ctx: Context) -> list[Finding]:
        ...

- ``order``: its place in the seeds' order of checks (causes before symptoms); rules run
  in this order and, among findings of equal weight, the earlier rule's come first;
- ``needs``: tables (:data:`~perfkit.advisor.context.TABLES`) without which it has
  nothing to say: when one is absent or empty the rule is not run (``"kernels|ops"``:
  either will do);
- ``inputs``: what ``advise`` must have been given (model, parallel, hardware);
- ``frameworks``: the frameworks it applies to (:data:`~perfkit.advisor.words.FRAMEWORKS`;
  default all of them);
- ``after``: the rules whose findings (:meth:`Context.findings`) or counted savings
  (:meth:`Context.counted`) it reads; it always runs after them, whatever its order, and
  the context refuses it what it reads of a rule it does not name;
- ``phases``, ``archs``, ``precisions``: the workloads it applies to
  (:mod:`perfkit.advisor.workload`: training / inference, transformer / other, fp32 /
  reduced; default all): on a job of another kind the runner skips it and says why
  (:meth:`Rule.unfit`); a job whose kind the profile cannot tell gets the rule;
- ``ahead``: shared analyses (:data:`~perfkit.advisor.context.AHEAD`) it reads that the
  runner may compute on a second thread while the rules before it run.

The rule's name is its function's name: ``Rule gemm could not run`` names it, and
``after=`` refers to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .context import AHEAD, INPUTS, TABLES, Context
from .finding import Finding
from .words import FRAMEWORKS
from .workload import ARCHS, PHASES, PRECISIONS, axis_of

__all__ = ["Rule", "rule", "AREAS", "registered", "run_order", "rule_of"]

#: Areas of rules, one module each (the findings' own ``area`` may be finer).
AREAS = ("cluster", "communication", "host", "operators", "memory_recompute", "job")

RuleFunction = Callable[[Context], list[Finding]]


@dataclass(frozen=True)
class Rule:
    """One rule and what it declares (see the module's docstring)."""

    name: str
    area: str
    order: int
    check: RuleFunction
    needs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = FRAMEWORKS
    after: tuple[str, ...] = ()
    ahead: tuple[str, ...] = ()
    phases: tuple[str, ...] = PHASES
    archs: tuple[str, ...] = ARCHS
    precisions: tuple[str, ...] = PRECISIONS

    def unfit(self, ctx: Context) -> str:
        """Why the profiled job is not of a workload this rule applies to (``""``: it is,
        or the profile cannot tell), starting with the axis (``"phase: training only;
        this is inference (...)"``); only the axes the rule restricts are read."""
        for axis, allowed, every in (("phase", self.phases, PHASES),
                                     ("arch", self.archs, ARCHS),
                                     ("precision", self.precisions, PRECISIONS)):
            if allowed == every:
                continue
            value, why = axis_of(ctx, axis)
            if value is not None and value not in allowed:
                return f"{axis}: {'/'.join(allowed)} only; this is {value}: {why}"
        return ""

    def applies_to(self, ctx: Context) -> bool:
        """Whether the job has this rule's inputs and framework (cheap: no table read)."""
        return ctx.fw in self.frameworks and all(ctx.has_input(i) for i in self.inputs)

    def runs_on(self, ctx: Context) -> bool:
        """Whether the rule has something to read: :meth:`applies_to`, and its tables."""
        return self.applies_to(ctx) and all(
            any(ctx.has_table(t) for t in need.split("|")) for need in self.needs)


_RULES: dict[str, Rule] = {}


def rule(area: str, *, order: int, needs: Iterable[str] = (), inputs: Iterable[str] = (),
         frameworks: Iterable[str] = FRAMEWORKS, after: Iterable[str] = (),
         ahead: Iterable[str] = (), phases: Iterable[str] = PHASES,
         archs: Iterable[str] = ARCHS,
         precisions: Iterable[str] = PRECISIONS) -> Callable[[RuleFunction], RuleFunction]:
    """Register the decorated function as a rule of ``area`` (returned unchanged).

    Raises
    ------
    ValueError
        On a name that another module's rule has, or an area, table, input, framework
        or analysis that does not exist.
    """
    needs, inputs, frameworks = tuple(needs), tuple(inputs), tuple(frameworks)
    after, ahead = tuple(after), tuple(ahead)
    _known("area", [area], AREAS)
    _known("table", [t for need in needs for t in need.split("|")], TABLES)
    _known("input", inputs, INPUTS)
    _known("framework", frameworks, FRAMEWORKS)
    _known("analysis ahead", ahead, AHEAD)
    phases, archs, precisions = tuple(phases), tuple(archs), tuple(precisions)
    _known("phase", phases, PHASES)
    _known("arch", archs, ARCHS)
    _known("precision", precisions, PRECISIONS)

    def register(check: RuleFunction) -> RuleFunction:
        name = check.__name__
        twin = _RULES.get(name)
        if twin is not None and twin.check.__module__ != check.__module__:
            raise ValueError(f"two rules are named {name!r} ({twin.check.__module__}, "
                             f"{check.__module__})")
        _RULES[name] = Rule(name, area, int(order), check, needs, inputs, frameworks, after,
                            ahead, phases, archs, precisions)
        return check

    return register


def _known(what: str, given: Iterable[str], known: tuple[str, ...]) -> None:
    wrong = [g for g in given if g not in known]
    if wrong:
        raise ValueError(f"unknown {what} {wrong} (one of {known})")


def registered() -> tuple[Rule, ...]:
    """Every rule registered, in run order (:func:`run_order`).

    Raises
    ------
    ValueError
        When a rule names in ``after=`` a rule that does not exist.
    """
    for r in _RULES.values():
        unknown = [a for a in r.after if a not in _RULES]
        if unknown:
            raise ValueError(f"rule {r.name} runs after {unknown}, which are not rules")
    return tuple(run_order(_RULES.values()))


def rule_of(check: RuleFunction) -> Rule:
    """The registered :class:`Rule` of a rule function."""
    found = _RULES.get(getattr(check, "__name__", ""))
    if found is None or found.check is not check:
        raise ValueError(f"{check!r} is not a registered rule")
    return found


def run_order(rules: Iterable[Rule]) -> list[Rule]:
    """``rules`` by ``order``, each moved after the rules it names in ``after=``.

    A rule named in ``after=`` but absent from ``rules`` does not hold the others back.

    Raises
    ------
    ValueError
        When rules wait for each other in a circle.
    """
    todo = sorted(rules, key=lambda r: (r.order, r.name))
    present = {r.name for r in todo}
    done: list[Rule] = []
    ran: set[str] = set()
    while todo:
        ready = next((r for r in todo if all(a in ran or a not in present for a in r.after)),
                     None)
        if ready is None:
            raise ValueError("rules wait for each other: "
                             + ", ".join(f"{r.name} after {list(r.after)}" for r in todo))
        todo.remove(ready)
        done.append(ready)
        ran.add(ready.name)
    return done
