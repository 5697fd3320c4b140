"""Rules of the host: the device waiting for data, for kernel launches, for the host itself.

Idle gaps between device tasks are the host's share of the step: short ones mean the
host cannot launch kernels fast enough, long ones a stall (a synchronisation, a barrier,
the allocator when memory is nearly full). No gap is counted beyond the rank's free time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._stats import median
from ..analysis import cluster as _cluster
from ..analysis import host_comm as _host_comm
from ..analysis import operators as _ops
from ..analysis._util import has_values
from ..analysis.recorded import recorded_steps_text
from ..analysis.steps import step_wall_us
from ..format import counted
from .context import Context
from .finding import Finding, measured
from .registry import rule
from .words import PYTORCH_ACCELERATED, fmt_bytes, fmt_time, kernel_names, pct, say
from .workload import axis_of

__all__ = ["data_loading", "host_bound", "long_gaps", "sync"]


@rule("host", order=50, needs=("steps",))
def data_loading(ctx: Context) -> list[Finding]:
    """The device waiting for the next batch at the start of the step: the wait of each
    step's slowest rank (:func:`_slowest_rank_waits`), the wait the step time counts; on a
    profile of one rank, that rank's wait each step (no slowest or worst rank is named)."""
    dl = ctx.get("data", lambda: _cluster.data_loading(ctx.profile))
    if dl.empty or not has_values(dl, "stall_us"):
        return []
    slowest = _slowest_rank_waits(dl)
    stall = float(slowest["stall_us"].mean())
    if not np.isfinite(stall) or stall <= 0:
        return []
    worst = slowest.loc[slowest["stall_us"].idxmax()]
    longest = dl.loc[dl["stall_us"].idxmax()]
    other = "" if float(longest["stall_us"]) <= float(worst["stall_us"]) else (
        f"; the longest wait of any rank: rank {int(longest['rank'])}, step "
        f"{longest['step']}: {fmt_time(float(longest['stall_us']))}, a rank that finished "
        "that step sooner")
    no_loader = _no_loader_recorded(dl)
    pieces = []
    for col, label in (("preparing_us", "before the first device task"),
                       ("dataloader_us", "in data-loader operators"),
                       ("iteration_interval_us", "between steps")):
        if col == "iteration_interval_us" and has_values(dl, "preparing_us"):
            continue  # the same wait, measured as the step trace's interval (raw CANN)
        if col == "dataloader_us" and no_loader:
            continue  # said below: no loader operator, not a loader time of zero
        if has_values(dl, col):
            pieces.append(f"{fmt_time(float(dl[col].max()))} {label}")
    if no_loader:
        return _host_wait(ctx, dl, stall, _whose(dl, worst, other), pieces)
    rec = say(ctx.fw, {
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
                       "offline.",
        "pytorch_cpu": "Make the DataLoader produce ahead of the step: worker processes "
                       "(num_workers) on cores the training threads do not use, "
                       "prefetch_factor, persistent_workers=True; move preprocessing "
                       "offline."})
    return [measured(
        ctx, "data_loading", "host", stall,
        "The device waits for the next batch at the start of the step",
        f"{fmt_time(stall)} per step on average, {_whose(dl, worst, other)}"
        + (f"; up to {', '.join(pieces)}" if pieces else ""),
        rec)]


def _whose(dl: pd.DataFrame, worst: pd.Series, other: str) -> str:
    """Whose wait the finding's average is: the one rank's, or each step's slowest rank's
    (``worst``: its longest; ``other``: a longer wait of a rank that finished sooner)."""
    if dl["rank"].nunique(dropna=False) <= 1:  # one rank: no slowest or worst of several
        return (f"the rank's wait each step (longest: step {worst['step']}, "
                f"{fmt_time(float(worst['stall_us']))})")
    return (f"the wait of the slowest rank of each step (the rank the step time "
            f"counts; worst: rank {int(worst['rank'])}, step {worst['step']}: "
            f"{fmt_time(float(worst['stall_us']))}){other}")


def _no_loader_recorded(dl: pd.DataFrame) -> bool:
    """Whether the host operators were timed and none of any step fetched a batch
    (``dataloader_us`` is 0 on every row: :data:`perfkit.analysis.DATALOADER_PATTERN`
    matched no operator), while the wait is measured otherwise (``preparing_us`` or the
    step interval): the wait is then host work the profile does not show as data loading."""
    if not has_values(dl, "dataloader_us"):
        return False  # no timed operators: the loader's time is unknown, not zero
    measured_wait = has_values(dl, "preparing_us") or has_values(dl, "iteration_interval_us")
    return measured_wait and float(dl["dataloader_us"].fillna(0.0).max()) <= 0.0


def _host_wait(ctx: Context, dl: pd.DataFrame, stall: float, whose: str,
               pieces: list[str]) -> list[Finding]:
    """The wait at the start of the step, when no data-loader operator was recorded in any
    step (:func:`_no_loader_recorded`): said as the host's time before the first device
    task, with advice to find that work in the trace, not to change a DataLoader the
    profile does not show (TimeSformer inference, H100: 218 ms of video decoding and
    preprocessing in the step, no loader operator)."""
    return [measured(
        ctx, "data_loading", "host", stall,
        "The device waits for the host at the start of the step",
        f"{fmt_time(stall)} per step on average, {whose}"
        + (f"; up to {', '.join(pieces)}" if pieces else "")
        + "; no data-loader operator was recorded in any step",
        "No data-loader operator was recorded, so this wait is other host work before "
        "the step's first device task (reading or preprocessing the input, for instance): "
        "find it on the trace's host timeline before that task, then move it out of the "
        "step or run it ahead of the step, while the device works.")]


def _slowest_rank_waits(dl: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`perfkit.analysis.data_loading` of each step's slowest rank.

    The slowest rank is the one with the longest wall time (its device span and the wait
    before it, :func:`perfkit.analysis.step_wall_us`), the rank whose step the Overview's
    step time counts (:func:`perfkit.analysis.measured_step_s`); in a step whose wall times
    are unknown, the rank that waited longest.
    """
    order = dl.assign(_wall=step_wall_us(dl)).sort_values(
        ["step", "_wall", "stall_us"], ascending=[True, False, False], na_position="last",
        kind="mergesort")
    return order.drop_duplicates("step", keep="first").drop(columns="_wall")
def _recorded(ctx: Context) -> str:
    """What the gaps were counted over when not every step's device tasks were recorded
    (:mod:`perfkit.analysis.recorded`), as the end of an evidence; else ``""``."""
    which = recorded_steps_text(ctx.steps)
    return f"; counted over the steps whose device tasks were recorded: {which}" \
        if which else ""


def _in_steps(ctx: Context, hb: pd.DataFrame) -> pd.DataFrame:
    """The gaps of :func:`perfkit.analysis.host_bound` inside the profiled steps.

    Where some rows have a step, the row of the tasks of no step (launched before the
    trace began, between steps) is left out: averaged in as a step, it priced the MI300
    DDP trace's long gaps at 487 ms per step where its five steps hold 584 (a walk, from
    the raw trace). None where every device task lies outside the steps the profile marks
    (a legacy MindSpore folder whose timeline does not meet its step trace,
    ``mindinsight-legacy/profiler_misc``: its 3 tasks span 6 s outside 8 steps of
    130 ms), where a gap is no part of a step and "per step" would price a 6 s gap in a
    128 ms step."""
    if hb.empty or "step" not in hb:
        return hb
    if hb["step"].notna().any():
        return hb[hb["step"].notna()]
    marked = ctx.steps
    if "step" in marked and marked["step"].notna().any():
        return hb.iloc[0:0]
    return hb


def _capped(ctx: Context, hb: pd.DataFrame, column: str,
            before: pd.Series | None = None) -> pd.Series:
    """Gaps ``column`` of each (rank, step) of ``hb``, none longer than that step's free
    time (less the gaps counted ``before``, a Series of the same index).

    Gaps between the device tasks are idle time only when every task is in the table; a
    profile whose communication tasks are missing from ``kernels`` would otherwise count
    communication as idle. The cap is each step's own free time, so that a rank's mean of
    gaps is held to its mean free time: capping the mean by the median free time cut
    ResNet-50's short gaps (``wild/k_resnet50_nw4``: 27.8 ms per step, the raw trace's
    figure) to 23.2 ms, and left its 1.04 ms of long gaps no room.
    """
    gaps = hb.groupby(["rank", "step"], dropna=False)[column].sum()
    steps = ctx.steps
    if not has_values(steps, "free_us") or not {"rank", "step"} <= set(steps.columns):
        return gaps
    room = steps.groupby(["rank", "step"], dropna=False)["free_us"].sum(min_count=1)
    room = room.reindex(gaps.index)
    if before is not None:
        room = room - before.reindex(gaps.index).fillna(0.0)
    return gaps.where(room.isna(), np.minimum(gaps, room.clip(lower=0.0)))


def _per_rank(gaps: pd.Series) -> pd.Series:
    """Each rank's mean over its steps of (rank, step) ``gaps``."""
    return gaps.groupby(level="rank").mean()


#: Advice when the host launches too slowly (the median gap is at least the median
#: kernel): fewer, larger launches, and a host that runs ahead of the device. The fields
#: in braces fit the job (:func:`_fitted`): a transformer's fused operators, a training
#: step's optimizer.
_LAUNCH_BOUND_ADVICE = {
    "mindspore": "Launch fewer, larger kernels: graph mode (jit / GRAPH_MODE) with "
                 "kernel-by-kernel launch off, fused operators, a larger {batch}; "
                 "bind the process to the NPU's NUMA node (taskset / numactl).",
    "torch_npu": "Launch fewer, larger kernels: {npu_fused}, a larger {batch}, task queue "
                 "(TASK_QUEUE_ENABLE=2), torch.compile / TorchAir graph mode; bind the "
                 "process to the NPU's NUMA node.",
    "pytorch_gpu": "Launch fewer, larger kernels: CUDA graphs or torch.compile "
                   "(mode='reduce-overhead'), {optim}"
                   "a larger {batch}; keep Python work out of the step."}

#: Advice when the host keeps up (the median gap is shorter than the median kernel): the
#: gaps are the device's turnaround between many kernels, which only fewer kernels (or a
#: captured graph, whose launches turn around faster) shorten; a faster host does not.
_TURNAROUND_ADVICE = {
    "mindspore": "The host keeps up (the median gap is shorter than the median kernel), so "
                 "these gaps are the turnaround between many kernels: run fewer of them "
                 "(graph mode with kernel-by-kernel launch off, fused operators, a larger "
                 "{batch}); binding the host process will not shorten them.",
    "torch_npu": "The host keeps up (the median gap is shorter than the median kernel), so "
                 "these gaps are the turnaround between many kernels: run fewer of them "
                 "({npu_fused}; TorchAir graph mode; a larger {batch}); a "
                 "faster host or task queue will not shorten them.",
    "pytorch_gpu": "The host keeps up (the median gap is shorter than the median kernel), "
                   "so these gaps are the turnaround between many kernels: run fewer of "
                   "them (torch.compile, {optim}{attention}a larger {batch}) or capture the "
                   "step with CUDA graphs; a faster host will not shorten them."}


def _fitted(ctx: Context, texts: dict[str, str]) -> str:
    """The advice of ``texts`` for the framework, its fields filled to fit the job
    (:mod:`perfkit.advisor.workload`): a transformer's fused operators only for a
    transformer (or a job of unknown kind), fused optimizers only for a training step."""
    inference = axis_of(ctx, "phase")[0] == "inference"
    transformer = axis_of(ctx, "arch")[0] != "other"
    return say(ctx.fw, texts).format(
        npu_fused=("fused operators (torch_npu.npu_rms_norm, npu_swiglu, "
                   "npu_fusion_attention)" if transformer else
                   "fused operators (torch.compile / TorchAir fuses a convolution with its "
                   "norm and activation)"),
        optim="" if inference else "fused optimizers (foreach / fused=True), ",
        attention="fused attention, " if transformer else "",
        batch="batch" if inference else "micro-batch")


@rule("host", order=60, needs=("kernels",))
def host_bound(ctx: Context) -> list[Finding]:
    """Gaps shorter than 1 ms between kernels: the host launching too slowly, or idling."""
    hb = _in_steps(ctx, ctx.gaps())
    if hb.empty or not has_values(hb, "launch_gap_us"):
        return []
    gap = median(_per_rank(_capped(ctx, hb, "launch_gap_us")))
    if not np.isfinite(gap) or gap <= 0:
        return []
    med_gap = median(hb["median_gap_us"])
    med_kernel = median(hb["median_kernel_us"])
    launch_bound = np.isfinite(med_gap) and med_gap >= med_kernel
    title = ("The host cannot launch kernels as fast as the device runs them"
             if launch_bound else "The device idles in short gaps between kernels")
    ev = (f"gaps shorter than 1 ms between kernels: {fmt_time(gap)} per step; median kernel "
          f"{fmt_time(med_kernel)}, median gap {fmt_time(med_gap)}")
    # the tiny kernels of the steps recorded in full, as the gaps: a fragment's share of
    # tiny tasks is not the step's
    tk = ctx.get("tiny", lambda: _ops.tiny_kernels(ctx.tasks))
    if not tk.empty and tk["storm"].fillna(False).astype(bool).any():
        r = tk[tk["storm"].fillna(False).astype(bool)].iloc[0]
        ev += (f"; {pct(float(r['tiny_count_share']))} of the kernels (communication "
               "left out) are shorter than "
               f"10 µs (most frequent: {kernel_names(r['top_names'])})")
    ev += _recorded(ctx)
    rec = _fitted(ctx, _LAUNCH_BOUND_ADVICE if launch_bound else _TURNAROUND_ADVICE)
    # the gaps are per step over the steps with device tasks: a share of those steps
    basis, basis_words = ctx.basis_over(hb["step"], "with its device tasks recorded")
    return [measured(ctx, "host_bound", "host", gap, title, ev, rec,
                     details="launch-bound test: the median gap is "
                             + ("at least" if launch_bound else "shorter than")
                             + " the median kernel",
                     step_us=basis, step_basis=basis_words)]


@rule("host", order=70, needs=("kernels",))
def long_gaps(ctx: Context) -> list[Finding]:
    """Idle periods of 1 ms or more inside the step: allocator, synchronisation, barriers."""
    hb = _in_steps(ctx, ctx.gaps())
    if hb.empty or not has_values(hb, "long_gap_us"):
        return []
    launch = _capped(ctx, hb, "launch_gap_us")
    gap = median(_per_rank(_capped(ctx, hb, "long_gap_us", launch)))
    if not np.isfinite(gap) or gap <= 0:
        return []
    used, cap, frac = ctx.memory_frac
    if np.isfinite(frac) and 0.9 <= frac <= 1.0:
        title = ("The device stalls inside the step while its memory is nearly full "
                 "(allocator frees and retries)")
        ev = (f"idle periods of 1 ms or more inside the step: {fmt_time(gap)} per step; "
              f"peak memory {fmt_bytes(used)} = {pct(frac)} of {fmt_bytes(cap)}"
              + _recorded(ctx))
        rec = say(ctx.fw, {
            "mindspore": "Lower the peak: selective recompute, optimizer sharding "
                         "(parallel_optimizer), a smaller micro-batch, or more pipeline "
                         "stages; check max_device_memory and memory_optimize_level.",
            "torch_npu": "Lower the peak: selective recompute, optimizer sharding (ZeRO / "
                         "distributed optimizer), a smaller micro-batch; reduce "
                         "fragmentation (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True).",
            "pytorch_gpu": "Lower the peak: activation checkpointing, optimizer sharding "
                           "(ZeRO / FSDP), a smaller micro-batch; reduce fragmentation "
                           "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."})
        return [measured(ctx, "memory_stalls", "memory", gap, title, ev, rec)]
    waiting = _host_collectives(ctx, gap)
    if waiting is not None:
        return [waiting]
    title = "The device idles in long gaps inside the step"
    ev = f"idle periods of 1 ms or more inside the step: {fmt_time(gap)} per step"
    sp = ctx.get("sync", lambda: _cluster.sync_points(ctx.profile))
    if not sp.empty:
        ev += ("; synchronising host calls: "
               + ", ".join(sp["name"].astype(str).drop_duplicates().head(3)))
    ev += _recorded(ctx)
    rec = ("Open the timeline at those gaps: a host synchronisation ("
           + (".item() on an output" if axis_of(ctx, "phase")[0] == "inference"
              else ".item(), printing a loss")
           + "), a barrier, a checkpoint or an allocator retry stops the launch queue.")
    return [measured(ctx, "host_stalls", "host", gap, title, ev, rec)]


def _host_collectives(ctx: Context, gap: float) -> Finding | None:
    """The long gaps as a wait for collectives run on the host (gloo), when they mostly
    are: at least half of the long-gap time overlaps the host's collective events
    (:func:`perfkit.analysis.host_collective_waits`); else None."""
    waits = ctx.get("host_comm_waits", lambda: _host_comm.host_collective_waits(ctx.profile))
    if waits.empty or not has_values(waits, "long_gap_us"):
        return None
    total = float(waits["long_gap_us"].sum())
    share = float(waits["host_comm_us"].sum()) / total if total > 0 else 0.0
    if not share >= 0.5:
        return None
    names = waits["collectives"].dropna().astype(str)
    shown = names.iloc[0] if len(names) else "collectives"
    title = "The device waits while the host runs the collectives (gloo)"
    ev = (f"idle periods of 1 ms or more inside the step: {fmt_time(gap)} per step, "
          f"{pct(share)} of them while the host ran {shown} (the gloo backend runs "
          "collectives on CPU threads: the step split counts this wait as free time, "
          "not communication)")
    rec = say(ctx.fw, {
        "mindspore": "Run the collectives on the device (HCCL), one device per rank.",
        "torch_npu": "Use the HCCL backend (torch.distributed.init_process_group('hccl')), "
                     "one NPU per rank, so that the gradient all-reduce runs on the device "
                     "and overlaps the backward pass.",
        "pytorch_gpu": "Use the NCCL backend (torch.distributed.init_process_group('nccl')), "
                       "one GPU per rank, so that the gradient all-reduce runs on the "
                       "device and DDP overlaps it with the backward pass; gloo is meant "
                       "for CPU training."})
    return measured(ctx, "host_stalls", "communication", gap, title, ev, rec,
                    details=f"long gaps covered by host collectives: {pct(share)}")


@rule("host", order=80, needs=("ops",), frameworks=PYTORCH_ACCELERATED)
def sync(ctx: Context) -> list[Finding]:
    """Host calls that wait for the device inside the step (at most the free time).

    Not on a CPU-only run: there is no device to wait for (``.item()`` reads host memory).
    """
    if ctx.fw not in PYTORCH_ACCELERATED:
        return []
    sp = ctx.get("sync", lambda: _cluster.sync_points(ctx.profile))
    if sp.empty:
        return []
    # a profile built without a rank (NA) is one rank, not none
    per_rank = sp.groupby("rank", dropna=False).agg(host_us=("host_us", "sum"),
                                                   per_step=("per_step", "sum"))
    host = ctx.per_rank_step(float(per_rank["host_us"].sum()))
    s = ctx.steps
    free = float(s["free_us"].mean()) if has_values(s, "free_us") else float("nan")
    stake = min(host, free) if np.isfinite(free) else host
    names = ", ".join(sp["name"].astype(str).drop_duplicates().head(3))
    read = ("reading outputs back (.item(), .cpu(), .tolist())"
            if axis_of(ctx, "phase")[0] == "inference" else None)
    rec = say(ctx.fw, {
        "mindspore": "Take .asnumpy() / printing of the loss out of the step (or every N "
                     "steps) and turn off pynative_synchronize.",
        "torch_npu": "Take .item() / .cpu() / printing of the loss out of the step (or every "
                     "N steps) and unset ASCEND_LAUNCH_BLOCKING.",
        "pytorch_gpu": "Take .item() / .cpu() / printing of the loss out of the step (or "
                       "every N steps) and unset CUDA_LAUNCH_BLOCKING."})
    if read is not None:  # an inference step has no loss: its outputs are read back
        rec = (f"Keep {read} out of the step: read them once per batch after the last "
               "kernel, or overlap the copy (non_blocking=True), and unset "
               f"{'ASCEND' if ctx.fw == 'torch_npu' else 'CUDA'}_LAUNCH_BLOCKING.")
    return [measured(
        ctx, "synchronisation", "host", stake,
        "The host waits for the device inside the step",
        f"{counted(round(median(per_rank['per_step'])), 'synchronising call')} per "
        f"step ({names}),"
        f" {fmt_time(host)} of host time per step; the device can idle meanwhile (free "
        f"{fmt_time(free)} per step)", rec)]
