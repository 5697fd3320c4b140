"""Rules of communication: a slow link, exposed communication, ranks waiting in collectives.

Exposed communication is measured on the rank that waits for nobody (the least exposed
one, by its mean over the steps), so that waiting for a slow rank or a stalled loader is
not counted again as communication; the part of it a slow link explains goes to the link.
What is left of the waiting once every cause has been looked for is :func:`comm_wait`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._stats import median
from ..analysis import communication as _comm
from ..analysis._frames import collect
from ..analysis._util import has_values, table
from ..analysis.link_nominal import LATENCY_BOUND_BYTES
from ..format import counted, number_text
from .context import Context
from .finding import Finding, measured
from .registry import rule
from .words import fmt_time, pct, say

__all__ = ["links", "exposed_comm", "comm_wait"]


def _exposed_per_rank(ctx: Context) -> pd.Series:
    """Exposed communication per step of each rank: ``comm_not_overlapped - bubble``, the
    mean over the rank's steps (empty without a communication split).

    The mean, as every time at stake per step is counted (the step time the findings are
    shares of is a mean over the steps too), and as the Communication tab's overlap table
    (:func:`perfkit.analysis.comm_overlap`) and the Overview's split (sums over ranks and
    steps) count it: a long first collective (a warm-up) weighs in all of them alike.
    """
    def compute() -> pd.Series:
        s = ctx.steps
        if not has_values(s, "comm_not_overlapped_us"):
            return pd.Series(dtype="float64")
        exp = s["comm_not_overlapped_us"] - (s["bubble_us"].fillna(0.0)
                                             if "bubble_us" in s.columns else 0.0)
        per = pd.DataFrame({"rank": s["rank"], "e": exp.clip(lower=0)})
        return per.groupby("rank")["e"].mean().dropna()
    return ctx.get("exposed_per_rank", compute)


def _exposed(ctx: Context) -> tuple[float, int | None]:
    """Exposed communication per step on the rank that waits for nobody (and that rank).

    The least exposed rank's :func:`_exposed_per_rank` (the mean over its steps): transfer
    that no other rank's lateness explains.
    """
    per = _exposed_per_rank(ctx)
    if per.empty:
        return float("nan"), None
    return float(per.min()), int(per.idxmin())


def _steps_of(ctx: Context, rank: int | None) -> int:
    """How many steps of ``rank`` have their exposed communication in the step breakdown
    (what :func:`_exposed_per_rank`'s mean is over: a step without the split, such as an
    iteration of raw CANN output whose msprof_ file is absent, is not in it)."""
    s = ctx.steps
    if rank is None:
        return 0
    known = s["comm_not_overlapped_us"].notna() if "comm_not_overlapped_us" in s.columns \
        else pd.Series(False, index=s.index)
    return int(((s["rank"] == rank).fillna(False) & known).sum())


def _step_basis(ctx: Context, rank: int | None) -> tuple[float | None, str]:
    """The step the exposed communication of ``rank`` is a share of, and its words
    (:meth:`Context.basis_over`): the mean over the steps it is measured in, where those
    are some of the profile's steps only (raw CANN output with the ``msprof_`` file of one
    iteration of ten)."""
    s = ctx.steps
    if rank is None or "comm_not_overlapped_us" not in s.columns:
        return None, ""
    mine = (s["rank"] == rank).fillna(False) & s["comm_not_overlapped_us"].notna()
    return ctx.basis_over(s.loc[mine, "step"], "with its communication measured")


@rule("communication", order=30, needs=("comm_matrix",))
def links(ctx: Context) -> list[Finding]:
    """The slowest link, if slow; saving: what its ranks would not expose at the usual bandwidth."""
    sl = ctx.get("links", lambda: _comm.slow_links(ctx.profile))
    slow = sl[sl["slow"].fillna(False).astype(bool)]
    if slow.empty:
        return []
    w = slow.iloc[0]
    ratio = float(w["ratio_to_median"])
    ranks = {int(w["src_rank"]), int(w["dst_rank"])}
    per = _exposed_per_rank(ctx)
    on_link = per[per.index.isin(list(ranks))] if w["rank_space"] == "global" else per
    exposed = float(on_link.min()) if len(on_link.dropna()) else float("nan")
    # a collective runs at the pace of its slowest link: at the normal bandwidth its
    # exposed transfer would shrink to `ratio` of what it is
    saving = exposed * (1.0 - ratio) if np.isfinite(exposed) else 0.0
    ctx.count("link_saving", saving)
    link = say(ctx.fw, {"pytorch_gpu": "NVLink / InfiniBand (nvidia-smi nvlink -e, "
                                       "ibstat, NCCL_DEBUG=INFO)",
                        "pytorch_rocm": "Infinity Fabric (xGMI) / InfiniBand or RoCE "
                                        "(rocm-smi --showtopo, ibstat, NCCL_DEBUG=INFO, "
                                        "which RCCL reads)",
                        "pytorch_cpu": "the hosts' network (ip -s link, ethtool -S, and "
                                       "the interface gloo uses: GLOO_SOCKET_IFNAME)",
                        "any": "HCCS / RoCE (npu-smi info, hccn_tool -i N -link -g, "
                               "the device logs)"})
    pair = f"ranks {int(w['src_rank'])} and {int(w['dst_rank'])}"
    if w["rank_space"] != "global":  # the group's own numbering, not the job's
        pair = f"local {pair} of communication group {w['group']}" + (
            f" (recorded by rank {int(w['recorded_by'])})"
            if "recorded_by" in w.index and pd.notna(w["recorded_by"]) else "")
    return [measured(
        ctx, "slow_link", "communication", saving,
        f"Slow {w['transport']} link between {pair}: {pct(ratio)} of the bandwidth of the "
        "others",
        f"{counted(len(slow), 'slow link')}; worst {number_text(w['bandwidth_gbps'], unit='GB/s')}"
        f" against a median of {number_text(w['median_gbps'], unit='GB/s')}; every collective "
        "of its group runs at its "
        "pace "
        f"(exposed communication on {'its' if w['rank_space'] == 'global' else 'the'} "
        f"ranks {fmt_time(exposed)} per step, the mean over "
        "the steps)",
        f"Check the link ({link}: errors, cable, optics, switch port) and the rank "
        "placement; move the job off it until it is repaired.",
        details=f"{w['rank_space']} ranks; saving = exposed x (1 - ratio)")]


def _wait_fraction(ctx: Context, rank: int | None) -> float:
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


def _covers_job(ctx: Context) -> bool:
    """Whether the profile holds every rank of the job (world size or groups say so).

    Then the least exposed rank waits for nobody in the profile; otherwise (or when the
    profile does not say) its waiting may be for ranks that were not profiled.
    """
    loaded, world = _ranks_of_job(ctx)
    return world > 0 and loaded >= world


def _ranks_of_job(ctx: Context) -> tuple[int, int]:
    """(ranks loaded, the job's world size; 0 where neither the world size nor the
    communication groups say)."""
    s = ctx.steps
    present = set(s["rank"].dropna().astype(int)) if "rank" in s.columns else set()
    metas = [getattr(ctx.profile, "meta", None), *ctx.rank_metas()]
    world = max((int(m.world_size) for m in metas
                 if m is not None and getattr(m, "world_size", None)), default=0)
    for m in metas:
        for g in (getattr(m, "groups", None) or {}).values():
            ranks = g.get("global_ranks", []) if isinstance(g, dict) else []
            world = max([world, *[int(r) + 1 for r in ranks or []]])
    return len(present), world


@rule("communication", order=40, needs=("steps",), after=("links",))
def exposed_comm(ctx: Context) -> list[Finding]:
    """Communication that nothing computes under, on the rank that waits for nobody."""
    e, rank = _exposed(ctx)
    if not np.isfinite(e) or e <= 0:
        return []  # nothing exposed (or no communication at all): nothing to hide
    waiting = 0.0
    covers = _covers_job(ctx)
    wf = _wait_fraction(ctx, rank) if not covers else float("nan")
    if np.isfinite(wf):
        # even the least exposed rank may wait (for ranks outside the profile): the
        # profiler's split of each collective into transfer and wait tells which part is
        # communication
        waiting = e * wf
        ctx.count("min_rank_wait", waiting)
    stake = max(0.0, e - waiting - ctx.counted("link_saving"))
    s = ctx.steps
    overlap = float("nan")
    if has_values(s, "communication_us") and has_values(s, "overlapped_us"):
        # over every rank and step, as the Overview's split sums them
        comm = float(s["communication_us"].sum())
        overlap = float(s["overlapped_us"].sum()) / comm if comm > 0 else float("nan")
    cs = ctx.get("comm", lambda: _comm.comm_summary(ctx.profile))
    mean = f"per step on average (the mean over its {counted(_steps_of(ctx, rank), 'step')})"
    if waiting > 0:
        least = "the one rank loaded" if ctx.one_rank else "the least exposed"
        ev = (f"rank {rank}, {least}, communicates {fmt_time(e)} {mean} with "
              f"nothing computing, {pct(wf)} of its collective time waiting for peers "
              "(left out of the time at stake)")
    elif covers:
        ev = (f"rank {rank}, which waits for no other rank, communicates {fmt_time(e)} {mean}"
              " with nothing computing")
    else:  # ranks of the job not profiled, or not known: the least exposed may wait
        loaded, world = _ranks_of_job(ctx)
        why = (f"{loaded} of the job's {world} ranks {'is' if loaded == 1 else 'are'} in "
               "the profile" if world else
               "the profile does not say whether it holds every rank of the job")
        least = "the one rank loaded" if ctx.one_rank else "the least exposed of the ranks loaded"
        ev = (f"rank {rank}, {least}, communicates "
              f"{fmt_time(e)} {mean} with nothing computing ({why}: part of it may be "
              "waiting for ranks not profiled)")
    if np.isfinite(overlap):
        ev += f"; {pct(overlap)} of all communication runs under computation"
    if not cs.empty:
        top = cs.iloc[0]
        ev += f"; largest: {top['op_type']} x{int(top['count'])}, {fmt_time(top['total_us'])}"
        ev += f" in total {ctx.over_ranks_and_steps}"
    details = ""
    if ctx.hardware is not None:
        bw = ctx.get("bw", lambda: _comm.comm_bandwidth_summary(ctx.profile, ctx.hardware))
        # operators of under 1 MB on average are latency-bound: their rate says nothing
        # of the link (slow_links' min_bytes)
        low = bw[(bw["efficiency"] < 0.3) & (bw["size_bytes"] >= LATENCY_BOUND_BYTES
                                             * bw["ops"])] if not bw.empty else bw
        for r in low.itertuples():
            of = ("" if pd.isna(r.nominal_of) or r.nominal_of == "per device"
                  else f" ({r.nominal_of})")
            ev += (f"; {r.transport} reaches {number_text(r.bandwidth_gbps, unit='GB/s')}, "
                   f"{pct(r.efficiency)} of its nominal "
                   f"{number_text(r.nominal_gbps, unit='GB/s')}{of}")
            details += f"low {r.transport} efficiency {r.efficiency:.3f}; "
    if not cs.empty and str(cs.iloc[0]["op_type"]) == "alltoall" and \
            ctx.fw.startswith("pytorch_"):
        # an all-to-all exchanges rows, not gradients: the expert-parallel token exchange
        # (DeepEP dispatch / combine) or the sharded embeddings' lookups (TorchRec)
        rec = say(ctx.fw, {
            "pytorch_gpu": "The exposed collective is an all-to-all, which exchanges "
                           "activations, not gradient buckets: the expert-parallel token "
                           "dispatch and combine of a mixture of experts, or the lookups of "
                           "sharded embedding tables (TorchRec). Hide it behind computation: "
                           "overlap the exchange of one micro-batch or batch with the work of "
                           "another (two micro-batches in flight, as DualPipe does; DeepEP's "
                           "hook-based kernels; TorchRec's pipelined training, "
                           "TrainPipelineSparseDist), keep the exchange group inside the "
                           "NVLink domain where it fits, and balance the tokens per expert or "
                           "the rows per embedding shard.",
            "pytorch_cpu": "The exposed collective is an all-to-all, which exchanges "
                           "activations, not gradient buckets (expert tokens or sharded "
                           "embedding rows): overlap the exchange of one micro-batch with the "
                           "computation of another and balance the load per expert or "
                           "embedding shard."})
    elif _forward_only(ctx):
        # inference / evaluation: no gradient to reduce; the collectives are the forward's
        # (before the tensor-parallel words, which speak of training: sequence parallelism,
        # --tp-comm-overlap, trading tp for dp)
        rec = say(ctx.fw, {
            "any": "The profiled step runs no backward pass, so its collectives are the "
                   "forward's own (tensor-parallel all-reduces and all-gathers), not "
                   "gradient reduction: keep the tensor-parallel group inside a node, "
                   "overlap its collectives with computation (sequence parallelism, fused "
                   "matmul-communication kernels), or use fewer tensor-parallel ranks where "
                   "memory allows.",
            "pytorch_gpu": "The profiled step runs no backward pass, so its collectives "
                           "are the forward's own (tensor-parallel all-reduces and "
                           "all-gathers), not gradient reduction: keep the tensor-parallel "
                           "group inside an NVLink domain, overlap its collectives with "
                           "computation (sequence parallelism, fused GEMM-communication "
                           "kernels, CUDA graphs over the decode step), or use fewer "
                           "tensor-parallel ranks where memory allows."})
    elif _tensor_parallel_only(ctx):
        # dp = 1: no gradient reduction to overlap; the exposed collectives are the layers'
        # own tensor-parallel all-reduces / all-gathers
        rec = say(ctx.fw, {
            "mindspore": "The exposed collectives are model (tensor) parallel, not gradient "
                         "reduction (dp = 1): keep the model-parallel group inside a node "
                         "(HCCS), overlap its collectives with computation (sequence "
                         "parallelism, communication fusion), or trade model parallelism for "
                         "data parallelism where memory allows.",
            "torch_npu": "The exposed collectives are tensor parallel, not gradient "
                         "reduction (dp = 1): keep tp inside a node (HCCS), use sequence "
                         "parallelism and MindSpeed's fused matmul-communication kernels "
                         "(--use-ascend-mc2), or trade tp for dp where memory allows.",
            "pytorch_gpu": "The exposed collectives are tensor parallel, not gradient "
                           "reduction (dp = 1): keep tp inside an NVLink domain, use sequence "
                           "parallelism and tensor-parallel communication overlap (Megatron "
                           "--tp-comm-overlap with Transformer Engine), or trade tp for dp "
                           "where memory allows.",
            "pytorch_cpu": "The exposed collectives are tensor parallel, not gradient "
                           "reduction (dp = 1): every layer waits on gloo over TCP; trade tp "
                           "for dp (or a larger host) where memory allows."})
    elif np.isfinite(overlap) and overlap < 0.1:
        rec = say(ctx.fw, {
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
                           "synchronisation serialises the NCCL stream.",
            "pytorch_cpu": "Nothing overlaps: let DDP reduce gradients in buckets while the "
                           "backward pass still computes (bucket_cap_mb, "
                           "gradient_as_bucket_view=True), keep the training loop from "
                           "waiting on each gloo work early, and leave cores free for "
                           "gloo's threads (torch.set_num_threads below the core count)."})
    else:
        rec = say(ctx.fw, {
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
                           "tensor parallelism inside an NVLink domain.",
            "pytorch_cpu": "Overlap gradient reduction with the backward pass (DDP "
                           "bucket_cap_mb / gradient_as_bucket_view), fuse small collectives "
                           "into larger buckets, and keep the ranks of one job on hosts "
                           "joined by a fast network (gloo sends over TCP)."})
    link = ctx.counted("link_saving")
    if link > 0:
        ev += f"; {fmt_time(min(link, e))} of it is the slow link's (see that finding)"
    basis, basis_words = _step_basis(ctx, rank)
    return [measured(ctx, "exposed_communication", "communication", stake,
                     "Communication is not hidden behind computation", ev, rec,
                     details=details.rstrip("; "), step_us=basis, step_basis=basis_words)]


def _forward_only(ctx: Context) -> bool:
    """Whether the profiled step runs no backward pass (:meth:`Context.training_step`)."""
    return ctx.training_step()[0] is False


def _tensor_parallel_only(ctx: Context) -> bool:
    """Whether the job has no data parallelism to overlap (dp = 1) but tensor parallelism."""
    par = ctx.parallel
    return par is not None and getattr(par, "dp", None) == 1 and (getattr(par, "tp", 1) or 1) > 1


@rule("communication", order=180, needs=("steps",),
      after=("slow_ranks", "pipeline", "links", "exposed_comm", "data_loading"))
def comm_wait(ctx: Context) -> list[Finding]:
    """Waiting inside collectives that no other finding explains: the median rank's
    exposure above the least exposed one, plus that one's own wait for its peers; on a
    profile of one rank, that rank's own wait for its peers (which are not in it)."""
    # a cause that an earlier rule found explains the waiting (the pipeline rule finds
    # stage_imbalance, the links rule slow_link)
    causes = {"slow_ranks", "data_loading", "stage_imbalance", "slow_link"}
    found = ctx.findings("slow_ranks", "pipeline", "links", "data_loading")
    if any(f.rule in causes and f.measured and f.score >= 0.01 for f in found):
        return []
    s = ctx.steps
    if not has_values(s, "comm_not_overlapped_us"):
        return []
    e, rank = _exposed(ctx)
    own = ctx.counted("min_rank_wait")
    if ctx.one_rank:  # no median or least exposed rank of one: its own wait for its peers
        if not np.isfinite(own) or own <= 0:
            return []
        return [measured(
            ctx, "comm_wait", "communication", own,
            f"Rank {rank} waits for its peers inside its collectives",
            f"rank {rank}, the one rank loaded, waits {fmt_time(own)} per step for its peers "
            "inside the collectives (the profiler's wait share of its collective time, of "
            "its exposed communication); the peers are not in the profile",
            "Open the run's other ranks (the folder that holds all of them) and find the "
            "rank that arrives late (step start, computation, host launch) in the cluster "
            "step trace; the waiting is its symptom, not a communication problem.")]
    per = _exposed_per_rank(ctx)
    spread = max(0.0, median(per) - e) if np.isfinite(e) else 0.0
    extra = spread + own
    ev = (f"the median rank spends {fmt_time(spread)} per step more in exposed "
          "communication than the least exposed one (means over the steps)")
    if own > 0:
        ev += (f", which itself waits {fmt_time(own)} per step for its peers inside the "
               "collectives (peers outside the profile, or all late together)")
    if not np.isfinite(extra) or extra <= 0:
        return []
    return [measured(
        ctx, "comm_wait", "communication", extra,
        "Ranks wait for each other inside their collectives", ev,
        "Find the rank that arrives late (step start, computation, host launch) in the "
        "cluster step trace; the waiting is its symptom, not a communication problem.")]
