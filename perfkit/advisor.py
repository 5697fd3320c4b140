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
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._hugepages import small_pages
from .analysis import cluster as _cluster
from .analysis import communication as _comm
from .analysis import efficiency as _eff
from .analysis import memory as _memory
from .analysis import operators as _ops
from .analysis._frames import collect, is_lazy
from .analysis._util import has_values, shared_results, table, text_matches
from .analysis.steps import measured_step_s, step_breakdown

__all__ = ["Finding", "advise", "NOTEBOOKS", "RULES", "severity_of", "framework_of",
           "SEVERITY_THRESHOLDS", "SEVERITY_ORDER", "ASSUMPTIONS"]

#: Notebook to open for each area (the guided notebooks of DESIGN.md).
NOTEBOOKS = {
    "steps": "00_start_here.ipynb",
    "operators": "03_operators.ipynb",
    "communication": "04_communication.ipynb",
    "memory": "05_memory.ipynb",
    "recompute": "06_recompute.ipynb",
    "cluster": "07_cluster.ipynb",
    "host": "07_cluster.ipynb",
    "metrics": "01_metrics.ipynb",
}

#: (severity, lowest share of the step at stake) for measured findings.
SEVERITY_THRESHOLDS = (("high", 0.10), ("medium", 0.03), ("low", 0.01))
#: Severities from the most to the least urgent (``warning``: not measurable, but risky).
SEVERITY_ORDER = ("high", "medium", "low", "warning", "info")
_ORDER = {s: i for i, s in enumerate(SEVERITY_ORDER)}

#: Conventions of the operator rules (override with ``advise(..., assumptions={...})``):
#: ``kernel_efficiency`` share of its roofline that a good kernel reaches (what a fix is
#: scored against); ``far_below`` a GEMM is "far below its roofline" under this efficiency;
#: ``min_chain`` element-wise kernels in a row that form a chain; ``deterministic`` the
#: usual slow-down of deterministic kernels (evidence only, the finding is unmeasured).
ASSUMPTIONS: dict[str, float] = {"kernel_efficiency": 0.7, "far_below": 0.35,
                                 "min_chain": 3, "deterministic": 0.3}


def severity_of(score: float) -> str:
    """Severity of a measured finding from its share of the step at stake."""
    for name, lo in SEVERITY_THRESHOLDS:
        if score >= lo:
            return name
    return "info"


@dataclass(frozen=True)
class Finding:
    """One thing to fix (or to know), with its evidence and the step time at stake.

    Attributes
    ----------
    severity : str
        ``"high"``, ``"medium"``, ``"low"``, ``"info"`` (measured: from ``score``), or
        ``"warning"`` / ``"info"`` for a finding whose cost cannot be measured.
    area : str
        ``steps``, ``operators``, ``communication``, ``memory``, ``recompute``,
        ``cluster``, ``host`` or ``metrics``.
    title : str
        What was seen, in one line of plain words.
    evidence : str
        The numbers that show it.
    recommendation : str
        What to change, in the profiled framework's terms.
    notebook : str
        The notebook where the analysis is shown.
    score : float
        Share of the measured step time at stake (ranking key); 0 when not measured.
    rule : str
        Name of the rule that produced the finding.
    ms_per_step : float
        Milliseconds per training step at stake (NaN when not measured).
    measured : bool
        Whether ``ms_per_step`` comes from the measurement.
    details : str
        Rule id and the statistics behind the finding (for experts and bug reports).
    """

    severity: str
    area: str
    title: str
    evidence: str
    recommendation: str
    notebook: str
    score: float = 0.0
    rule: str = ""
    ms_per_step: float = float("nan")
    measured: bool = True
    details: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return dataclasses.asdict(self)


def _fmt_time(us: float) -> str:
    """A duration in the unit that fits, 3 significant digits (``1.23 ms``)."""
    if not np.isfinite(us):
        return "n/a"
    a = abs(us)
    value, unit = (us / 1e6, "s") if a >= 1e6 else (us / 1e3, "ms") if a >= 1e3 else (us, "µs")
    digits = max(0, 2 - int(math.floor(math.log10(abs(value))))) if value else 0
    return f"{value:.{digits}f} {unit}"


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f} %" if np.isfinite(x) else "n/a"


# --------------------------------------------------------------------------- framework

#: Frameworks the advice is worded for.
FRAMEWORKS = ("mindspore", "torch_npu", "pytorch_gpu", "ascend")


def framework_of(profile: Any) -> str:
    """``"mindspore"``, ``"torch_npu"``, ``"pytorch_gpu"`` or ``"ascend"`` (not known).

    From ``meta.framework`` (``mindspore`` / ``pytorch``), ``meta.device_type``
    (``npu`` / ``gpu``) and ``meta.source_format`` (Kineto traces are PyTorch).
    """
    metas = [getattr(profile, "meta", None)]
    if hasattr(profile, "ranks"):
        metas += [getattr(p, "meta", None) for p in list(profile)[:1]]
    fw = dev = fmt = ""
    for m in metas:
        if m is None:
            continue
        fw = fw or str(getattr(m, "framework", "") or "").lower()
        dev = dev or str(getattr(m, "device_type", "") or "").lower()
        fmt = fmt or str(getattr(m, "source_format", "") or "").lower()
    if fw == "mindspore" or fmt.startswith("mindspore"):
        return "mindspore"
    if dev == "gpu" or fmt == "kineto":
        return "pytorch_gpu"
    if fw == "pytorch":
        return "torch_npu"
    return "ascend"


def _say(fw: str, texts: dict[str, str]) -> str:
    """The text for framework ``fw`` (``"ascend"`` falls back to MindSpore + torch_npu)."""
    if fw in texts:
        return texts[fw]
    if fw == "ascend" and "torch_npu" in texts and "mindspore" in texts:
        return f"MindSpore: {texts['mindspore']} torch_npu: {texts['torch_npu']}"
    return texts.get("any", next(iter(texts.values())))


def _finding(ctx: _Context, rule: str, area: str, us_per_step: float, title: str,
             evidence: str, recommendation: str, details: str = "") -> Finding:
    """A measured finding: ``us_per_step`` at stake, share and severity from it."""
    us = float(us_per_step) if np.isfinite(us_per_step) else 0.0
    us = max(0.0, us)
    step = ctx.step_us
    share = us / step if np.isfinite(step) and step > 0 else 0.0
    share = float(min(1.0, share))
    return Finding(severity=severity_of(share), area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=share,
                   rule=rule, ms_per_step=us / 1e3, measured=True,
                   details=f"rule {rule}" + (f"; {details}" if details else ""))


def _unmeasured(rule: str, area: str, title: str, evidence: str, recommendation: str,
                severity: str = "warning", details: str = "") -> Finding:
    """A finding whose time cost cannot be measured (its own section, after the rest)."""
    return Finding(severity=severity, area=area, title=title, evidence=evidence,
                   recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=0.0, rule=rule,
                   ms_per_step=float("nan"), measured=False,
                   details=f"rule {rule}; time cost not measurable from the profile"
                   + (f"; {details}" if details else ""))


class _Context:
    """Lazily computed analyses shared by the rules.

    Each analysis is computed once, by the first rule (or the thread computing ahead,
    :meth:`compute_ahead`) that asks; a rule that asks while another thread computes it
    waits for that result, and an analysis that failed fails again for every rule that
    asks (each rule then reports it as its own ``info`` finding).
    """

    def __init__(self, profile: Any, model: Any, parallel: Any, hardware: Any,
                 assumptions: dict[str, float]):
        self.profile, self.model, self.parallel = profile, model, parallel
        self.hardware_given = hardware is not None
        self.hardware_why = "given"
        if hardware is None:
            hardware, self.hardware_why = _eff.infer_hardware(profile)
        self.hardware = hardware
        self.fw = framework_of(profile)
        self.assume = assumptions
        self._results: dict[str, Future[Any]] = {}
        self._guard = threading.Lock()
        #: Savings a rule already counted, read by a later rule so as not to count them
        #: twice (a slow link's share of the exposed communication, ...).
        self.counted: dict[str, float] = {}

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
        return result.result()

    def efficiency(self) -> pd.DataFrame:
        """Operators against the roofline (:func:`perfkit.analysis.operator_efficiency`)."""
        return self.get("eff", lambda: _eff.operator_efficiency(self.profile, self.hardware))

    def chains(self) -> pd.DataFrame:
        """Runs of element-wise kernels (:func:`perfkit.analysis.elementwise_chains`)."""
        return self.get("chains", lambda: _eff.elementwise_chains(
            self.profile, self.hardware, min_chain=int(self.assume["min_chain"]),
            kernel_efficiency=self.assume["kernel_efficiency"]))

    def compute_ahead(self) -> None:
        """Price the operators and find the element-wise chains, for the rules to come.

        Run on a second thread while the rules run in order on the first (the pricing
        is the largest analysis and the only one that does not start from the step and
        gap tables, so the two overlap on two cores). Errors stay with the result and
        reach the rule that asks for it.
        """
        for analysis in (self.efficiency, self.chains):
            try:
                analysis()
            except Exception:  # noqa: BLE001, S112 - raised again to the rule that asks
                continue

    @property
    def steps(self) -> pd.DataFrame:
        return self.get("steps", lambda: step_breakdown(self.profile))

    @property
    def step_us(self) -> float:
        """Measured step: mean over steps of the slowest rank's span plus its preparing."""
        def compute() -> float:
            s = self.steps
            if not has_values(s, "step_us"):
                # no step table: the device span of each (rank, step) from its tasks
                hb = _gaps(self)
                if hb.empty or not has_values(hb, "span_us"):
                    return float("nan")
                return float(hb.groupby("step", dropna=False)["span_us"].max().mean())
            wall = s["step_us"] + (s["preparing_us"].fillna(0.0)
                                   if "preparing_us" in s.columns else 0.0)
            per = pd.DataFrame({"step": s["step"], "w": wall}).dropna(subset=["w"])
            return float(per.groupby("step", dropna=False)["w"].max().mean())
        return self.get("step_us", compute)

    @property
    def n_pairs(self) -> int:
        """(rank, step) pairs of the profile (divides a total summed over ranks and steps)."""
        s = self.steps
        if s.empty:
            k = table(self.profile, "kernels")
            from .analysis._util import n_step_pairs
            return n_step_pairs(k)
        return max(1, int(s[["rank", "step"]].drop_duplicates().shape[0]))

    def per_rank_step(self, us_total: float) -> float:
        """A time summed over ranks and steps, per rank and step."""
        return us_total / self.n_pairs

    def rank_median(self, column: str) -> pd.Series:
        """Per-rank median over steps of a steps column."""
        s = self.steps
        if not has_values(s, column):
            return pd.Series(dtype="float64")
        return s.groupby("rank")[column].median()

    @property
    def memory_frac(self) -> tuple[float, float, float]:
        """(measured device peak bytes, capacity bytes, peak / capacity) or NaNs."""
        def compute() -> tuple[float, float, float]:
            if self.hardware is None:
                return (float("nan"),) * 3
            peaks = _memory.memory_peaks(self.profile)
            if peaks.empty or not has_values(peaks, "peak_reserved_bytes"):
                return (float("nan"),) * 3
            app = peaks[peaks["component"] == "APP"]
            basis = app if has_values(app, "peak_reserved_bytes") else peaks
            used = float(basis["peak_reserved_bytes"].max())
            cap = float(self.hardware.memory_bytes)
            return used, cap, used / cap
        return self.get("memfrac", compute)


# --------------------------------------------------------------------------- rules


def _rule_slow_ranks(ctx: _Context) -> list[Finding]:
    sr = ctx.get("slow", lambda: _cluster.slow_ranks(ctx.profile, parallel=ctx.parallel))
    slow = sr[sr["slow"].fillna(False).astype(bool)]
    out = []
    for metric, grp in slow.groupby("metric", sort=False):
        worst = grp.sort_values("excess_us", ascending=False).iloc[0]
        ranks = ", ".join(str(int(r)) for r in grp["rank"])
        plural = "s" if len(grp) > 1 else ""
        rank = int(worst["rank"])
        pct = float(worst["excess_pct"])
        if metric == "computing_us":
            title = (f"Rank{plural} {ranks} compute{'' if plural else 's'} {pct:.0f} % "
                     "slower than the others, who wait for it")
            rec = ("Compare that rank's operators with a normal rank's: the same operators "
                   "running slower mean a slow device (clock, temperature, a failing card: "
                   + _say(ctx.fw, {"pytorch_gpu": "check nvidia-smi -q and the XID errors",
                                   "any": "check npu-smi info and the device logs"})
                   + "); more operators mean unbalanced work (an uneven pipeline stage, MoE "
                   "routing). Replace or drain the slow device; the whole group waits for it "
                   "in every collective.")
        elif metric in ("free_us", "preparing_us"):
            title = f"Rank{plural} {ranks} start{'' if plural else 's'} the step late"
            rec = ("Look at that rank's host: data loading, CPU contention, a slow disk or a "
                   "noisy neighbour delay its step start, and the whole group waits for it "
                   "in every collective.")
        else:
            title = (f"Rank{plural} {ranks} spend{'' if plural else 's'} {pct:.0f} % more time "
                     "in exposed communication than the others")
            rec = ("Check that rank's links in the communication matrix (a slow link) and "
                   "whether it joins a collective that the others leave early.")
        stake, waited = _slow_rank_stake(ctx, rank, float(worst["excess_us"]))
        out.append(_finding(
            ctx, "slow_ranks", "cluster", stake, title,
            f"rank {rank}: {str(worst['phase'])} {_fmt_time(worst['value_us'])} per step "
            f"against {_fmt_time(worst['median_us'])} on the median rank "
            f"(+{_fmt_time(worst['excess_us'])})",
            rec, details=f"metric {metric}; robust z = {float(worst['z']):.1f}; check "
            f"order {int(worst['check_order'])} of the seed's cluster method; "
            f"peers wait {waited:.0f} µs per step"))
    return out


def _slow_rank_stake(ctx: _Context, rank: int, excess_us: float) -> tuple[float, float]:
    """What a slow rank costs the step: how long its peers wait for it, at most its excess.

    Peers are the ranks of its pipeline stage (all ranks without pipelining); each waits
    inside the collectives for the slow rank, so their exposed communication (receive wait
    excluded) exceeds the slow rank's by the delay. Without communication data: the excess.
    """
    s = ctx.steps
    if not has_values(s, "comm_not_overlapped_us"):
        return excess_us, float("nan")
    exp = s["comm_not_overlapped_us"] - (s["bubble_us"].fillna(0.0)
                                         if "bubble_us" in s.columns else 0.0)
    per = pd.DataFrame({"rank": s["rank"], "e": exp}).groupby("rank")["e"].median()
    if rank not in per.index:
        return excess_us, float("nan")
    stage = _cluster.stage_of_ranks(ctx.profile, parallel=ctx.parallel)
    peers = per.drop(index=rank)
    if not stage.empty and rank in stage.index:
        same = stage[stage == stage[rank]].index
        peers = peers[peers.index.isin(same)]
    if peers.empty:
        return excess_us, float("nan")
    waited = float(peers.median() - per[rank])
    if not np.isfinite(waited) or waited <= 0:
        return excess_us, waited
    return min(excess_us, waited), waited


def _rule_pipeline(ctx: _Context) -> list[Finding]:
    sb = ctx.get("stages", lambda: _cluster.stage_balance(ctx.profile, parallel=ctx.parallel))
    if sb.empty or len(sb) < 2:
        return []
    out = []
    worst = sb.loc[sb["stage_us"].idxmax()]
    fastest = sb.loc[sb["stage_us"].idxmin()]
    spread = float(worst["stage_us"] - fastest["stage_us"])
    theo = float(sb["theoretical_bubble"].iloc[0])
    # receive wait beyond the schedule's own bubble: what the stages lose waiting
    excess = (sb["bubble_us"] - (theo if np.isfinite(theo) else 0.0) * sb["stage_us"])
    excess_max = float(excess.clip(lower=0).max()) if excess.notna().any() else float("nan")
    fix = _say(ctx.fw, {
        "mindspore": "move layers off the slow stage (MindFormers offset / pipeline_stage "
                     "layer split; perfkit.plan.balance_pipeline proposes one)",
        "torch_npu": "move layers off the slow stage (Megatron / MindSpeed "
                     "--decoder-first/last-pipeline-num-layers or a custom layer split; "
                     "perfkit.plan.balance_pipeline proposes one)",
        "pytorch_gpu": "move layers off the slow stage (Megatron "
                       "--decoder-first/last-pipeline-num-layers, or your pipeline's split "
                       "points; perfkit.plan.balance_pipeline proposes one)"})
    # the faster stages wait for the slow one in their receives: that wait (beyond the
    # schedule's bubble) is what the imbalance costs, at most the spread of stage times
    imbalance = min(spread, excess_max) if np.isfinite(excess_max) else spread
    if spread > 0 and imbalance > 0:
        out.append(_finding(
            ctx, "stage_imbalance", "cluster", imbalance,
            f"Pipeline stage {int(worst['stage'])} takes {_pct(float(worst['imbalance']))} "
            f"longer than stage {int(fastest['stage'])}; the other stages wait for it",
            "own work per step (step minus receive wait): " + ", ".join(
                f"stage {int(r.stage)} (ranks {r.ranks}) {_fmt_time(r.stage_us)}"
                for r in sb.itertuples()) + f"; the stages wait {_fmt_time(excess_max)} per "
            "step in receives beyond the schedule's own bubble",
            f"Rebalance: {fix}; count the embedding on the first stage and the output "
            "layer and loss on the last.",
            details=f"spread of stage_us {spread:.0f} µs; receive wait beyond the schedule "
                    f"{excess_max:.0f} µs"))
    br = float(sb["bubble_ratio"].max())
    bub = float(sb["bubble_us"].max())
    if not np.isfinite(br) or bub <= 0:
        return out
    more_mb = _say(ctx.fw, {
        "mindspore": "raise micro_batch_num (MindFormers parallel_config) or use pipeline "
                     "interleave (pp_interleave_num)",
        "torch_npu": "raise the number of micro-batches (larger global batch or smaller "
                     "micro-batch) or use the interleaved schedule "
                     "(--num-layers-per-virtual-pipeline-stage)",
        "pytorch_gpu": "raise the number of micro-batches or use the interleaved schedule "
                       "(--num-layers-per-virtual-pipeline-stage)"})
    if not np.isfinite(theo):
        out.append(_unmeasured(
            "bubble", "cluster", "Pipeline bubble: how much is avoidable needs the schedule",
            f"receive wait up to {_fmt_time(bub)} per step ({br:.2f} of the stage's own work)",
            "Pass parallel= (pp, micro-batches, vpp) to compare with the schedule's own "
            f"bubble, (pp - 1) / micro-batches. Then {more_mb}.", severity="info"))
        return out
    stage_of_max = float(sb.loc[sb["bubble_ratio"].idxmax(), "stage_us"])
    extra = excess_max - (imbalance if out else 0.0)
    if np.isfinite(extra) and extra > 0:
        out.append(_finding(
            ctx, "bubble", "cluster", extra,
            "Pipeline bubble larger than the schedule explains",
            f"receive wait {_fmt_time(bub)} per step against {_fmt_time(theo * stage_of_max)} "
            f"that the schedule (pp, micro-batches, vpp) implies, after the stage imbalance",
            "Look for slow ranks and late sends first (they show up as receive wait); then "
            f"{more_mb}.", details=f"measured ratio {br:.3f}, theoretical {theo:.3f}"))
    out.append(_unmeasured(
        "schedule_bubble", "cluster",
        "The pipeline schedule itself leaves the stages idle for part of the step",
        f"(pp - 1) / micro-batches = {theo:.2f} of the stage's work, about "
        f"{_fmt_time(theo * stage_of_max)} per step",
        f"If memory allows, {more_mb}.", severity="info"))
    return out


def _exposed(ctx: _Context) -> tuple[float, int | None]:
    """Exposed communication per step on the rank that waits for nobody (and that rank).

    ``comm_not_overlapped - bubble`` per rank (median over steps); its minimum over
    ranks is transfer that no other rank's lateness explains.
    """
    s = ctx.steps
    if not has_values(s, "comm_not_overlapped_us"):
        return float("nan"), None
    exp = s["comm_not_overlapped_us"] - (s["bubble_us"].fillna(0.0)
                                         if "bubble_us" in s.columns else 0.0)
    per = pd.DataFrame({"rank": s["rank"], "e": exp.clip(lower=0)}).groupby("rank")["e"]
    per = per.median().dropna()
    if per.empty:
        return float("nan"), None
    return float(per.min()), int(per.idxmin())


def _rule_links(ctx: _Context) -> list[Finding]:
    sl = ctx.get("links", lambda: _comm.slow_links(ctx.profile))
    slow = sl[sl["slow"].fillna(False).astype(bool)]
    if slow.empty:
        return []
    w = slow.iloc[0]
    ratio = float(w["ratio_to_median"])
    s = ctx.steps
    ranks = {int(w["src_rank"]), int(w["dst_rank"])}
    exp = s["comm_not_overlapped_us"] - (s["bubble_us"].fillna(0.0)
                                         if "bubble_us" in s.columns else 0.0)
    per = pd.DataFrame({"rank": s["rank"], "e": exp}).groupby("rank")["e"].median()
    on_link = per[per.index.isin(list(ranks))] if w["rank_space"] == "global" else per
    exposed = float(on_link.min()) if len(on_link.dropna()) else float("nan")
    # a collective runs at the pace of its slowest link: at the normal bandwidth its
    # exposed transfer would shrink to `ratio` of what it is
    saving = exposed * (1.0 - ratio) if np.isfinite(exposed) else 0.0
    ctx.counted["link_saving"] = saving
    link = _say(ctx.fw, {"pytorch_gpu": "NVLink / InfiniBand (nvidia-smi nvlink -e, "
                                        "ibstat, NCCL_DEBUG=INFO)",
                         "any": "HCCS / RoCE (npu-smi info, hccn_tool -i N -link -g, "
                                "the device logs)"})
    return [_finding(
        ctx, "slow_link", "communication", saving,
        f"Slow {w['transport']} link between ranks {int(w['src_rank'])} and "
        f"{int(w['dst_rank'])}: {_pct(ratio)} of the bandwidth of the others",
        f"{len(slow)} slow link(s); worst {w['bandwidth_gbps']:.2f} GB/s against a median of "
        f"{w['median_gbps']:.2f} GB/s; every collective of its group runs at its pace "
        f"(exposed communication on its ranks {_fmt_time(exposed)} per step)",
        f"Check the link ({link}: errors, cable, optics, switch port) and the rank "
        "placement; move the job off it until it is repaired.",
        details=f"{w['rank_space']} ranks; saving = exposed x (1 - ratio)")]


def _wait_fraction(ctx: _Context, rank: int | None) -> float:
    """Share of ``rank``'s collective time spent waiting for peers (NaN: not recorded)."""
    def compute() -> float:
        co = table(ctx.profile, "comm_ops")
        if rank is None or "wait_us" not in co.columns or "elapse_us" not in co.columns:
            return float("nan")
        mine = collect(co, ["wait_us", "elapse_us"], where=lambda f: f["rank"] == rank)
        total = float(mine["elapse_us"].sum())
        if mine["wait_us"].notna().sum() == 0 or total <= 0:
            return float("nan")
        return min(1.0, float(mine["wait_us"].fillna(0.0).sum()) / total)
    return ctx.get(f"wf{rank}", compute)


def _covers_job(ctx: _Context) -> bool:
    """Whether the profile holds every rank of the job (world size or groups say so).

    Then the least exposed rank waits for nobody in the profile; otherwise (or when the
    profile does not say) its waiting may be for ranks that were not profiled.
    """
    s = ctx.steps
    present = set(s["rank"].dropna().astype(int)) if "rank" in s.columns else set()
    metas = [getattr(ctx.profile, "meta", None), *_rank_metas(ctx.profile)]
    world = max((int(m.world_size) for m in metas
                 if m is not None and getattr(m, "world_size", None)), default=0)
    for m in metas:
        for g in (getattr(m, "groups", None) or {}).values():
            ranks = g.get("global_ranks", []) if isinstance(g, dict) else []
            world = max([world, *[int(r) + 1 for r in ranks or []]])
    return world > 0 and len(present) >= world


def _rule_exposed_comm(ctx: _Context) -> list[Finding]:
    e, rank = _exposed(ctx)
    if not np.isfinite(e):
        return []
    waiting = 0.0
    wf = _wait_fraction(ctx, rank) if not _covers_job(ctx) else float("nan")
    if np.isfinite(wf):
        # even the least exposed rank may wait (for ranks outside the profile): the
        # profiler's split of each collective into transfer and wait tells which part is
        # communication
        waiting = e * wf
        ctx.counted["min_rank_wait"] = waiting
    stake = max(0.0, e - waiting - float(ctx.counted.get("link_saving", 0.0)))
    s = ctx.steps
    overlap = float("nan")
    if has_values(s, "communication_us") and has_values(s, "overlapped_us"):
        comm = float(s["communication_us"].median())
        overlap = float(s["overlapped_us"].median()) / comm if comm > 0 else float("nan")
    cs = ctx.get("comm", lambda: _comm.comm_summary(ctx.profile))
    if waiting > 0:
        ev = (f"rank {rank}, the least exposed, communicates {_fmt_time(e)} per step with "
              f"nothing computing, {_pct(wf)} of its collective time waiting for peers "
              "(see that finding)")
    else:
        ev = (f"rank {rank}, which waits for no other rank, communicates {_fmt_time(e)} per "
              "step with nothing computing")
    if np.isfinite(overlap):
        ev += f"; {_pct(overlap)} of all communication runs under computation"
    if not cs.empty:
        top = cs.iloc[0]
        ev += f"; largest: {top['op_type']} x{int(top['count'])}, {_fmt_time(top['total_us'])}"
        ev += " in total over ranks and steps"
    details = ""
    if ctx.hardware is not None:
        bw = ctx.get("bw", lambda: _comm.comm_bandwidth_summary(ctx.profile, ctx.hardware))
        low = bw[bw["efficiency"] < 0.3] if not bw.empty else bw
        for r in low.itertuples():
            ev += (f"; {r.transport} reaches {r.bandwidth_gbps:.1f} GB/s, "
                   f"{_pct(r.efficiency)} of its nominal {r.nominal_gbps:.0f} GB/s")
            details += f"low {r.transport} efficiency {r.efficiency:.3f}; "
    if np.isfinite(overlap) and overlap < 0.1:
        rec = _say(ctx.fw, {
            "mindspore": "Nothing overlaps: enable gradient communication fusion and overlap "
                         "(all_reduce_fusion_config, parallel_optimizer_config "
                         "gradient_accumulation_shard / optimizer_weight_shard_size) and "
                         "check that no synchronisation serialises the streams.",
            "torch_npu": "Nothing overlaps: reduce gradients in buckets during the backward "
                         "pass (DDP bucket_cap_mb, or Megatron / MindSpeed "
                         "--overlap-grad-reduce --overlap-param-gather) and check that no "
                         "synchronisation serialises the streams.",
            "pytorch_gpu": "Nothing overlaps: reduce gradients in buckets during the backward "
                           "pass (DDP bucket_cap_mb, FSDP backward_prefetch, or Megatron "
                           "--overlap-grad-reduce --overlap-param-gather) and check that no "
                           "synchronisation serialises the NCCL stream."})
    else:
        rec = _say(ctx.fw, {
            "mindspore": "Remove avoidable communication (re-distribution between operator "
                         "strategies), overlap the rest (all_reduce_fusion_config, optimizer "
                         "shard overlap) and keep model parallelism inside a node (HCCS).",
            "torch_npu": "Overlap gradient reduction with the backward pass (DDP "
                         "bucket_cap_mb / gradient_as_bucket_view, Megatron / MindSpeed "
                         "--overlap-grad-reduce), fuse small collectives into larger buckets "
                         "and keep tensor parallelism inside a node (HCCS).",
            "pytorch_gpu": "Overlap gradient reduction with the backward pass (DDP "
                           "bucket_cap_mb / gradient_as_bucket_view, FSDP prefetch, "
                           "Megatron --overlap-grad-reduce), fuse small collectives and keep "
                           "tensor parallelism inside an NVLink domain."})
    link = float(ctx.counted.get("link_saving", 0.0))
    if link > 0:
        ev += f"; {_fmt_time(min(link, e))} of it is the slow link's (see that finding)"
    return [_finding(ctx, "exposed_communication", "communication", stake,
                     "Communication is not hidden behind computation", ev, rec,
                     details=details.rstrip("; "))]


def _rule_comm_wait(ctx: _Context, already: list[Finding]) -> list[Finding]:
    """Waiting inside collectives that no other finding explains."""
    causes = {"slow_ranks", "data_loading", "stage_imbalance", "slow_link"}
    if any(f.rule in causes and f.measured and f.score >= 0.01 for f in already):
        return []
    s = ctx.steps
    if not has_values(s, "comm_not_overlapped_us"):
        return []
    e, _ = _exposed(ctx)
    own = float(ctx.counted.get("min_rank_wait", 0.0))
    exp = s["comm_not_overlapped_us"] - (s["bubble_us"].fillna(0.0)
                                         if "bubble_us" in s.columns else 0.0)
    per = pd.DataFrame({"rank": s["rank"], "e": exp}).groupby("rank")["e"].median()
    spread = max(0.0, float(per.median() - e)) if np.isfinite(e) else 0.0
    extra = spread + own
    ev = (f"the median rank spends {_fmt_time(spread)} per step more in exposed "
          "communication than the least exposed one")
    if own > 0:
        ev += (f", which itself waits {_fmt_time(own)} per step for its peers inside the "
               "collectives (peers outside the profile, or all late together)")
    if not np.isfinite(extra) or extra <= 0:
        return []
    return [_finding(
        ctx, "comm_wait", "communication", extra,
        "Ranks wait for each other inside their collectives", ev,
        "Find the rank that arrives late (step start, computation, host launch) in the "
        "cluster step trace; the waiting is its symptom, not a communication problem.")]


def _rule_data_loading(ctx: _Context) -> list[Finding]:
    dl = ctx.get("data", lambda: _cluster.data_loading(ctx.profile))
    if dl.empty or not has_values(dl, "stall_us"):
        return []
    per_step = dl.groupby("step", dropna=False)["stall_us"].max()
    stall = float(per_step.mean())
    if not np.isfinite(stall) or stall <= 0:
        return []
    worst = dl.loc[dl["stall_us"].idxmax()]
    pieces = []
    for col, label in (("preparing_us", "before the first device task"),
                       ("dataloader_us", "in data-loader operators"),
                       ("iteration_interval_us", "between steps")):
        if has_values(dl, col):
            pieces.append(f"{_fmt_time(float(dl[col].max()))} {label}")
    rec = _say(ctx.fw, {
        "mindspore": "Make the dataset pipeline produce ahead of the step: more parallel "
                     "workers (num_parallel_workers), prefetch (set_prefetch_size), data "
                     "sink mode (dataset_sink_mode=True), and move preprocessing off the "
                     "training process.",
        "torch_npu": "Make the DataLoader produce ahead of the step: more workers "
                     "(num_workers), prefetch_factor, persistent_workers=True, "
                     "pin_memory=True; move preprocessing offline or to other processes.",
        "pytorch_gpu": "Make the DataLoader produce ahead of the step: more workers "
                       "(num_workers), prefetch_factor, persistent_workers=True, "
                       "pin_memory=True, or GPU decoding (DALI); move preprocessing "
                       "offline."})
    return [_finding(
        ctx, "data_loading", "host", stall,
        "The device waits for the next batch at the start of the step",
        f"{_fmt_time(stall)} per step on average (slowest rank of each step; worst: rank "
        f"{int(worst['rank'])}, step {worst['step']}: {_fmt_time(float(worst['stall_us']))})"
        + (f"; up to {', '.join(pieces)}" if pieces else ""),
        rec)]


def _gaps(ctx: _Context) -> pd.DataFrame:
    return ctx.get("host", lambda: _cluster.host_bound(ctx.profile))


def _capped(ctx: _Context, gaps: pd.Series, before: pd.Series | None = None) -> pd.Series:
    """Per-rank gaps no longer than the rank's free time (minus gaps counted ``before``).

    Gaps between the device tasks are idle time only when every task is in the table; a
    profile whose communication tasks are missing from ``kernels`` would otherwise count
    communication as idle.
    """
    free = ctx.rank_median("free_us")
    if free.empty:
        return gaps
    room = free.reindex(gaps.index)
    if before is not None:
        room = room - before.reindex(gaps.index).fillna(0.0)
    return gaps.where(room.isna(), np.minimum(gaps, room.clip(lower=0.0)))


def _rule_host_bound(ctx: _Context) -> list[Finding]:
    hb = _gaps(ctx)
    if hb.empty or not has_values(hb, "launch_gap_us"):
        return []
    per_rank = _capped(ctx, hb.groupby("rank")["launch_gap_us"].mean())
    gap = float(per_rank.median())
    if not np.isfinite(gap) or gap <= 0:
        return []
    med_gap = float(hb["median_gap_us"].median())
    med_kernel = float(hb["median_kernel_us"].median())
    launch_bound = np.isfinite(med_gap) and med_gap >= med_kernel
    title = ("The host cannot launch kernels as fast as the device runs them"
             if launch_bound else "The device idles in short gaps between kernels")
    ev = (f"gaps shorter than 1 ms between kernels: {_fmt_time(gap)} per step; median kernel "
          f"{_fmt_time(med_kernel)}, median gap {_fmt_time(med_gap)}")
    tk = ctx.get("tiny", lambda: _ops.tiny_kernels(ctx.profile))
    if not tk.empty and tk["storm"].fillna(False).astype(bool).any():
        r = tk[tk["storm"].fillna(False).astype(bool)].iloc[0]
        ev += (f"; {_pct(float(r['tiny_count_share']))} of the kernels are shorter than "
               f"10 µs (most frequent: {r['top_names']})")
    rec = _say(ctx.fw, {
        "mindspore": "Launch fewer, larger kernels: graph mode (jit / GRAPH_MODE) with "
                     "kernel-by-kernel launch off, fused operators, a larger micro-batch; "
                     "bind the process to the NPU's NUMA node (taskset / numactl).",
        "torch_npu": "Launch fewer, larger kernels: fused operators (torch_npu.npu_rms_norm, "
                     "npu_swiglu, npu_fusion_attention), a larger micro-batch, task queue "
                     "(TASK_QUEUE_ENABLE=2), torch.compile / TorchAir graph mode; bind the "
                     "process to the NPU's NUMA node.",
        "pytorch_gpu": "Launch fewer, larger kernels: CUDA graphs or torch.compile "
                       "(mode='reduce-overhead'), fused optimizers (foreach / fused=True), "
                       "a larger micro-batch; keep Python work out of the step."})
    return [_finding(ctx, "host_bound", "host", gap, title, ev, rec,
                     details=f"launch-bound test: median gap >= median kernel is {launch_bound}")]


def _rule_long_gaps(ctx: _Context) -> list[Finding]:
    """Idle periods of 1 ms or more inside the step: allocator, synchronisation, barriers."""
    hb = _gaps(ctx)
    if hb.empty or not has_values(hb, "long_gap_us"):
        return []
    launch = _capped(ctx, hb.groupby("rank")["launch_gap_us"].mean())
    gap = float(_capped(ctx, hb.groupby("rank")["long_gap_us"].mean(), launch).median())
    if not np.isfinite(gap) or gap <= 0:
        return []
    used, cap, frac = ctx.memory_frac
    sp = ctx.get("sync", lambda: _cluster.sync_points(ctx.profile))
    if np.isfinite(frac) and 0.9 <= frac <= 1.0:
        title = ("The device stalls inside the step while its memory is nearly full "
                 "(allocator frees and retries)")
        ev = (f"idle periods of 1 ms or more inside the step: {_fmt_time(gap)} per step; "
              f"peak memory {used / 2**30:.1f} GiB = {_pct(frac)} of {cap / 2**30:.0f} GiB")
        rec = _say(ctx.fw, {
            "mindspore": "Lower the peak: selective recompute, optimizer sharding "
                         "(parallel_optimizer), a smaller micro-batch, or more pipeline "
                         "stages; check max_device_memory and memory_optimize_level.",
            "torch_npu": "Lower the peak: selective recompute, optimizer sharding (ZeRO / "
                         "distributed optimizer), a smaller micro-batch; reduce "
                         "fragmentation (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True).",
            "pytorch_gpu": "Lower the peak: activation checkpointing, optimizer sharding "
                           "(ZeRO / FSDP), a smaller micro-batch; reduce fragmentation "
                           "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."})
        return [_finding(ctx, "memory_stalls", "memory", gap, title, ev, rec)]
    title = "The device idles in long gaps inside the step"
    ev = f"idle periods of 1 ms or more inside the step: {_fmt_time(gap)} per step"
    if not sp.empty:
        ev += ("; synchronising host calls: "
               + ", ".join(sp["name"].astype(str).drop_duplicates().head(3)))
    rec = ("Open the timeline at those gaps: a host synchronisation (.item(), printing a "
           "loss), a barrier, a checkpoint or an allocator retry stops the launch queue.")
    return [_finding(ctx, "host_stalls", "host", gap, title, ev, rec)]


def _rule_sync(ctx: _Context) -> list[Finding]:
    sp = ctx.get("sync", lambda: _cluster.sync_points(ctx.profile))
    if sp.empty:
        return []
    per_rank = sp.groupby("rank").agg(host_us=("host_us", "sum"), per_step=("per_step", "sum"))
    host = ctx.per_rank_step(float(per_rank["host_us"].sum()))
    s = ctx.steps
    free = float(s["free_us"].mean()) if has_values(s, "free_us") else float("nan")
    stake = min(host, free) if np.isfinite(free) else host
    names = ", ".join(sp["name"].astype(str).drop_duplicates().head(3))
    rec = _say(ctx.fw, {
        "mindspore": "Take .asnumpy() / printing of the loss out of the step (or every N "
                     "steps) and turn off pynative_synchronize.",
        "torch_npu": "Take .item() / .cpu() / printing of the loss out of the step (or every "
                     "N steps) and unset ASCEND_LAUNCH_BLOCKING.",
        "pytorch_gpu": "Take .item() / .cpu() / printing of the loss out of the step (or "
                       "every N steps) and unset CUDA_LAUNCH_BLOCKING."})
    return [_finding(
        ctx, "synchronisation", "host", stake,
        "The host waits for the device inside the step",
        f"{float(per_rank['per_step'].median()):.0f} synchronising call(s) per step ({names}),"
        f" {_fmt_time(host)} of host time per step; the device can idle meanwhile (free "
        f"{_fmt_time(free)} per step)", rec)]


_UNFUSED_TITLES = {
    "rmsnorm_decomposed": "RMSNorm",
    "rotary_small_ops": "rotary position embedding",
    "silu_mul_not_swiglu": "SwiGLU (SiLU then Mul)",
    "softmax_dropout_matmul": "attention (matmul, softmax, matmul)",
}
_FUSED = {
    "mindspore": {"rmsnorm_decomposed": "RmsNorm (mindspore.ops.rms_norm)",
                  "rotary_small_ops": "RotaryPositionEmbedding "
                                      "(mindspore.ops.rotary_position_embedding)",
                  "silu_mul_not_swiglu": "SwiGLU (MindFormers use_fused_swiglu / ops.swiglu)",
                  "softmax_dropout_matmul": "FlashAttention (MindFormers use_flash_attention)"},
    "torch_npu": {"rmsnorm_decomposed": "torch_npu.npu_rms_norm",
                  "rotary_small_ops": "torch_npu.npu_rotary_mul",
                  "silu_mul_not_swiglu": "torch_npu.npu_swiglu",
                  "softmax_dropout_matmul": "torch_npu.npu_fusion_attention"},
    "pytorch_gpu": {"rmsnorm_decomposed": "torch.nn.functional.rms_norm or a fused RMSNorm "
                                          "(Apex / Transformer Engine)",
                    "rotary_small_ops": "a fused rotary kernel (flash_attn.layers.rotary, "
                                        "Transformer Engine)",
                    "silu_mul_not_swiglu": "a fused SwiGLU (torch.compile, Transformer Engine)",
                    "softmax_dropout_matmul": "F.scaled_dot_product_attention (flash)"},
}


def _rule_unfused(ctx: _Context) -> list[Finding]:
    uf = ctx.get("unfused", lambda: _ops.unfused_patterns(ctx.profile))
    if uf.empty:
        return []
    g = uf.groupby("pattern", sort=False).agg(occurrences=("occurrences", "sum"),
                                             saving_us=("saving_us", "sum"),
                                             total_us=("total_us", "sum"))
    fw = ctx.fw if ctx.fw in _FUSED else "torch_npu"
    out = []
    fusion = g[g.index.isin(["rmsnorm_decomposed", "rotary_small_ops",
                             "silu_mul_not_swiglu"])].sort_values("saving_us", ascending=False)
    if not fusion.empty:
        saving = ctx.per_rank_step(float(fusion["saving_us"].sum()))
        ctx.counted["unfused_saving"] = saving
        out.append(_finding(
            ctx, "unfused_operators", "operators", saving,
            "Operators run as chains of small kernels where one fused kernel exists: "
            + ", ".join(_UNFUSED_TITLES[str(n)] for n in fusion.index),
            "; ".join(f"{_UNFUSED_TITLES[str(n)]}: {int(r['occurrences'])} chain(s) over "
                      f"ranks and steps, {_fmt_time(ctx.per_rank_step(r['total_us']))} per "
                      f"step, about {_fmt_time(ctx.per_rank_step(r['saving_us']))} avoidable"
                      for n, r in fusion.iterrows()),
            "Use the fused kernels: " + "; ".join(_FUSED[fw][str(n)] for n in fusion.index)
            + ". The saving assumes the fused kernel costs as much as the chain's slowest "
            "member.", details="patterns " + ", ".join(map(str, fusion.index))))
    copies_label = {"pytorch_gpu": "copy kernels (contiguous / clone)",
                    "mindspore": "TensorMove copies", "torch_npu": "TensorMove copies",
                    "ascend": "TensorMove copies"}[ctx.fw]
    if "copies" in g.index:
        r = g.loc["copies"]
        out.append(_finding(
            ctx, "redundant_copies", "operators", ctx.per_rank_step(float(r["saving_us"])),
            f"Time in {copies_label}",
            f"{int(r['occurrences'])} copy task(s) over ranks and steps, "
            f"{_fmt_time(ctx.per_rank_step(float(r['total_us'])))} per step",
            "Use in-place operators, drop .contiguous() where the next operator accepts "
            "strided input, and avoid needless tensor copies."))
    if "cast_chain" in g.index:
        r = g.loc["cast_chain"]
        out.append(_finding(
            ctx, "cast_chains", "operators", ctx.per_rank_step(float(r["saving_us"])),
            "Consecutive dtype conversions (casts) that undo each other",
            f"{int(r['occurrences'])} chain(s), "
            f"{_fmt_time(ctx.per_rank_step(float(r['total_us'])))} per step",
            _say(ctx.fw, {"mindspore": "Keep one dtype across neighbouring operators "
                                       "(amp_level / custom_mixed_precision lists).",
                          "any": "Keep one dtype across neighbouring operators (autocast "
                                 "lists) and remove casts that only undo the previous one."})))
    return out


def _rule_attention(ctx: _Context) -> list[Finding]:
    """Attention as matmul-softmax-matmul: what a fused (flash) kernel would save."""
    uf = ctx.get("unfused", lambda: _ops.unfused_patterns(ctx.profile))
    if uf.empty or "softmax_dropout_matmul" not in set(uf["pattern"].astype(str)):
        return []
    eff = ctx.assume["kernel_efficiency"]
    chains = ctx.get("att_chains", lambda: _eff.attention_chains(
        ctx.profile, ctx.hardware, kernel_efficiency=eff))
    if chains.empty:
        return []
    saving = ctx.per_rank_step(float(chains["saving_us"].sum()))
    fw = ctx.fw if ctx.fw in _FUSED else "torch_npu"
    return [_finding(
        ctx, "attention_not_fused", "operators", saving,
        "Attention runs as separate matmul and softmax kernels instead of one fused kernel",
        f"{len(chains)} attention chain(s) over ranks and steps, "
        f"{_fmt_time(ctx.per_rank_step(float(chains['total_us'].sum())))} per step; a fused "
        f"kernel at {_pct(eff)} of the roofline would take "
        f"{_fmt_time(ctx.per_rank_step(float(chains['fused_us'].sum())))}",
        f"Use {_FUSED[fw]['softmax_dropout_matmul']}: it never writes the score matrix to "
        "memory.", details=f"kernel_efficiency {eff}")]


def _rule_gemm(ctx: _Context) -> list[Finding]:
    """GEMMs far below their roofline: what a kernel at ``kernel_efficiency`` would save."""
    if ctx.hardware is None:
        return []
    eff = ctx.efficiency()
    if eff.empty:
        return []
    a = ctx.assume
    g = eff[(eff["kind"] == "gemm") & (eff["efficiency"] < a["far_below"])
            & eff["ideal_us"].notna()]
    if g.empty:
        return []
    good = g["count"] * g["ideal_us"] / a["kernel_efficiency"]
    saving_total = (g["total_us"] - good).clip(lower=0)
    saving = ctx.per_rank_step(float(saving_total.sum()))
    if saving <= 0:
        return []
    worst = g.assign(_s=saving_total).sort_values("_s", ascending=False).head(3)
    causes = []
    for r in worst.itertuples():
        dims = [d for s in _eff.parse_shapes(r.input_shapes) if s for d in s]
        odd = sorted({d for d in dims if d % 16} if dims else set())
        why = []
        if odd:
            why.append(f"dimensions {', '.join(map(str, odd[:4]))} are not multiples of 16")
        if r.ideal_us < 10:
            why.append("too small to fill the device (ideal time "
                       f"{_fmt_time(r.ideal_us)})")
        if r.bound == "memory":
            why.append("memory-bound: a dimension is too small for data reuse")
        causes.append(f"{r.key} [{r.input_shapes}] x{int(r.count)}: {_pct(r.efficiency)} of "
                      f"its roofline" + (f" ({'; '.join(why)})" if why else ""))
    return [_finding(
        ctx, "gemm_below_roofline", "operators", saving,
        "Matrix multiplications run far below what the hardware allows for their shapes",
        f"{len(g)} GEMM shape(s) under {_pct(a['far_below'])} of their roofline "
        f"({ctx.hardware.name}); worst: " + "; ".join(causes),
        "Pad hidden, FFN and vocabulary sizes to multiples of 64 (128 on Ascend's cube, "
        "16 at least), batch tiny GEMMs together (grouped / batched matmul, larger "
        "micro-batch), and keep the operands in the kernel's preferred layout.",
        details=f"kernel_efficiency {a['kernel_efficiency']}; far_below {a['far_below']}; "
                f"roofline of {ctx.hardware.name} ({ctx.hardware_why})")]


def _rule_elementwise(ctx: _Context) -> list[Finding]:
    """Chains of memory-bound element-wise kernels (beyond the known fusion patterns)."""
    if ctx.hardware is None:
        return []
    a = ctx.assume
    ch = ctx.chains()
    if ch.empty:
        return []
    total = ctx.per_rank_step(float(ch["saving_us"].sum()))
    # the known patterns (RMSNorm, rotary, SwiGLU) are such chains: not counted twice
    saving = max(0.0, total - float(ctx.counted.get("unfused_saving", 0.0)))
    if saving <= 0:
        return []
    top = ch.groupby("names", sort=False)["saving_us"].sum().sort_values(ascending=False)
    return [_finding(
        ctx, "elementwise_chains", "operators", saving,
        "Chains of memory-bound element-wise kernels move the same data several times",
        f"{len(ch)} chain(s) of {int(a['min_chain'])} or more over ranks and steps, "
        f"{_fmt_time(ctx.per_rank_step(float(ch['total_us'].sum())))} per step; most "
        f"frequent: {str(top.index[0])[:160]}",
        _say(ctx.fw, {"mindspore": "Fuse them: graph mode with graph-kernel fusion "
                                   "(enable_graph_kernel / jit_level O1), or the fused "
                                   "operators of MindFormers.",
                      "torch_npu": "Fuse them: torch.compile / TorchAir, or the torch_npu "
                                   "fused operators (npu_add_rms_norm, npu_swiglu, ...).",
                      "pytorch_gpu": "Fuse them: torch.compile, or fused kernels (Apex, "
                                     "Transformer Engine, Liger)."})
        + f" Saving assumes one fused kernel at {_pct(a['kernel_efficiency'])} of the memory "
        "roofline moving the largest member's data.",
        details=f"kernel_efficiency {a['kernel_efficiency']}; min_chain {a['min_chain']}; "
                "minus the unfused-operators saving")]


def _rule_ai_cpu(ctx: _Context) -> list[Finding]:
    ai = ctx.get("aicpu", lambda: _ops.ai_cpu_operators(ctx.profile))
    if ai.empty:
        return []
    total = float(ai["total_us"].sum())
    names = ", ".join(str(t) for t in ai["key"].head(3))
    return [_finding(
        ctx, "ai_cpu", "operators", ctx.per_rank_step(total),
        "Operators run on the AI CPU instead of the AI Core",
        f"{int(ai['count'].sum())} AI CPU task(s), {_fmt_time(ctx.per_rank_step(total))} per "
        f"step: {names}",
        "Find why each fell back to the AI CPU (an int64 / double dtype, a dynamic shape, "
        "an unsupported attribute); cast the input or use an AI Core operator.")]


def _deterministic_tasks(k: Any) -> Any:
    """Mask of the tasks with "deterministic" in their name."""
    return text_matches(k["name"], r"(?i)determin")


def _rule_deterministic(ctx: _Context) -> list[Finding]:
    k = table(ctx.profile, "kernels")
    if "name" not in k.columns or "dur_us" not in k.columns:
        return []
    det = collect(k, ["dur_us"], where=_deterministic_tasks)
    if det.empty:
        return []
    us = ctx.per_rank_step(float(det["dur_us"].sum()))
    return [_unmeasured(
        "deterministic", "operators", "Deterministic kernels are in use",
        f"{len(det)} task(s) with 'deterministic' in the name, {_fmt_time(us)} per step; "
        f"deterministic variants are typically about {_pct(ctx.assume['deterministic'])} "
        "slower (not measurable from this profile)",
        _say(ctx.fw, {"mindspore": "Turn deterministic computation off for production "
                                   "runs (deterministic='OFF', HCCL_DETERMINISTIC=false).",
                      "torch_npu": "Turn it off for production runs "
                                   "(torch.use_deterministic_algorithms(False), "
                                   "HCCL_DETERMINISTIC=false).",
                      "pytorch_gpu": "Turn it off for production runs "
                                     "(torch.use_deterministic_algorithms(False), "
                                     "cudnn.deterministic=False)."}))]


#: Environment settings that slow training down, as a profile's metadata records them:
#: (variable, rule, area, what it does).
_SLOW_ENV = (
    ("ASCEND_LAUNCH_BLOCKING", "env_launch_blocking", "host",
     "every operator launch waits for the device (synchronous execution)"),
    ("CUDA_LAUNCH_BLOCKING", "env_launch_blocking", "host",
     "every kernel launch waits for the device (synchronous execution)"),
    ("HCCL_DETERMINISTIC", "env_deterministic", "communication",
     "collectives use the slower deterministic reduction order"),
)


def _rank_metas(profile: Any) -> list[Any]:
    members = list(profile) if hasattr(profile, "ranks") else [profile]
    return [getattr(p, "meta", None) for p in members]


def _rule_environment(ctx: _Context) -> list[Finding]:
    """Seed checklist items that the profiler's record of the environment can show."""
    out = []
    metas = [m for m in _rank_metas(ctx.profile) if m is not None]
    for var, rule, area, effect in _SLOW_ENV:
        ranks = [m.rank for m in metas
                 if str((m.extra or {}).get("env", {}).get(var, "")).strip().lower()
                 in ("1", "true", "on", "yes")]
        if ranks:
            shown = ", ".join(str(r) for r in ranks[:8]) + (" ..." if len(ranks) > 8 else "")
            out.append(_unmeasured(
                rule, area, f"{var} is set: {effect}",
                f"the profiler recorded {var}=on for rank(s) {shown}",
                "Unset it for training runs; keep it only to locate an error or while "
                "debugging reproducibility."))
    return out


def _rule_memory(ctx: _Context, already: list[Finding]) -> list[Finding]:
    used, cap, frac = ctx.memory_frac
    if not np.isfinite(frac):
        return []
    hw = ctx.hardware
    out = []
    if frac > 1.0:
        out.append(_unmeasured(
            "memory_over_capacity", "memory",
            "The measured memory peak is larger than the device: the hardware does not match "
            "the profile, or the job could not have run",
            f"peak {used / 2**30:.1f} GiB = {_pct(frac)} of the {cap / 2**30:.0f} GiB of "
            f"{hw.name} ({ctx.hardware_why})",
            "Pass the hardware that ran the job (perfkit.Hardware.preset(...) or .replace("
            "memory_bytes=...)); if it is right, the profile is not from a run that fit: "
            "check the memory settings before trusting the memory figures.",
            details=f"peak_reserved_bytes {used:.0f}"))
    elif frac >= 0.9 and not any(f.rule == "memory_stalls" for f in already):
        out.append(_unmeasured(
            "memory_pressure", "memory", "Device memory is close to its limit",
            f"peak {used / 2**30:.1f} GiB = {_pct(frac)} of {cap / 2**30:.0f} GiB "
            f"({hw.name}); no stall that it causes is visible in this profile",
            _say(ctx.fw, {"mindspore": "Keep headroom for peaks: selective recompute or "
                                       "optimizer sharding (parallel_optimizer) before "
                                       "raising the batch.",
                          "any": "Keep headroom for peaks: selective recompute or optimizer "
                                 "sharding before raising the batch; watch for "
                                 "out-of-memory on longer sequences."})))
    return out


def _rule_recompute(ctx: _Context) -> list[Finding]:
    seen = ctx.get("recompute", lambda: _ops.recompute_evidence(ctx.profile))
    doing = seen[seen["recompute"] != "none"] if not seen.empty else seen
    if doing.empty:
        return _configured_recompute(ctx)
    share = float(doing["recompute_share"].median())
    mode = str(doing["recompute"].mode().iloc[0])
    s = ctx.steps
    comp = float(ctx.rank_median("computing_us").median()) if has_values(
        s, "computing_us") else float("nan")
    us = share * comp
    used, cap, frac = ctx.memory_frac
    ev = (f"attention forward / backward tasks = {doing['ratio'].median():.2f} (1 without "
          f"recompute, 2 with full recompute): about {_pct(share)} of the computation, "
          f"{_fmt_time(us)} per step, is recomputation")
    rec = _say(ctx.fw, {
        "mindspore": "With memory to spare, recompute fewer layers: MindFormers recompute_config"
                     " (recompute: false, select_recompute, or a per-stage layer count) until "
                     "memory is about 85-90 % used.",
        "torch_npu": "With memory to spare, recompute fewer layers: --recompute-granularity "
                     "selective, --recompute-num-layers, or no recompute, until memory is "
                     "about 85-90 % used.",
        "pytorch_gpu": "With memory to spare, checkpoint fewer layers (selective activation "
                       "checkpointing, --recompute-num-layers) until memory is about 85-90 % "
                       "used."})
    if np.isfinite(frac) and frac <= 0.75:
        return [_finding(ctx, "recompute_headroom", "recompute", us,
                         f"The {mode} recompute costs time while memory has room to spare",
                         ev + f"; peak memory {_pct(frac)} of {cap / 2**30:.0f} GiB", rec)]
    why = (f"peak memory {_pct(frac)} of the device" if np.isfinite(frac)
           else "memory use unknown")
    return [_unmeasured(
        "recompute", "recompute", f"The {mode} recompute costs {_fmt_time(us)} per step",
        ev + f"; {why}: whether it can be turned off depends on the memory it frees",
        rec, severity="info")]


def _configured_recompute(ctx: _Context) -> list[Finding]:
    """Recompute the configuration asks for but the profile cannot show (no attention)."""
    par, model = ctx.parallel, ctx.model
    mode = getattr(par, "recompute", "none") if par is not None else "none"
    if mode == "none" or model is None:
        return []
    from .calc.flops import hardware_flops, model_flops
    extra = hardware_flops(model, 1.0, recompute=mode) / model_flops(model, 1.0) - 1.0
    share = extra / (1.0 + extra)
    used, cap, frac = ctx.memory_frac
    mem = f"; peak memory {_pct(frac)} of the device" if np.isfinite(frac) else ""
    return [_unmeasured(
        "recompute", "recompute", f"The configuration recomputes ({mode})",
        f"configured recompute={mode}: about {_pct(share)} of the computation is "
        f"recomputation by the calculator (the profile shows no attention kernels to "
        f"count){mem}",
        "With memory to spare, recompute fewer layers (selective recompute, fewer "
        "recomputed layers) until memory is about 85-90 % used.", severity="info")]


def _rule_mfu(ctx: _Context) -> list[Finding]:
    m, par, hw = ctx.model, ctx.parallel, ctx.hardware
    # the job's measured step (as pk.infer_job, the headline and perfkit info take it), so
    # every page shows one MFU for one job; the device span where there is no step table
    step = measured_step_s(ctx.steps) * 1e6 if has_values(ctx.steps, "step_us") \
        else ctx.step_us
    if m is None or par is None or hw is None or not np.isfinite(step) or step <= 0:
        return []
    from .calc.flops import mfu
    from .calc.throughput import tokens_per_second_per_device
    tps = tokens_per_second_per_device(par.global_batch_size, m.seq_length, step / 1e6,
                                       par.world_size)
    value = float(mfu(m, tps, hw.peak()))
    if not 0 < value <= 1:
        return [_unmeasured(
            "mfu_inconsistent", "metrics",
            "The model, parallel layout or hardware given do not match the profile",
            f"they give an MFU of {_pct(value)} for the measured step of {_fmt_time(step)}",
            "Check the model (layers, sequence length), the global batch and the hardware "
            "passed to the advisor.")]
    return [_unmeasured(
        "mfu", "metrics", f"Model FLOPs utilisation is {_pct(value)}",
        f"step {_fmt_time(step)}, {tps:.0f} tokens/s per device, peak "
        f"{hw.peak() / 1e12:.0f} TFLOP/s ({hw.name})",
        "Work down the measured findings in order; if none is large, revisit the parallel "
        "strategy (perfkit.plan.search) and the micro-batch size.", severity="info")]


RULES: tuple[Callable[..., list[Finding]], ...] = (
    _rule_slow_ranks, _rule_pipeline, _rule_links, _rule_exposed_comm, _rule_data_loading,
    _rule_host_bound, _rule_long_gaps, _rule_sync, _rule_unfused, _rule_attention,
    _rule_gemm, _rule_elementwise, _rule_ai_cpu, _rule_deterministic, _rule_environment,
    _rule_recompute, _rule_mfu,
)
"""The rules run by :func:`advise`, in the seeds' order of checks (causes before symptoms)."""

#: Price the operators on a second thread while the rules run (:meth:`_Context.compute_ahead`);
#: the findings are the same either way.
COMPUTE_AHEAD = True

#: Rules that read the findings before them (run last, in this order).
LATE_RULES: tuple[Callable[..., list[Finding]], ...] = (_rule_comm_wait, _rule_memory)


def _dedupe(found: list[Finding]) -> list[Finding]:
    """Drop symptoms that a cause already explains."""
    rules = {f.rule for f in found if f.measured and f.score > 0}
    out = []
    for f in found:
        # a late step start on a few ranks is the data-loading stall seen per rank
        if f.rule == "slow_ranks" and "data_loading" in rules and "start" in f.title:
            continue
        # launch gaps are counted by host_bound; a synchronisation's idle time is in them
        if f.rule == "synchronisation" and {"host_bound", "host_stalls"} & rules:
            f = dataclasses.replace(f, evidence=f.evidence + " (its idle time is part of the "
                                    "gaps reported in the host finding)", score=0.0,
                                    ms_per_step=0.0, severity="info",
                                    details=f.details + "; counted in the host gaps")
        out.append(f)
    return out


def advise(profile_or_cluster: Any, model: Any = None, parallel: Any = None,
           hardware: Any = None, max_findings: int | None = None,
           assumptions: dict[str, float] | None = None) -> list[Finding]:
    """Run every analysis and return ranked findings: what to fix first.

    Parameters
    ----------
    profile_or_cluster : Profile or Cluster
        A loaded profile (``perfkit.load``); a lazy cluster (``engine="dask"``) gives the
        same findings, its analyses computed on the Dask workers.
    model : perfkit.ModelSpec, optional
        Enables the MFU check.
    parallel : perfkit.ParallelConfig, optional
        Pipeline stages and the schedule's own bubble.
    hardware : perfkit.Hardware, optional
        Memory capacity, nominal bandwidths and the operators' roofline. Default: the
        profiled device where the profile says (:func:`perfkit.analysis.infer_hardware`).
    max_findings : int, optional
        Keep only the first findings.
    assumptions : dict, optional
        Override :data:`ASSUMPTIONS` (e.g. ``{"kernel_efficiency": 0.8}``).

    Returns
    -------
    list of Finding
        Measured findings first, most milliseconds per step at stake first; then the
        findings whose cost cannot be measured (``warning`` before ``info``). Empty when
        nothing was found.

    Notes
    -----
    For a profile in memory with a known device, the operators are priced on a second
    thread while the rules run (:data:`COMPUTE_AHEAD`, docs/analysis.md "Speed"); the
    findings are the same as on one thread, and the thread has ended on return.
    """
    # analyses share their intermediate tables for this call; huge pages off (_hugepages)
    with shared_results(), small_pages():
        return _advise(profile_or_cluster, model, parallel, hardware, max_findings,
                       assumptions)


def _advise(profile_or_cluster: Any, model: Any, parallel: Any, hardware: Any,
            max_findings: int | None, assumptions: dict[str, float] | None
            ) -> list[Finding]:
    assume = {**ASSUMPTIONS, **(assumptions or {})}
    ctx = _Context(profile_or_cluster, model, parallel, hardware, assume)
    ahead = _start_ahead(ctx)
    try:
        found = _run_rules(ctx)
    finally:
        if ahead is not None:
            ahead.join()  # its results live in this call's shared_results block
    kept = _dedupe([f for _, f in found])
    order_of = {id(f): o for o, f in found}
    ranked = sorted(kept, key=lambda f: (not f.measured, -f.score, _ORDER[f.severity],
                                         order_of.get(id(f), len(RULES))))
    return ranked[:max_findings] if max_findings is not None else ranked


def _start_ahead(ctx: _Context) -> threading.Thread | None:
    """Start :meth:`_Context.compute_ahead` on a second thread, when its rules will ask.

    Only for a profile in memory with a known device (the pricing rules need its
    roofline); a lazy cluster's analyses already run on the Dask workers.
    """
    if ctx.hardware is None or is_lazy(ctx.profile) or not COMPUTE_AHEAD:
        return None
    thread = threading.Thread(target=contextvars.copy_context().run,
                              args=(ctx.compute_ahead,), name="perfkit-advise-ahead",
                              daemon=True)
    thread.start()
    return thread


def _run_rules(ctx: _Context) -> list[tuple[int, Finding]]:
    """Every rule in order: (its position, finding) for each finding."""
    found: list[tuple[int, Finding]] = []

    def run(order: int, name: str, rule: Callable[[], list[Finding]]) -> None:
        try:
            found.extend((order, f) for f in rule())
        except Exception as exc:  # noqa: BLE001 - one rule must not hide the others
            found.append((order, _unmeasured(
                name, "metrics", f"Rule {name} could not run on this profile",
                f"{type(exc).__name__}: {exc}", "Report this with the profile's format.",
                severity="info")))

    for order, rule in enumerate(RULES):
        run(order, rule.__name__.removeprefix("_rule_"), lambda rule=rule: rule(ctx))
    for i, rule in enumerate(LATE_RULES):
        run(len(RULES) + i, rule.__name__.removeprefix("_rule_"),
            lambda rule=rule: rule(ctx, [f for _, f in found]))
    return found
