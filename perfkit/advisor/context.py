"""What the rules share during one ``advise`` call: the job, and analyses computed once.

A :class:`Context` holds the profile and the job's model, parallel layout and hardware,
the analyses the rules read (each computed once, by whichever thread asks first), and
what the rules have already found or counted, handed only to a later rule that names
the earlier one in its ``after=`` (:mod:`perfkit.advisor.registry`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

import pandas as pd

from ..analysis import cluster as _cluster
from ..analysis import efficiency as _eff
from ..analysis import memory as _memory
from ..analysis import operators as _ops
from ..analysis import recompute as _rc
from ..analysis._frames import is_lazy, table_columns
from ..analysis._util import has_values, n_step_pairs, table
from ..analysis._util.access import check_profile
from ..analysis.recorded import recorded_mask, recorded_pairs, recorded_profile
from ..analysis.steps import step_breakdown
from ..errors import InvalidArgumentError
from ..format import ranges_text
from ..job.fields import LABELS as FIELD_LABELS
from ..job.measured import TRAINING_STEP, read_training_step
from .finding import Finding
from .words import framework_of

__all__ = ["Context", "ASSUMPTIONS", "TABLES", "INPUTS", "AHEAD"]

#: Conventions of the operator rules (override with ``advise(..., assumptions={...})``):
#: ``kernel_efficiency`` share of its roofline that a good kernel reaches (what a fix is
#: scored against); ``far_below`` a GEMM is "far below its roofline" under this efficiency;
#: ``min_chain`` element-wise kernels in a row that form a chain; ``deterministic`` the
#: usual slow-down of deterministic kernels (evidence only, the finding is unmeasured).
ASSUMPTIONS: dict[str, float] = {"kernel_efficiency": 0.7, "far_below": 0.35,
                                 "min_chain": 3, "deterministic": 0.3}

#: Tables a rule may need (:meth:`Context.has_table`): the canonical tables of a profile;
#: ``steps`` is the step breakdown, the profiler's step table or one derived from the
#: device tasks (:func:`perfkit.analysis.step_breakdown`).
TABLES = ("kernels", "ops", "steps", "comm_ops", "comm_bandwidth", "comm_matrix", "memory",
          "op_memory")
#: What ``advise`` was given that a rule may need (:meth:`Context.has_input`).
INPUTS = ("model", "parallel", "hardware")
#: Shared analyses worth computing on a second thread while the rules run
#: (:meth:`Context.compute_ahead`): they start from the device tasks, not from the step
#: and gap tables the first rules read. ``recompute`` (the attention passes, and the
#: ``recompute_`` scopes where they show none) and ``memory_frac`` (the device's memory
#: peak) come last: the rules that read them run last. Queued there, the peak is read by
#: the rules' thread while it waits for the attention passes, instead of after them.
AHEAD = ("efficiency", "chains", "recompute", "memory_frac")


def _mean_of_slowest(step: pd.Series, us: pd.Series) -> float:
    """Mean over steps of the largest ``us`` of each step (its slowest rank); rows of step
    NA (tasks of no step) are left out where other rows have a step, and rows with no
    ``us`` (both Series on one index)."""
    per = pd.DataFrame({"step": step, "w": us.astype("float64")}).dropna(subset=["w"])
    stepped = per["step"].notna().to_numpy(bool)
    if stepped.any():
        per = per[stepped]
    return float(per.groupby("step", dropna=False)["w"].max().mean())


def _specs(model: Any, parallel: Any, hardware: Any) -> tuple[Any, Any, Any]:
    """``advise``'s model, layout and device, checked: a preset name becomes its spec; what
    is neither the spec nor a name is refused, not left for a rule to trip on (a walk's
    ``hardware="nonsense"`` turned into four "could not run" findings)."""
    from ..specs import Hardware, ModelSpec, ParallelConfig

    def preset(kind: Any, name: str, given: str) -> Any:
        try:
            return kind.preset(given)
        except InvalidArgumentError as exc:  # named as advise's argument, not preset's
            raise InvalidArgumentError(name, exc.rule, exc.value) from None

    if isinstance(model, str):
        model = preset(ModelSpec, "model", model)
    if isinstance(hardware, str):
        hardware = preset(Hardware, "hardware", hardware)
    for name, value, kind in (("model", model, ModelSpec), ("parallel", parallel,
                                                            ParallelConfig),
                              ("hardware", hardware, Hardware)):
        if value is not None and not isinstance(value, kind):
            raise InvalidArgumentError(name, f"must be a perfkit.{kind.__name__}"
                                       + (" or a preset name" if kind is not ParallelConfig
                                          else ""), type(value).__name__)
    return model, parallel, hardware


class Context:
    """Lazily computed analyses shared by the rules.

    Each analysis is computed once, by the first rule (or the thread computing ahead,
    :meth:`compute_ahead`) that asks; a rule that asks while another thread computes it
    waits for that result, and an analysis that failed fails again for every rule that
    asks (each rule then reports it as its own ``info`` finding).

    Parameters
    ----------
    profile : Profile or Cluster
        What ``advise`` was given (a lazy cluster too).
    model, parallel, hardware : optional
        The job; ``hardware`` defaults to the profiled device where the profile says.
    assumptions : dict
        :data:`ASSUMPTIONS`, with the caller's overrides.
    assumed : iterable of str
        The fields of ``parallel`` the caller assumed rather than read
        (:meth:`assumed_note`).
    planner : callable, optional
        Gives the Planner's calibration of this profile and job (or None), with which a
        change of layout is priced (``advise``'s ``planner``).
    """

    def __init__(self, profile: Any, model: Any, parallel: Any, hardware: Any,
                 assumptions: dict[str, float], assumed: Iterable[str] = (),
                 planner: Callable[[], Any] | None = None):
        check_profile(profile, "profile_or_cluster")
        model, parallel, hardware = _specs(model, parallel, hardware)
        self.profile, self.model, self.parallel = profile, model, parallel
        self.planner = planner
        self.assumed = frozenset(assumed)
        self.hardware_given = hardware is not None
        self.hardware_why = "given"
        if hardware is None:
            hardware, self.hardware_why = _eff.infer_hardware(profile)
        self.hardware = hardware
        self.fw = framework_of(profile)
        self.assume = assumptions
        self._results: dict[str, Future[Any]] = {}
        self._guard = threading.Lock()
        #: Findings of each rule that has run (filled by the runner).
        self._found: dict[str, list[Finding]] = {}
        #: Savings a rule already counted (key -> (rule, µs per step)), read by a later
        #: rule so as not to count them twice (a slow link's share of the exposed
        #: communication, ...).
        self._counted: dict[str, tuple[str, float]] = {}
        self._running, self._reads = "", frozenset[str]()
        #: Analyses of :data:`AHEAD` to compute on a second thread (set by the runner from
        #: the rules it runs; ``None``: not planned).
        self.ahead: tuple[str, ...] | None = None
        #: Analyses of :meth:`compute_ahead` not started yet, taken in order by the thread
        #: computing ahead or by a rule's thread while it waits (:meth:`get`).
        self._queued: deque[str] = deque()

    # ----------------------------------------------------------------- shared results

    def assumed_note(self, *fields: str) -> str:
        """``" (micro-batches 2 assumed: the profile does not record it; ...)"``: what a
        finding resting on ``fields`` of the layout says when the caller assumed them
        (``assumed``); empty when all were read or given."""
        said = [f"{FIELD_LABELS.get(f, f)} {getattr(self.parallel, f, '?')}"
                for f in fields if f in self.assumed]
        if not said:
            return ""
        one = len(said) == 1
        return (f" ({' and '.join(said)} assumed: the profile does not record "
                f"{'it' if one else 'them'}; set {'it' if one else 'them'} in the job if "
                "the run used other values)")

    def get(self, key: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, computed once per advise call, by whichever thread asks first."""
        with self._guard:
            result = self._results.get(key)
            mine = result is None
            if result is None:
                result = self._results[key] = Future()
        if mine:
            try:
                result.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - kept for every rule that asks
                result.set_exception(exc)
        elif not result.done():  # another thread computes it: help with what is queued
            self._run_queued()
        return result.result()

    @property
    def tasks(self) -> Any:
        """The profile with only the device tasks of the steps recorded in full
        (:func:`perfkit.analysis.recorded.recorded_profile`): what the operator rules
        read, so that no chain, pattern or sum comes from a fragment of a step's tasks.
        The profile itself when every step's tasks were recorded."""
        return self.get("tasks", lambda: recorded_profile(self.profile))

    @property
    def fragments_only(self) -> bool:
        """Whether the profile says that no step's device tasks were recorded in full
        (every step's task list was cut short): the operator rules then find nothing."""
        return self.get("fragments_only", lambda: recorded_pairs(self.steps) == 0)

    def per_recorded_step(self, us_total: float) -> float:
        """A time summed over the tasks of :attr:`tasks`, per rank and step whose device
        tasks were recorded in full (:meth:`per_rank_step` when every step's were)."""
        n = self.get("recorded_pairs", lambda: recorded_pairs(self.steps))
        return us_total / n if n else self.per_rank_step(us_total)

    def recorded_basis(self) -> tuple[float | None, str]:
        """The step a time per step over :attr:`tasks` is a share of, and its words
        (:meth:`basis_over`): the mean step over the steps whose device tasks were
        recorded in full on some rank, where those are some of the profile's steps only
        (``ascend/mindinsight-legacy``'s PROF folder: step 1 of 10, 47.6 ms, where the
        mean of the 10 is 35.8 ms); ``(None, "")`` where every step's were."""
        def compute() -> tuple[float | None, str]:
            mask = recorded_mask(self.steps)
            if mask is None or bool(mask.all()):
                return None, ""
            ids = self.steps.loc[mask.to_numpy(bool), "step"]
            return self.basis_over(ids, "with its device tasks recorded")
        return self.get("recorded_basis", compute)

    def efficiency(self) -> pd.DataFrame:
        """Operators against the roofline (:func:`perfkit.analysis.operator_efficiency`),
        of the steps whose device tasks were recorded in full (:attr:`tasks`)."""
        return self.get("eff", lambda: _eff.operator_efficiency(self.tasks, self.hardware))

    def chains(self) -> pd.DataFrame:
        """Runs of element-wise kernels (:func:`perfkit.analysis.elementwise_chains`), of
        the steps whose device tasks were recorded in full (:attr:`tasks`). The copy
        kernels are in none (``without_copies``): the ``redundant_copies`` finding counts
        their whole time."""
        return self.get("chains", lambda: _eff.elementwise_chains(
            self.tasks, self.hardware, min_chain=int(self.assume["min_chain"]),
            kernel_efficiency=self.assume["kernel_efficiency"], without_copies=True))

    def recompute_evidence(self) -> pd.DataFrame:
        """Forward / backward attention passes (:func:`perfkit.analysis.recompute_evidence`)."""
        return self.get("recompute", lambda: _ops.recompute_evidence(self.profile))

    def training_step(self) -> tuple[bool | None, str]:
        """Whether the profiled step trains (runs a backward pass), and what that was read
        from, by the rule the job and the Overview use
        (:func:`perfkit.job.measured.read_training_step`): ``(False, why)`` for an
        inference or evaluation step, ``(None, "")`` where the profile cannot tell."""
        def compute() -> tuple[bool | None, str]:
            out: dict[str, Any] = {}
            read_training_step(self.profile, out)
            seen = out.get(TRAINING_STEP)
            return (None, "") if seen is None else (seen.value, seen.detail)
        return self.get("training_step", compute)

    def recompute_scopes(self) -> pd.DataFrame:
        """``recompute_`` scopes in the names (:func:`perfkit.analysis.recompute_scopes`)."""
        return self.get("recompute_scopes", lambda: _rc.recompute_scopes(self.profile))

    def recompute(self) -> None:
        """What the recompute rule reads: the attention passes, and the ``recompute_`` scopes
        where the passes show no recompute or the profile is MindSpore's, whose names carry
        them (for :meth:`compute_ahead`)."""
        seen = self.recompute_evidence()
        if self.fw == "mindspore" or seen.empty or not (seen["recompute"] != "none").any():
            self.recompute_scopes()

    def compute_ahead(self, analyses: Sequence[str] = AHEAD) -> None:
        """Compute shared analyses of :data:`AHEAD` (by name), for the rules to come.

        Run on a second thread while the rules run in order on the first (pricing the
        operators is the largest analysis and does not start from the step and gap
        tables, so the two overlap on two cores). A rule that waits for one of them takes
        the next not started meanwhile (:meth:`get`), so neither thread idles while work is
        left. Errors stay with the result and reach the rule that asks for it.
        """
        with self._guard:
            self._queued.extend(analyses)
        self._run_queued()

    def _run_queued(self) -> None:
        """Compute the queued analyses of :meth:`compute_ahead`, one at a time, until none
        is left (another thread may take some)."""
        while True:
            with self._guard:
                if not self._queued:
                    return
                name = self._queued.popleft()
            try:
                member = getattr(type(self), name)  # a method, or a property (memory_frac)
                member.fget(self) if isinstance(member, property) else member(self)
            except Exception:  # noqa: BLE001, S112 - raised again to the rule that asks
                continue

    @property
    def steps(self) -> pd.DataFrame:
        """The step breakdown (:func:`perfkit.analysis.step_breakdown`)."""
        return self.get("steps", lambda: step_breakdown(self.profile))

    def gaps(self) -> pd.DataFrame:
        """Idle gaps between the device tasks of each (rank, step) (``host_bound``)."""
        return self.get("host", lambda: _cluster.host_bound(self.profile))

    @property
    def step_us(self) -> float:
        """Measured step: mean over steps of the slowest rank's span plus its preparing.

        A breakdown derived from the device tasks groups the tasks of no step under step
        NA: not a step where other rows have one (as :attr:`n_pairs` and the operator
        analyses, :func:`~perfkit.analysis._util.in_steps`), so it is left out of the mean.
        """
        def compute() -> float:
            s = self.steps
            if not has_values(s, "step_us"):
                # no step table: the device span of each (rank, step) from its tasks
                hb = self.gaps()
                if hb.empty or not has_values(hb, "span_us"):
                    return float("nan")
                return _mean_of_slowest(hb["step"], hb["span_us"])
            wall = s["step_us"] + (s["preparing_us"].fillna(0.0)
                                   if "preparing_us" in s.columns else 0.0)
            return _mean_of_slowest(s["step"], wall)
        return self.get("step_us", compute)

    def step_us_over(self, steps: Iterable[Any]) -> float:
        """The measured step (:attr:`step_us`: the mean over steps of the slowest rank's
        span plus its preparing) over the given steps only: the step a time measured in
        those steps alone is a share of."""
        s = self.steps
        if not has_values(s, "step_us"):
            return float("nan")
        keep = s["step"].isin(list(steps)).fillna(False).to_numpy(bool)
        if not keep.any():
            return float("nan")
        s = s[keep]
        wall = s["step_us"] + (s["preparing_us"].fillna(0.0)
                               if "preparing_us" in s.columns else 0.0)
        return _mean_of_slowest(s["step"], wall)

    def basis_over(self, measured_in: Iterable[Any], what: str) -> tuple[float | None, str]:
        """The step a time measured in some steps only is a share of, and its words: the
        mean over the steps ``measured_in`` of the measured step (:meth:`step_us_over`),
        with ``"step 1, the only step {what}"`` or ``"the mean over steps 1-3, the 3 of
        10 {what}"``; ``(None, "")`` where those are all the profile's steps (the share
        is then of :attr:`step_us`)."""
        ids = pd.to_numeric(pd.Series(list(measured_in), dtype="object"), errors="coerce")
        steps = sorted({int(x) for x in ids.dropna()})
        every = int(self.steps["step"].dropna().nunique()) if "step" in self.steps else 0
        if not steps or len(steps) >= every:
            return None, ""
        said = (f"step {steps[0]}, the only step {what}" if len(steps) == 1 else
                f"the mean over steps {ranges_text(steps)}, the {len(steps)} of {every} "
                f"{what}")
        return self.step_us_over(steps), said

    @property
    def n_pairs(self) -> int:
        """(rank, step) pairs of the profile (divides a total summed over ranks and steps).

        A breakdown derived from the device tasks groups the tasks of no step under step
        NA: not a step where other rows have one, as the operator analyses leave those
        tasks out of their sums (:func:`~perfkit.analysis._util.in_steps`).
        """
        def compute() -> int:
            s = self.steps
            if s.empty:
                return n_step_pairs(table(self.profile, "kernels"))
            pairs = s[["rank", "step"]].drop_duplicates()
            stepped = pairs["step"].notna().to_numpy(bool)
            if stepped.any():
                pairs = pairs[stepped]
            return max(1, int(pairs.shape[0]))
        return self.get("n_pairs", compute)

    def per_rank_step(self, us_total: float) -> float:
        """A time summed over ranks and steps, per rank and step."""
        return us_total / self.n_pairs

    def rank_median(self, column: str) -> pd.Series:
        """Per-rank median over steps of a steps column (once per call of ``advise``; the
        same Series for every rule, which must not change it)."""
        def compute() -> pd.Series:
            s = self.steps
            if not has_values(s, column):
                return pd.Series(dtype="float64")
            return s.groupby("rank")[column].median()
        return self.get(f"rank_median:{column}", compute)

    @property
    def memory_frac(self) -> tuple[float, float, float]:
        """(measured device peak bytes, capacity bytes, peak / capacity) or NaNs."""
        def compute() -> tuple[float, float, float]:
            if self.hardware is None:
                return (float("nan"),) * 3
            used = _memory.device_reserved_peak(self.profile)
            if used != used:  # NaN: no device memory sample with a reserved figure
                return (float("nan"),) * 3
            cap = float(self.hardware.memory_bytes)
            return used, cap, used / cap
        return self.get("memfrac", compute)

    @property
    def one_rank(self) -> bool:
        """Whether the profile holds one rank (a Profile, or a Cluster of one): its
        figures are that rank's, with no slowest, worst or median rank among several."""
        ranks = getattr(self.profile, "ranks", None)
        return not ranks or len(ranks) == 1

    @property
    def over_ranks_and_steps(self) -> str:
        """What a count or total summed over the profile is over, in words: ``"over ranks
        and steps"``, or ``"over steps"`` on a profile of one rank (:attr:`one_rank`)."""
        return "over steps" if self.one_rank else "over ranks and steps"

    def rank_metas(self) -> list[Any]:
        """The metadata of each rank (of the profile itself for one rank)."""
        members = list(self.profile) if hasattr(self.profile, "ranks") else [self.profile]
        return [getattr(p, "meta", None) for p in members]

    # ----------------------------------------------------------------- what a rule needs

    def has_table(self, name: str) -> bool:
        """Whether table ``name`` of :data:`TABLES` has rows for this profile.

        A lazy cluster's table counts when it has columns (counting its rows would read
        every rank); its rule then finds the rows empty, as on a profile in memory.
        """
        if name == "steps":
            return not self.steps.empty
        if is_lazy(self.profile):
            return bool(table_columns(self.profile, name))
        return not table(self.profile, name).empty

    def has_input(self, name: str) -> bool:
        """Whether ``advise`` has ``name`` of :data:`INPUTS` (the hardware also inferred)."""
        return getattr(self, name) is not None

    # ------------------------------------------------- what earlier rules found or counted

    def start(self, rule: str, reads: Iterable[str]) -> None:
        """Rule ``rule`` runs now; it may read what the rules ``reads`` found or counted."""
        self._running, self._reads = rule, frozenset(reads)

    def record(self, rule: str, found: list[Finding]) -> None:
        """Keep what rule ``rule`` found, for the rules that name it in ``after=``."""
        self._found[rule] = list(found)

    def findings(self, *rules: str) -> list[Finding]:
        """What the earlier ``rules`` found (nothing for a rule that did not run)."""
        self._check_reads(rules)
        return [f for r in rules for f in self._found.get(r, [])]

    def count(self, key: str, us_per_step: float) -> None:
        """Record a saving the running rule counted, so that no later rule counts it again."""
        self._counted[key] = (self._running, us_per_step)

    def counted(self, key: str) -> float:
        """A saving an earlier rule counted under ``key`` (0 when none did)."""
        rule, value = self._counted.get(key, ("", 0.0))
        if rule:
            self._check_reads([rule])
        return value

    def _check_reads(self, rules: Iterable[str]) -> None:
        unnamed = sorted(set(rules) - self._reads)
        if unnamed:
            raise RuntimeError(f"rule {self._running} reads what {', '.join(unnamed)} found "
                               "but does not name it in after=")
