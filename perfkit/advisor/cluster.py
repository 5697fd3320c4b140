"""Rules of the cluster: a rank that holds the others back, pipeline stages out of balance.

The seeds' cluster method starts here: a slow rank or stage makes every other rank wait
inside the collectives, so it is found (and its cost counted) before the communication
it shows up in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from ..analysis import cluster as _cluster
from ..analysis._util import has_values
from .context import Context
from .finding import Finding, measured, unmeasured
from .registry import rule
from .words import fmt_time, pct, say

__all__ = ["slow_ranks", "pipeline"]

@rule("cluster", order=10, needs=("steps",))
def slow_ranks(ctx: Context) -> list[Finding]:
    """Ranks slower than the others (robust z-score per step phase); cost: their peers' wait."""
    if ctx.steps["rank"].nunique() < 3:  # the analysis marks no rank of fewer than 3 slow
        return []
    sr = ctx.get("slow", lambda: _cluster.slow_ranks(ctx.profile, parallel=ctx.parallel))
    slow = sr[sr["slow"].fillna(False).astype(bool)]
    out = []
    for metric, grp in slow.groupby("metric", sort=False):
        worst = grp.sort_values("excess_us", ascending=False).iloc[0]
        ranks = ", ".join(str(int(r)) for r in grp["rank"])
        plural = "s" if len(grp) > 1 else ""
        rank = int(worst["rank"])
        excess_pct = float(worst["excess_pct"])
        if metric == "computing_us":
            title = (f"Rank{plural} {ranks} compute{'' if plural else 's'} {excess_pct:.0f} % "
                     "slower than the others, who wait for it")
            rec = ("Compare that rank's operators with a normal rank's: the same operators "
                   "running slower mean a slow device (clock, temperature, a failing card: "
                   + say(ctx.fw, {"pytorch_gpu": "check nvidia-smi -q and the XID errors",
                                  "pytorch_cpu": "check the host's load, clock and NUMA "
                                                 "placement (top, lscpu, numastat)",
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
            title = (f"Rank{plural} {ranks} spend{'' if plural else 's'} {excess_pct:.0f} % "
                     "more time in exposed communication than the others")
            rec = ("Check that rank's links in the communication matrix (a slow link) and "
                   "whether it joins a collective that the others leave early.")
        stake, waited = _slow_rank_stake(ctx, rank, float(worst["excess_us"]))
        evidence = (f"rank {rank}: {str(worst['phase'])} {fmt_time(worst['value_us'])} per "
                    f"step against {fmt_time(worst['median_us'])} on the median rank "
                    f"(+{fmt_time(worst['excess_us'])}, above its step-to-step noise and "
                    f"{pct(float(worst['step_share']))} of the median step)"
                    if np.isfinite(float(worst["step_share"])) else
                    f"rank {rank}: {str(worst['phase'])} {fmt_time(worst['value_us'])} per "
                    f"step against {fmt_time(worst['median_us'])} on the median rank "
                    f"(+{fmt_time(worst['excess_us'])})")
        if np.isfinite(waited) and waited <= 0:
            # the peers' exposed communication is no longer than the rank's own: their wait
            # for it does not show inside the collectives (it is in their free time, or the
            # ranks are not synchronised by them); a wait is never negative, so it is said
            # as 0 and the excess is what the step loses
            evidence += (f"; its peers' exposed communication is {fmt_time(-waited)} "
                         "shorter than its own, so their wait for it does not show in the "
                         "collectives: its excess is counted instead")
            waited = 0.0
        out.append(measured(
            ctx, "slow_ranks", "cluster", stake, title, evidence,
            rec, details=f"metric {metric}; robust z = {float(worst['z']):.1f}; check "
            f"order {int(worst['check_order'])} of the MindSpore tuning guide's cluster method"
            + (f"; peers wait {waited:.0f} µs per step" if np.isfinite(waited) else "")))
    return out


def _slow_rank_stake(ctx: Context, rank: int, excess_us: float) -> tuple[float, float]:
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
    waited = median(peers) - float(per[rank])
    if not np.isfinite(waited) or waited <= 0:
        # no wait shows in the peers' collectives: the step still loses the excess
        return excess_us, waited
    return min(excess_us, waited), waited


def _rank_holding_stage(ctx: Context, sb: pd.DataFrame, stage: int
                        ) -> tuple[int, float, pd.Series] | None:
    """The rank whose computation makes pipeline ``stage`` the slowest, or None.

    The ranks of a stage (its data-parallel replicas) run the same layers, so their
    computation times should match. When one of them computes at least 5 % longer than
    the median of the others, by more than :data:`perfkit.analysis.cluster.NOISE_FACTOR`
    times its own step-to-step spread, that rank holds the stage back (a slow device),
    and with it every stage that waits for it.

    Returns
    -------
    (rank, its computation per step in µs, the computation of its stage peers by rank),
    or None when the stage is slow as a whole or the stage has a single rank. The stage
    may also be heavier than the others without that rank (the output layer on the last
    stage): the caller then reports the rank first and the rest of the stage's excess
    after it.
    """
    s = ctx.steps
    if not has_values(s, "computing_us"):
        return None
    where = _cluster.stage_of_ranks(ctx.profile, parallel=ctx.parallel)
    comp = pd.DataFrame({"rank": s["rank"], "c": s["computing_us"]}).groupby("rank")["c"]
    comp = comp.median().dropna()
    members = [r for r in where.index[where == stage] if r in comp.index]
    if len(members) < 2:
        return None
    mine = comp[members]
    rank = int(mine.idxmax())
    peers = mine.drop(index=rank)
    others = comp[[r for r in where.index[where != stage] if r in comp.index]]
    peer_us = median(peers)
    if others.empty or not np.isfinite(peer_us) or peer_us <= 0:
        return None
    if float(mine[rank]) < 1.05 * peer_us:
        return None
    # beyond the step-to-step noise of the rank's own computation (robust spread)
    noise = _cluster.step_noise_us(s, "computing_us").get(rank, np.nan)
    if np.isfinite(noise) and float(mine[rank]) - peer_us <= _cluster.NOISE_FACTOR * noise:
        return None
    return rank, float(mine[rank]), peers


def _ranks_text(ranks: Any) -> str:
    """``"rank 2"`` or ``"ranks 0, 1 and 2"``."""
    items = [str(int(r)) for r in ranks]
    if len(items) == 1:
        return f"rank {items[0]}"
    return f"ranks {', '.join(items[:-1])} and {items[-1]}"


@rule("cluster", order=20, needs=("steps",))
def pipeline(ctx: Context) -> list[Finding]:
    """Stages out of balance (or held back by one of their ranks), and receive wait beyond
    what the schedule's bubble explains."""
    sb = ctx.get("stages", lambda: _cluster.stage_balance(ctx.profile, parallel=ctx.parallel))
    if sb.empty or int(sb["stage_us"].notna().sum()) < 2:  # no two stages to compare
        return []
    out = []
    worst = sb.loc[sb["stage_us"].idxmax()]
    fastest = sb.loc[sb["stage_us"].idxmin()]
    spread = float(worst["stage_us"] - fastest["stage_us"])
    theo = float(sb["theoretical_bubble"].iloc[0])
    # receive wait beyond the schedule's own bubble: what the stages lose waiting
    # (stage_balance's excess_wait_us, the column the Communication tab's table shows)
    excess = sb["excess_wait_us"]
    excess_max = float(excess.max()) if excess.notna().any() else float("nan")
    fix = say(ctx.fw, {
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
    imbalance = _cluster.stage_imbalance_us(sb)
    held = _rank_holding_stage(ctx, sb, int(worst["stage"])) if spread > 0 else None
    rest = imbalance
    if held is not None and imbalance > 0:
        # the rank first: what it adds over its stage peers is what the others wait for it
        rank_cost = min(imbalance, held[1] - median(held[2]))
        out.append(_stage_held_by_rank(ctx, sb, worst, fastest, held, rank_cost,
                                       excess_max))
        rest = _stage_without_rank(ctx, sb, held, imbalance - rank_cost)
    if rest > 0 and spread > 0:
        out.append(measured(
            ctx, "stage_imbalance", "cluster", rest,
            (f"Pipeline stage {int(worst['stage'])} takes {pct(float(worst['imbalance']))} "
             f"longer than stage {int(fastest['stage'])}; the other stages wait for it")
            if held is None else
            (f"Pipeline stage {int(worst['stage'])} is also heavier than stage "
             f"{int(fastest['stage'])} without rank {held[0]}; the other stages wait for it"),
            "own work per step (step minus receive wait): " + ", ".join(
                f"stage {int(r.stage)} (ranks {r.ranks}) {fmt_time(r.stage_us)}"
                for r in sb.itertuples()) + f"; the stages wait {fmt_time(excess_max)} per "
            "step in receives beyond the schedule's own bubble"
            + ctx.assumed_note("num_micro_batches", "vpp"),
            f"Rebalance: {fix}; count the embedding on the first stage and the output "
            "layer and loss on the last.",
            details=f"spread of the stages' own work {fmt_time(spread)}; receive wait beyond "
                    f"the schedule {fmt_time(excess_max)}"))
    br = float(sb["bubble_ratio"].max())
    bub = float(sb["bubble_us"].max())
    if not np.isfinite(br) or bub <= 0:
        return out
    more_mb = say(ctx.fw, {
        "mindspore": "raise micro_batch_num (MindFormers parallel_config) or use pipeline "
                     "interleave (pp_interleave_num)",
        "torch_npu": "raise the number of micro-batches (larger global batch or smaller "
                     "micro-batch) or use the interleaved schedule "
                     "(--num-layers-per-virtual-pipeline-stage)",
        "pytorch_gpu": "raise the number of micro-batches or use the interleaved schedule "
                       "(--num-layers-per-virtual-pipeline-stage)"})
    if not np.isfinite(theo):
        out.append(unmeasured(
            "bubble", "cluster", "Pipeline bubble: how much is avoidable needs the schedule",
            f"receive wait up to {fmt_time(bub)} per step ({br:.2f} of the stage's own work)",
            "Pass parallel= (pp, micro-batches, vpp) to compare with the schedule's own "
            f"bubble, (pp - 1) / micro-batches. Then {more_mb}.", severity="info"))
        return out
    stage_of_max = float(sb.loc[sb["bubble_ratio"].idxmax(), "stage_us"])
    extra = excess_max - (imbalance if out else 0.0)
    if np.isfinite(extra) and extra > 0:
        out.append(measured(
            ctx, "bubble", "cluster", extra,
            "Pipeline bubble larger than the schedule explains",
            f"receive wait {fmt_time(bub)} per step against {fmt_time(theo * stage_of_max)} "
            f"that the schedule (pp, micro-batches, vpp) implies, after the stage imbalance"
            + ctx.assumed_note("num_micro_batches", "vpp"),
            "Look for slow ranks and late sends first (they show up as receive wait); then "
            f"{more_mb}.", details=f"measured ratio {br:.3f}, theoretical {theo:.3f}"))
    out.append(unmeasured(
        "schedule_bubble", "cluster",
        "The pipeline schedule itself leaves the stages idle for part of the step",
        f"(pp - 1) / micro-batches = {theo:.2f} of the stage's work, about "
        f"{fmt_time(theo * stage_of_max)} per step"
        + ctx.assumed_note("num_micro_batches", "vpp"),
        f"If memory allows, {more_mb}.", severity="info"))
    return out


def _stage_without_rank(ctx: Context, sb: pd.DataFrame, held: tuple[int, float, pd.Series],
                        left: float) -> float:
    """What the slowest stage still costs once its slow rank is set aside: the rest of the
    imbalance (``left``) when its other ranks compute more than 5 % longer than every rank
    of the other stages, else 0 (the rank explains the stage)."""
    s = ctx.steps
    where = _cluster.stage_of_ranks(ctx.profile, parallel=ctx.parallel)
    comp = pd.DataFrame({"rank": s["rank"], "c": s["computing_us"]}).groupby("rank")["c"]
    comp = comp.median().dropna()
    stage = where.get(held[0])
    others = comp[[r for r in where.index[where != stage] if r in comp.index]]
    if others.empty or median(held[2]) <= 1.05 * float(others.max()):
        return 0.0
    return max(0.0, left)


def _stage_held_by_rank(ctx: Context, sb: pd.DataFrame, worst: Any, fastest: Any,
                        held: tuple[int, float, pd.Series], imbalance: float,
                        excess_max: float) -> Finding:
    """The finding of a stage held back by one of its ranks: it names the rank.

    Its cost is the stage imbalance (what the other stages wait for beyond the schedule's
    bubble). When the ``slow_ranks`` rule has already named the rank (three or more ranks
    per stage), this finding is the stage's side of it, refers to it, and keeps the rule
    ``stage_imbalance``; otherwise it is the slow rank's finding (rule ``slow_ranks``).
    """
    rank, mine, peers = held
    stage = int(worst["stage"])
    peer_us = median(peers)
    slower = mine / peer_us - 1.0
    sr = ctx.get("slow", lambda: _cluster.slow_ranks(ctx.profile, parallel=ctx.parallel))
    named = bool((sr["slow"].fillna(False).astype(bool) & (sr["rank"] == rank)).any())
    evidence = (f"rank {rank} computes {fmt_time(mine)} per step against "
                f"{fmt_time(peer_us)} on {_ranks_text(peers.index)} of the same stage (the "
                f"same layers); own work per step (step minus receive wait): " + ", ".join(
                    f"stage {int(r.stage)} (ranks {r.ranks}) {fmt_time(r.stage_us)}"
                    for r in sb.itertuples())
                + f"; the stages wait {fmt_time(excess_max)} per step in receives beyond "
                "the schedule's own bubble")
    rec = ("Compare that rank's operators with its stage peer's: the same operators running "
           "slower mean a slow device (clock, temperature, a failing card: "
           + say(ctx.fw, {"pytorch_gpu": "check nvidia-smi -q and the XID errors",
                          "any": "check npu-smi info and the device logs"})
           + "). Replace or drain it: moving layers off the stage would only slow its "
           "healthy ranks.")
    details = (f"stage {stage} imbalance {float(worst['imbalance']):.3f} against stage "
               f"{int(fastest['stage'])}, explained by rank {rank} "
               f"(+{100.0 * slower:.0f} % computation over its stage peers)")
    if named:
        return measured(
            ctx, "stage_imbalance", "cluster", imbalance,
            f"Rank {rank} holds back pipeline stage {stage} (see its finding), and the "
            "other stages wait for that stage", evidence, rec, details=details)
    return measured(
        ctx, "slow_ranks", "cluster", imbalance,
        f"Rank {rank} computes {pct(slower)} longer than its stage "
        f"peer{'s' * (len(peers) > 1)} and delays "
        f"pipeline stage {stage}; the other stages wait for it", evidence, rec,
        details=details)
