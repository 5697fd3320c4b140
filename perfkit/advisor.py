"""The advisor: run every analysis, turn what is abnormal into ranked :class:`Finding` s.

Each rule reads one or more analyses of :mod:`perfkit.analysis` and, when it sees a
problem, returns a finding with the numbers that prove it, what to do next in the order
of the seeds' method (step trace first, then operators, communication, memory and
recompute, cluster effects) and the notebook where the user can look closer.

Findings are ranked by ``score``: the estimated share of the step time the problem costs
(or that fixing it could win back), so "fix first" is what is worth most. ``severity``
follows from the score (high >= 0.15, medium >= 0.05, low >= 0.01, else info). A rule that
fails on an unusual profile is skipped and reported as an ``info`` finding; the advisor
itself never raises on a loadable profile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .analysis import cluster as _cluster
from .analysis import communication as _comm
from .analysis import memory as _memory
from .analysis import operators as _ops
from .analysis._frames import collect
from .analysis._util import has_values, n_step_pairs, table
from .analysis.steps import step_breakdown

__all__ = ["Finding", "advise", "NOTEBOOKS", "RULES", "severity_of"]

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

_SEVERITY = (("high", 0.15), ("medium", 0.05), ("low", 0.01))
_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


def severity_of(score: float) -> str:
    """Severity label of a score (share of step time at stake)."""
    for name, lo in _SEVERITY:
        if score >= lo:
            return name
    return "info"


@dataclass(frozen=True)
class Finding:
    """One thing to fix (or to know), with its evidence.

    Attributes
    ----------
    severity : str
        ``"high"``, ``"medium"``, ``"low"`` or ``"info"`` (from ``score``).
    area : str
        ``steps``, ``operators``, ``communication``, ``memory``, ``recompute``,
        ``cluster``, ``host`` or ``metrics``.
    title : str
        One line naming the problem.
    evidence : str
        The numbers that show it.
    recommendation : str
        What to check or change next.
    notebook : str
        The notebook where the analysis is shown.
    score : float
        Estimated share of the step time at stake (ranking key).
    rule : str
        Name of the rule that produced the finding.
    """

    severity: str
    area: str
    title: str
    evidence: str
    recommendation: str
    notebook: str
    score: float = 0.0
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return dataclasses.asdict(self)


def _finding(rule: str, area: str, score: float, title: str, evidence: str,
             recommendation: str, severity: str | None = None) -> Finding:
    score = float(max(0.0, min(1.0, score))) if np.isfinite(score) else 0.0
    return Finding(severity=severity or severity_of(score), area=area, title=title,
                   evidence=evidence, recommendation=recommendation,
                   notebook=NOTEBOOKS.get(area, NOTEBOOKS["metrics"]), score=score, rule=rule)


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f} %"


def _ms(us: float) -> str:
    return f"{us / 1000.0:.2f} ms"


class _Context:
    """Lazily computed analyses shared by the rules."""

    def __init__(self, profile: Any, model: Any, parallel: Any, hardware: Any):
        self.profile, self.model, self.parallel, self.hardware = profile, model, parallel, hardware
        self._cache: dict[str, Any] = {}

    def get(self, key: str, fn: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    @property
    def steps(self) -> pd.DataFrame:
        return self.get("steps", lambda: step_breakdown(self.profile))

    @property
    def step_us(self) -> float:
        """Median step time over ranks and steps (NaN when unknown)."""
        s = self.steps
        return float(s["step_us"].median()) if has_values(s, "step_us") else float("nan")

    @property
    def n_steps(self) -> int:
        s = self.steps
        if s.empty:
            return n_step_pairs(table(self.profile, "kernels"))
        return max(1, int(s[["rank", "step"]].drop_duplicates().shape[0]))

    def share_of_step(self, us_total: float) -> float:
        """Per-(rank, step) time ``us_total / n_steps`` as a share of the median step."""
        step = self.step_us
        if not np.isfinite(step) or step <= 0:
            return float("nan")
        return us_total / self.n_steps / step


# --------------------------------------------------------------------------- rules


def _rule_slow_ranks(ctx: _Context) -> list[Finding]:
    sr = ctx.get("slow", lambda: _cluster.slow_ranks(ctx.profile, parallel=ctx.parallel))
    slow = sr[sr["slow"].fillna(False).astype(bool)]
    out = []
    for metric, grp in slow.groupby("metric", sort=False):
        ranks = ", ".join(str(int(r)) for r in grp["rank"])
        worst = grp.sort_values("excess_us", ascending=False).iloc[0]
        phase = str(worst["phase"])
        score = ctx.share_of_step(float(worst["excess_us"]) * ctx.n_steps)
        if metric in ("free_us", "preparing_us"):
            rec = ("Open that rank's step trace: a long step interval on one device points to "
                   "its data pipeline or host (data loading, CPU contention, a slow disk). "
                   "Fix it there; the whole group waits for it in every collective.")
        elif metric == "computing_us":
            rec = ("Compare that rank's operators with a normal rank: same operators slower "
                   "means a slow device (frequency, temperature, hardware fault); more "
                   "operators means unbalanced work (e.g. an uneven pipeline stage or MoE "
                   "routing). The other ranks wait for it in their collectives.")
        else:
            rec = ("With slow ranks ruled out by computation and step interval, check that "
                   "rank's links in the communication matrix (slow link) and the operator "
                   "split (transit vs wait).")
        out.append(_finding(
            "slow_ranks", "cluster", score,
            f"Slow rank {ranks}: {phase} above the other ranks",
            f"rank {int(worst['rank'])} {metric} = {_ms(worst['value_us'])} vs median "
            f"{_ms(worst['median_us'])} (+{worst['excess_pct']:.1f} %, robust z = "
            f"{worst['z']:.1f}); check order {int(worst['check_order'])} of the seed's method",
            rec))
    return out


def _rule_pipeline(ctx: _Context) -> list[Finding]:
    sb = ctx.get("stages", lambda: _cluster.stage_balance(ctx.profile, parallel=ctx.parallel))
    if sb.empty or len(sb) < 2:
        return []
    out = []
    step = ctx.step_us
    worst = sb.loc[sb["imbalance"].idxmax()]
    spread = float(sb["stage_us"].max() - sb["stage_us"].min())
    if worst["imbalance"] >= 0.1:
        # the faster stages wait up to the difference in every step (as receive wait)
        out.append(_finding(
            "stage_imbalance", "cluster", spread / step if step > 0 else 0.1,
            f"Pipeline stage {int(worst['stage'])} is {_pct(worst['imbalance'])} slower "
            "than the fastest stage",
            "stage time (step minus receive wait): " + ", ".join(
                f"stage {int(r.stage)} (ranks {r.ranks}) {_ms(r.stage_us)}, computing "
                f"{_ms(r.computing_us)}" for r in sb.itertuples()),
            "Rebalance the layers between stages (perfkit.plan.balance_pipeline): move "
            "layers off the slow stage, account for the embedding and the output layer on "
            "the first and last stage, then re-check the bubble."))
    theo = sb["theoretical_bubble"].iloc[0]
    br = float(sb["bubble_ratio"].max())
    if np.isfinite(br) and not np.isfinite(theo) and br >= 0.15:
        bub = float(sb["bubble_us"].max())
        out.append(_finding(
            "bubble", "cluster", 0.5 * bub / step if step > 0 else 0.05,
            "Large pipeline bubble",
            f"receive wait / stage time up to {br:.2f} (pass parallel= to compare with the "
            "schedule's own bubble, (pp - 1) / micro-batches)",
            "Compare with the theoretical bubble first: if the schedule explains it, raise "
            "the number of micro-batches or use interleaving (vpp); if not, look for stage "
            "imbalance and slow ranks."))
    if np.isfinite(br) and br > 0.05 and np.isfinite(theo) and br > 1.5 * theo + 0.02:
        bub = float(sb["bubble_us"].max())
        extra = bub - theo * float(sb.loc[sb["bubble_ratio"].idxmax(), "stage_us"])
        if worst["imbalance"] >= 0.1:  # the seed: rule out stage imbalance first
            extra -= spread
        out.append(_finding(
            "bubble", "cluster", max(0.0, extra) / step if step > 0 else 0.05,
            "Pipeline bubble larger than the schedule explains",
            f"measured bubble / stage time up to {br:.2f} vs theoretical {theo:.2f} "
            "(pp, micro-batches, vpp)",
            "First rule out stage imbalance and slow ranks (they show up as receive wait); "
            "then raise the number of micro-batches or use interleaving (vpp) to shrink the "
            "schedule's bubble."))
    return out


def _rule_exposed_comm(ctx: _Context) -> list[Finding]:
    s = ctx.steps
    if not has_values(s, "comm_not_overlapped_share"):
        return []
    share = float(s["comm_not_overlapped_share"].median())
    excl = share
    if has_values(s, "bubble_share"):
        excl = float((s["comm_not_overlapped_share"] - s["bubble_share"].fillna(0)).median())
    overlap = float("nan")
    if has_values(s, "communication_us") and has_values(s, "overlapped_us"):
        comm = float(s["communication_us"].median())
        overlap = float(s["overlapped_us"].median()) / comm if comm > 0 else float("nan")
    hidden_nothing = np.isfinite(overlap) and overlap < 0.1
    if excl < 0.1 and not (hidden_nothing and excl >= 0.03):
        return []
    cs = ctx.get("comm", lambda: _comm.comm_summary(ctx.profile))
    ev = f"communication not overlapped = {_pct(share)} of the step"
    if np.isfinite(overlap):
        ev += f", only {_pct(overlap)} of the communication runs under computation"
    if excl != share:
        ev += f" ({_pct(excl)} without pipeline receive)"
    rec = ("Follow the seed's model-parallel step 3/4: list the communication operators of "
           "the exposed period; remove avoidable ones (re-distribution from the operator "
           "split), overlap the rest (gradient bucketing / all_reduce_fusion_config, "
           "overlap of the optimizer's all-gather and reduce-scatter), and keep tensor "
           "parallelism inside a node.")
    if not cs.empty:
        top = cs.iloc[0]
        ev += (f"; largest: {top['op_type']} x{int(top['count'])} = {_ms(top['total_us'])}"
               f" in total")
        if pd.notna(top["wait_share"]) and top["wait_share"] <= 1.0 \
                and pd.notna(top["transit_share"]):
            ev += (f" (transit {_pct(top['transit_share'])}, wait {_pct(top['wait_share'])}, "
                   f"idle {_pct(top['idle_share'])})")
            if top["wait_share"] >= 0.5:
                rec = ("Most of the communication time is waiting for peers: find the rank "
                       "the group waits for (slow rank: step interval, then computation) "
                       "before tuning the collectives themselves.")
    if hidden_nothing and excl < 0.1:
        rec = ("Nothing overlaps: check that gradient reduction runs in buckets during the "
               "backward pass (overlap_grad_reduce / all_reduce_fusion_config), that the "
               "communication stream is not serialised behind compute (no synchronisation "
               "between them), and that the optimizer's collectives overlap too.")
    return [_finding("exposed_communication", "communication", 0.5 * excl,
                     "Communication is not hidden behind computation", ev, rec)]


def _rule_comm_wait(ctx: _Context) -> list[Finding]:
    cs = ctx.get("comm", lambda: _comm.comm_summary(ctx.profile))
    if cs.empty or not has_values(cs, "wait_us"):
        return []
    out = []
    for r in cs.itertuples():
        if pd.isna(r.wait_share) or not 0.5 <= r.wait_share <= 1.0:
            continue
        score = ctx.share_of_step(float(r.wait_us))  # summed over ranks and steps
        if not np.isfinite(score) or score < 0.02:
            continue
        out.append(_finding(
            "comm_wait", "communication", 0.5 * score,
            f"{r.op_type} in group {r.group} mostly waits for its peers",
            f"wait {_pct(r.wait_share)} of {int(r.count)} operators, {_ms(r.wait_us)} in "
            f"total; transit only {_pct(r.transit_share)}",
            "Waiting means the peers arrive late: look for a slow rank (step interval, then "
            "computation, in the cluster step trace) or a rank that launches the collective "
            "later (host-bound, synchronisation)."))
    return out[:3]


def _rule_links(ctx: _Context) -> list[Finding]:
    out = []
    sl = ctx.get("links", lambda: _comm.slow_links(ctx.profile))
    slow = sl[sl["slow"].fillna(False).astype(bool)]
    if not slow.empty:
        w = slow.iloc[0]
        # a ring / mesh collective runs at the pace of its slowest link: the exposed
        # communication would shrink by about (1 - ratio) if the link were normal
        s = ctx.steps
        exposed = float(s["comm_not_overlapped_share"].median()) \
            if has_values(s, "comm_not_overlapped_share") else 0.1
        out.append(_finding(
            "slow_link", "communication", exposed * (1 - float(w["ratio_to_median"])),
            f"Slow {w['transport']} link {int(w['src_rank'])} -> {int(w['dst_rank'])}",
            f"{len(slow)} link(s) below the transport's median; worst "
            f"{w['bandwidth_gbps']:.2f} GB/s vs median {w['median_gbps']:.2f} GB/s "
            f"({_pct(w['ratio_to_median'])}; {w['rank_space']} ranks)",
            "Check the link (cables, optics, switch port, HCCS/NVLink errors in the device "
            "logs) and the placement of the ranks; a collective runs at the speed of its "
            "slowest link."))
    if ctx.hardware is not None:
        bw = ctx.get("bw", lambda: _comm.comm_bandwidth_summary(ctx.profile, ctx.hardware))
        for r in bw.itertuples():
            if pd.isna(r.efficiency) or r.efficiency >= 0.3:
                continue
            score = ctx.share_of_step(float(r.transit_us) * (1 - r.efficiency)) * 0.5
            if not np.isfinite(score):
                score = 0.0
            if out and out[0].title.split()[1] == r.transport:
                # the slow link paces every collective of its groups: it is the cause
                out[0] = dataclasses.replace(
                    out[0], score=max(out[0].score, score),
                    severity=severity_of(max(out[0].score, score)),
                    evidence=out[0].evidence + f"; {r.transport} achieves "
                    f"{r.bandwidth_gbps:.1f} GB/s overall ({_pct(r.efficiency)} of nominal)")
                continue
            out.append(_finding(
                "low_bandwidth", "communication", score,
                f"{r.transport} bandwidth far below the hardware's nominal",
                f"achieved {r.bandwidth_gbps:.1f} GB/s over {int(r.ops)} operators vs nominal "
                f"{r.nominal_gbps:.0f} GB/s ({_pct(r.efficiency)})",
                "Small messages cannot reach the nominal bandwidth: fuse collectives into "
                "larger buckets; if the messages are large, check the link and the "
                "algorithm (HCCL_ALGO / NCCL_ALGO) and the transport actually used."))
    return out


def _rule_data_loading(ctx: _Context) -> list[Finding]:
    dl = ctx.get("data", lambda: _cluster.data_loading(ctx.profile))
    if dl.empty or not has_values(dl, "stall_share"):
        return []
    share = float(dl["stall_share"].median())
    if share < 0.05:
        return []
    pieces = []
    for col, label in (("preparing_us", "host preparing"), ("dataloader_us", "data loader"),
                       ("iteration_interval_us", "step interval")):
        if has_values(dl, col):
            pieces.append(f"{label} {_ms(float(dl[col].median()))}")
    return [_finding(
        "data_loading", "host", share,
        "The device waits for the next batch at the start of the step",
        f"median stall {_pct(share)} of the step ({', '.join(pieces)})",
        "Follow the seed's 'long step interval' check: make the data pipeline produce ahead "
        "(more loader workers, prefetch, pinned memory, data sink mode in MindSpore), "
        "move preprocessing off the training process, and keep host work out of the "
        "step's start.")]


def _rule_host_bound(ctx: _Context) -> list[Finding]:
    hb = ctx.get("host", lambda: _cluster.host_bound(ctx.profile))
    if hb.empty:
        return []
    share = float(hb["launch_gap_share"].median())
    if not hb["host_bound"].fillna(False).astype(bool).any() or share < 0.1:
        return []
    return [_finding(
        "host_bound", "host", share,
        "Host-bound: the device idles between kernels while the host launches them",
        f"launch gaps (< 1 ms) = {_pct(share)} of the device span; median kernel "
        f"{hb['median_kernel_us'].median():.1f} µs vs median gap "
        f"{hb['median_gap_us'].median():.1f} µs",
        "Reduce the number of launches: fused operators, larger micro-batches, graph / "
        "jit mode or CUDA/ACL graphs; bind the process to the NPU's NUMA node and keep "
        "host-side Python out of the step; check that no synchronisation stalls the "
        "launch queue.")]


def _rule_sync(ctx: _Context) -> list[Finding]:
    sp = ctx.get("sync", lambda: _cluster.sync_points(ctx.profile))
    if sp.empty:
        return []
    per_rank = sp.groupby("rank").agg(host_us=("host_us", "max"), per_step=("per_step", "max"))
    host = float(per_rank["host_us"].median())
    per_step = float(per_rank["per_step"].median())
    s = ctx.steps
    free = float(s["free_share"].median()) if has_values(s, "free_share") else 0.05
    score = min(ctx.share_of_step(host * max(1, len(per_rank))), free)
    if not np.isfinite(score):
        score = 0.02
    names = ", ".join(sp["name"].astype(str).drop_duplicates().head(3))
    return [_finding(
        "synchronisation", "host", score,
        "Host synchronises with the device inside the step",
        f"{per_step:.0f} synchronising call(s) per step ({names}), {_ms(host)} host time on "
        f"a rank; the device can idle while the host waits",
        "Seed checklist: turn off stream synchronisation (pynative_synchronize / "
        "ASCEND_LAUNCH_BLOCKING / CUDA_LAUNCH_BLOCKING), and move .item() / asnumpy() / "
        "printing of losses out of the step or to every N steps.")]


def _rule_free(ctx: _Context, already: list[Finding]) -> list[Finding]:
    s = ctx.steps
    if not has_values(s, "free_share"):
        return []
    share = float(s["free_share"].median())
    if share < 0.15 or any(f.area == "host" for f in already):
        return []
    return [_finding(
        "device_idle", "steps", 0.5 * share,
        "The device is idle for a large part of the step",
        f"free time = {_pct(share)} of the step (median over ranks and steps)",
        "Look at the timeline of the free periods: at the step start it is data loading, "
        "between kernels it is host launch, around collectives it is waiting for peers.")]


def _rule_unfused(ctx: _Context) -> list[Finding]:
    uf = ctx.get("unfused", lambda: _ops.unfused_patterns(ctx.profile))
    if uf.empty:
        return []
    g = uf.groupby("pattern", sort=False).agg(occurrences=("occurrences", "sum"),
                                             saving_us=("saving_us", "sum"),
                                             total_us=("total_us", "sum"),
                                             share=("saving_share", "median"),
                                             example=("example", "first"),
                                             fused=("fused_replacement", "first"))
    s = ctx.steps
    comp = float(s["computing_share"].median()) if has_values(s, "computing_share") else 1.0
    titles = {
        "rmsnorm_decomposed": "RmsNorm runs as separate small operators",
        "rotary_small_ops": "Rotary position embedding runs as small operators",
        "silu_mul_not_swiglu": "SiLU and Mul run separately instead of a fused SwiGLU",
        "softmax_dropout_matmul": "Attention runs as matmul-softmax-dropout-matmul",
        "cast_chain": "Chains of consecutive Cast operators",
        "copies": "Redundant copies (TensorMove / contiguous)",
    }
    def score_of(rows: pd.DataFrame) -> float:
        sc = ctx.share_of_step(float(rows["saving_us"].sum()))
        return sc if np.isfinite(sc) else float(rows["share"].sum()) * comp

    out = []
    fusion = g[~g.index.isin(["copies", "cast_chain"])]
    if not fusion.empty:
        fusion = fusion.sort_values("saving_us", ascending=False)
        out.append(_finding(
            "unfused_operators", "operators", score_of(fusion),
            "Unfused operators: " + "; ".join(titles.get(str(n), str(n))
                                              for n in fusion.index),
            "; ".join(f"{n}: {int(r['occurrences'])} occurrence(s), {_ms(r['total_us'])}, "
                      f"saving about {_ms(r['saving_us'])} (e.g. {str(r['example'])[:80]})"
                      for n, r in fusion.iterrows()),
            "Replace each chain with its fused kernel (" + ", ".join(
                f"{n} -> {r['fused']}" for n, r in fusion.iterrows()) + "); seed checklist: "
            "use the fused large-model operators (RmsNorm, RotaryPositionEmbedding, SwiGLU, "
            "FlashAttention). Savings are estimates: chain time minus its slowest member."))
    if "copies" in g.index:
        r = g.loc["copies"]
        out.append(_finding(
            "redundant_copies", "operators", score_of(g.loc[["copies"]]), titles["copies"],
            f"{int(r['occurrences'])} copy task(s), {_ms(r['total_us'])} in total "
            f"(e.g. {str(r['example'])[:100]})",
            "Seed checklist: use in-place operators, drop .contiguous() where the next "
            "operator accepts strided input (or test is_contiguous() first), and avoid "
            "needless tensor copies."))
    if "cast_chain" in g.index:
        r = g.loc["cast_chain"]
        out.append(_finding(
            "cast_chains", "operators", score_of(g.loc[["cast_chain"]]), titles["cast_chain"],
            f"{int(r['occurrences'])} chain(s), {_ms(r['total_us'])} in total; about "
            f"{_ms(r['saving_us'])} avoidable (e.g. {str(r['example'])[:100]})",
            "Keep one dtype across neighbouring operators (autocast / mixed-precision lists) "
            "and remove casts that only undo the previous one."))
    return out


def _rule_ai_cpu(ctx: _Context) -> list[Finding]:
    ai = ctx.get("aicpu", lambda: _ops.ai_cpu_operators(ctx.profile))
    if ai.empty:
        return []
    total = float(ai["total_us"].sum())
    score = ctx.share_of_step(total)
    if not np.isfinite(score):
        score = float(ai["share"].sum()) * 0.5
    names = ", ".join(f"{t} ({_ms(u)})" for t, u in zip(ai["key"].head(3),
                                                         ai["total_us"].head(3), strict=True))
    return [_finding(
        "ai_cpu", "operators", score, "Operators run on the AI CPU instead of the AI Core",
        f"{int(ai['count'].sum())} AI CPU task(s), {_ms(total)} in total: {names}",
        "Find why each fell back to AI CPU (a dtype such as int64/double, a dynamic shape, "
        "an unsupported attribute); cast the input or use an equivalent AI Core operator.")]


def _rule_tiny(ctx: _Context) -> list[Finding]:
    tk = ctx.get("tiny", lambda: _ops.tiny_kernels(ctx.profile))
    storm = tk[tk["storm"].fillna(False).astype(bool)]
    if storm.empty:
        return []
    gap = float(storm["run_gap_us"].sum())
    score = ctx.share_of_step(gap)
    if not np.isfinite(score):
        score = 0.02
    r = storm.iloc[0]
    return [_finding(
        "tiny_kernels", "operators", 0.5 * score, "Storm of tiny kernels",
        f"{_pct(r['tiny_count_share'])} of the tasks on rank {int(r['rank'])} are shorter "
        f"than 10 µs (longest run {int(r['longest_run'])}); idle between them "
        f"{_ms(r['run_gap_us'])}; most frequent: {r['top_names']}",
        "Fuse the small operators (fused optimizer, foreach ops, fused norms and "
        "activations), avoid per-element Python loops over tensors, and consider graph mode "
        "for the part that launches them.")]


def _deterministic_tasks(k: Any) -> Any:
    """Mask of the tasks with "deterministic" in their name."""
    return k["name"].astype("string").str.contains(r"(?i)determin", regex=True) \
        .fillna(False).astype(bool)


def _rule_deterministic(ctx: _Context) -> list[Finding]:
    k = table(ctx.profile, "kernels")
    if "name" not in k.columns or "dur_us" not in k.columns:
        return []
    # only the matching tasks leave the workers of a lazy cluster
    det = collect(k, ["dur_us"], where=_deterministic_tasks)
    if det.empty:
        return []
    us = float(det["dur_us"].sum())
    score = ctx.share_of_step(us) * 0.3
    return [_finding(
        "deterministic", "operators", score if np.isfinite(score) else 0.01,
        "Deterministic kernels are in use",
        f"{len(det)} task(s) with 'deterministic' in the name, {_ms(us)} in total",
        "Seed checklist: deterministic computation is slower; turn it off for "
        "production training (deterministic='OFF', HCCL_DETERMINISTIC=false, "
        "torch.use_deterministic_algorithms(False)) unless you are debugging.")]


#: Environment settings that slow training down, as a profile's metadata records them:
#: (variable, values that mean "on", what it does, rule name, area).
_SLOW_ENV = (
    ("ASCEND_LAUNCH_BLOCKING", "synchronisation", "host",
     "every operator launch waits for the device (synchronous execution)"),
    ("CUDA_LAUNCH_BLOCKING", "synchronisation", "host",
     "every kernel launch waits for the device (synchronous execution)"),
    ("HCCL_DETERMINISTIC", "deterministic", "communication",
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
            out.append(_finding(
                rule, area, 0.2, f"{var} is set: {effect}",
                f"profiler metadata of rank(s) {shown}: {var}=on",
                "Seed checklist: unset it for training runs; keep it only to locate an error "
                "or while debugging reproducibility.", severity="high"))
    return out


def _rule_memory(ctx: _Context) -> list[Finding]:
    hw, par = ctx.hardware, ctx.parallel
    if hw is None:
        return []
    peaks = ctx.get("peaks", lambda: _memory.memory_peaks(ctx.profile))
    if peaks.empty:
        return []
    app = peaks[peaks["component"] == "APP"]
    basis = app if has_values(app, "peak_reserved_bytes") else peaks
    used = float(basis["peak_reserved_bytes"].max())
    if not np.isfinite(used):
        return []
    cap = float(hw.memory_bytes)
    frac = used / cap
    out = []
    s = ctx.steps
    if frac >= 0.92:
        # allocator retries near the limit show up as device idle time
        free = float(s["free_share"].median()) if has_values(s, "free_share") else 0.0
        out.append(_finding(
            "memory_pressure", "memory", max(0.1, free), "Device memory is nearly full",
            f"peak reserved {used / 2**30:.1f} GiB of {cap / 2**30:.0f} GiB ({_pct(frac)})",
            "Compare the measured peak with the theory (memory notebook); reduce "
            "fragmentation (allocator settings), then use selective recompute or optimizer "
            "sharding before reaching out-of-memory."))
    comp = float(s["computing_share"].median()) if has_values(s, "computing_share") else 0.5
    recompute = getattr(par, "recompute", "none") if par is not None else "none"
    seen = ctx.get("recompute", lambda: _ops.recompute_evidence(ctx.profile))
    share, how = float("nan"), ""
    doing = seen[seen["recompute"] != "none"] if not seen.empty else seen
    if not doing.empty:
        # ranks that recompute (e.g. only the first pipeline stage) carry the cost
        share = float(doing["recompute_share"].median())
        recompute = str(doing["recompute"].mode().iloc[0])
        seen = doing
        how = (f"attention forward/backward tasks = {seen['ratio'].median():.2f} "
               "(1 without recompute, 2 with full recompute); ")
    elif recompute != "none" and ctx.model is not None:
        from .calc.flops import hardware_flops, model_flops
        extra = hardware_flops(ctx.model, 1.0, recompute=recompute) / \
            model_flops(ctx.model, 1.0) - 1.0
        share = extra / (1.0 + extra)
        how = f"configured recompute={recompute}; "
    if np.isfinite(share) and share > 0 and frac <= 0.75:
        out.append(_finding(
            "recompute_headroom", "recompute", comp * share,
            f"Recompute ({recompute}) while memory has headroom",
            f"{how}about {_pct(share)} of the computation is recomputation; peak reserved "
            f"{used / 2**30:.1f} GiB = {_pct(frac)} of {cap / 2**30:.0f} GiB",
            "Seed advice: with enough memory turn recompute off, or recompute fewer layers "
            "(selective recompute, recompute_layers) until memory is about 85-90 % used."))
    return out


def _rule_mfu(ctx: _Context) -> list[Finding]:
    m, par, hw = ctx.model, ctx.parallel, ctx.hardware
    step = ctx.step_us
    if m is None or par is None or hw is None or not np.isfinite(step) or step <= 0:
        return []
    from .calc.flops import mfu
    from .calc.throughput import tokens_per_second_per_device
    tps = tokens_per_second_per_device(par.global_batch_size, m.seq_length, step / 1e6,
                                       par.world_size)
    value = float(mfu(m, tps, hw.peak()))
    if value >= 0.35:
        return []
    return [_finding(
        "low_mfu", "metrics", max(0.01, (0.35 - value) * 0.2),
        f"Low MFU: {_pct(value)} of the hardware peak",
        f"median step {_ms(step)}, {tps:.0f} tokens/s per device, peak "
        f"{hw.peak() / 1e12:.0f} TFLOP/s ({hw.name})",
        "Work down the other findings in order; if none is large, revisit the parallel "
        "strategy (perfkit.plan.search) and the micro-batch size.")]


RULES: tuple[Callable[[_Context], list[Finding]], ...] = (
    _rule_slow_ranks, _rule_pipeline, _rule_exposed_comm, _rule_comm_wait, _rule_links,
    _rule_data_loading, _rule_host_bound, _rule_sync, _rule_unfused, _rule_ai_cpu,
    _rule_tiny, _rule_deterministic, _rule_environment, _rule_memory, _rule_mfu,
)
"""The rules run by :func:`advise`, in the seeds' order of checks."""


def advise(profile_or_cluster: Any, model: Any = None, parallel: Any = None,
           hardware: Any = None, max_findings: int | None = None) -> list[Finding]:
    """Run every analysis and return ranked findings: what to fix first.

    Parameters
    ----------
    profile_or_cluster : Profile or Cluster
        A loaded profile (``perfkit.load``); a lazy cluster (``engine="dask"``) gives the
        same findings, its analyses computed on the Dask workers.
    model : perfkit.ModelSpec, optional
        Enables MFU and recompute rules.
    parallel : perfkit.ParallelConfig, optional
        Enables the pipeline-stage, theoretical-bubble, MFU and recompute rules.
    hardware : perfkit.Hardware, optional
        Enables the bandwidth, memory and MFU rules.
    max_findings : int, optional
        Keep only the first findings.

    Returns
    -------
    list of Finding
        Highest ``score`` first (ties: severity, then the seeds' order of checks).
        Empty when nothing abnormal was found.
    """
    ctx = _Context(profile_or_cluster, model, parallel, hardware)
    found: list[tuple[int, Finding]] = []

    def run(order: int, name: str, rule: Callable[[], list[Finding]]) -> None:
        try:
            found.extend((order, f) for f in rule())
        except Exception as exc:  # noqa: BLE001 - one rule must not hide the others
            found.append((order, _finding(
                name, "metrics", 0.0, f"Rule {name} could not run on this profile",
                f"{type(exc).__name__}: {exc}", "Report this with the profile's format.",
                severity="info")))

    for order, rule in enumerate(RULES):
        run(order, rule.__name__.removeprefix("_rule_"), lambda rule=rule: rule(ctx))
    # general idle time only when no host-side cause explained it
    run(len(RULES), "device_idle", lambda: _rule_free(ctx, [f for _, f in found]))
    found.sort(key=lambda t: (-t[1].score, _ORDER[t[1].severity], t[0]))
    result = [f for _, f in found]
    return result[:max_findings] if max_findings is not None else result
