"""Cluster effects: slow ranks, pipeline stage balance, data-loading stalls, host-bound launch.

The seed's cluster method checks, for every parallel mode, first the *step interval*
(data loading, host), then the *forward/backward* (computing) time, then the
*communication* of every rank; a rank much slower than the others is a slow node that the
whole group waits for. :func:`slow_ranks` applies a robust outlier rule (median and MAD,
so that the slow rank itself does not hide in the spread) to those metrics in that order.
For pipeline parallelism :func:`stage_balance` compares the stages and the measured bubble
with the theoretical one. :func:`data_loading` and :func:`host_bound` split the device's
free time into "waiting for data" and "waiting for the host to launch the next kernel";
:func:`sync_points` lists host operators that force a device synchronisation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._text_dtype import TEXT
from ..calc.pipeline import bubble_fraction
from ._frames import any_values, collect, is_lazy, per_rank, transform
from ._intervals import union_parts
from ._order import group_median, slice_median
from ._util import (
    add_note,
    empty_frame,
    has_values,
    robust_z,
    table,
    take_rows,
    text_matches,
    typed,
)
from .host_sync import SYNC_PATTERN, sync_points
from .pipeline_stages import stage_notes, stage_of_ranks
from .rank_noise import MIN_STEP_SHARE, NOISE_FACTOR, step_noise_us
from .recorded import recorded_mask, recorded_text, unrecorded
from .steps import exposed_comm_us, step_breakdown, step_wall_us

__all__ = ["slow_ranks", "stage_balance", "stage_imbalance_us", "stage_of_ranks",
           "data_loading", "host_bound", "sync_points", "SLOW_RANK_METRICS",
           "DATALOADER_PATTERN", "SYNC_PATTERN"]

#: Metrics of :func:`slow_ranks`, in the seed's order of checks, with the phase they stand
#: for: step interval (free / preparing time), forward+backward (computing), then
#: communication. ``comm_exposed_us`` is the exposed communication without the pipeline
#: bubble (:func:`~perfkit.analysis.steps.exposed_comm_us`), as on the Overview: a later
#: pipeline stage's receive wait is :func:`stage_balance`'s, not a rank's communication.
SLOW_RANK_METRICS: tuple[tuple[str, int, str], ...] = (
    ("free_us", 1, "step interval (device idle: data loading, host)"),
    ("preparing_us", 1, "step interval (host preparing the step)"),
    ("computing_us", 2, "forward and backward computation"),
    ("comm_exposed_us", 3, "communication not hidden by computation (pipeline receive "
                           "wait excluded)"),
)
#: Earlier names of the metrics, accepted by ``slow_ranks(metrics=...)``.
_METRIC_ALIASES = {"comm_not_overlapped_us": "comm_exposed_us"}

#: Host operators that fetch a batch.
DATALOADER_PATTERN = (r"(?i)dataloader|enumerate\(|__next__|next_data|getnext|"
                      r"dataset_iterator|minddata|data_sink")

SLOW_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "metric": TEXT, "check_order": "int64", "phase": TEXT,
    "value_us": "float64", "median_us": "float64", "mad_us": "float64", "z": "float64",
    "excess_us": "float64", "excess_pct": "float64", "noise_us": "float64",
    "step_share": "float64", "slow": "boolean",
}


#: Smallest excess of a slow rank over the median rank, relative (:func:`slow_ranks`).
MIN_EXCESS = 0.05


def slow_ranks(cluster: Any, threshold: float = 3.5, min_excess: float = MIN_EXCESS,
               metrics: Sequence[str] | None = None,
               noise_factor: float = NOISE_FACTOR, min_step_share: float = MIN_STEP_SHARE,
               stages: Mapping[int, int] | Sequence[Sequence[int]] | None = None,
               parallel: Any = None) -> pd.DataFrame:
    """Robust outlier test per metric: which ranks are slower than the others.

    For each metric the per-rank median over steps (robust to a warm-up step) is compared
    with the median over ranks:
    ``z = (value - median) / (1.4826 * MAD)`` (±inf when the MAD is 0, i.e. when at least
    half the ranks are identical and this one is not). A rank is *slow* on a metric when
    ``z >= threshold`` **and** its value exceeds the median by at least ``min_excess``
    (relative), so that tiny absolute differences are not reported, **and** the excess is
    above the noise: more than ``noise_factor`` × ``noise_us`` (the larger of the rank's
    own step-to-step spread and the median spread of its peers,
    :func:`perfkit.analysis.rank_noise.step_noise_us`; not tested where no rank has 3
    steps) and at least ``min_step_share`` of the median step's wall time
    (``step_share`` = excess / median wall).

    Parameters
    ----------
    cluster : Cluster or Profile
        Needs at least three ranks for a meaningful answer (fewer give ``slow`` False
        and a note).
    threshold : float
        Robust z-score above which a rank is an outlier (3.5 is the usual choice).
    min_excess : float
        Minimum relative excess over the median.
    noise_factor : float
        How many times the step-to-step noise the excess must exceed
        (:data:`perfkit.analysis.rank_noise.NOISE_FACTOR`, 2).
    min_step_share : float
        Smallest excess as a share of the median step's wall time
        (:data:`perfkit.analysis.rank_noise.MIN_STEP_SHARE`, 2 %).
    metrics : sequence of str, optional
        Subset of ``free_us``, ``preparing_us``, ``computing_us``, ``comm_exposed_us``
        (default: all that the steps table has; ``comm_not_overlapped_us``, the earlier
        name, stands for ``comm_exposed_us``).
    stages, parallel : optional
        Pipeline stages (see :func:`stage_of_ranks`). When known, ranks are compared
        with the other ranks of *their own stage* (the seed: "screen the stage that
        takes long and sort its computation time"), so that a heavier stage is not
        mistaken for slow ranks; that is :func:`stage_balance`'s job.

    Returns
    -------
    DataFrame
        Long format, one row per (rank, metric), ordered by the seed's ``check_order``
        (1 step interval, 2 computation, 3 communication), then metric, then rank:
        ``value_us``, ``median_us``, ``mad_us``, ``z``, ``excess_us``, ``excess_pct``,
        ``slow``. A slow rank usually also shows *less* communication time than the others
        (they wait for it inside their collectives); the ``z`` of communication is then
        negative for the slow rank.
    """
    s = step_breakdown(cluster)
    if s.empty:
        return empty_frame(SLOW_COLUMNS, "no step breakdown in this profile")
    if "comm_not_overlapped_us" in s.columns:
        s = s.assign(comm_exposed_us=exposed_comm_us(s))
    names = None if metrics is None else {_METRIC_ALIASES.get(m, m) for m in metrics}
    wanted = [m for m in SLOW_RANK_METRICS if names is None or m[0] in names]
    wanted = [m for m in wanted if has_values(s, m[0])]
    if not wanted:
        return empty_frame(SLOW_COLUMNS, "the step breakdown has none of the metrics")
    per_rank = s.groupby("rank")[[m[0] for m in wanted]].median()
    long = per_rank.reset_index().melt(id_vars="rank", var_name="metric", value_name="value_us")
    long = long.dropna(subset=["value_us"]).reset_index(drop=True)
    stage = stage_of_ranks(cluster, stages, parallel)
    peers = long["metric"].astype(str)
    if not stage.empty:
        st = long["rank"].astype("float64").map(stage.astype("float64"))
        peers = peers + "/" + st.astype(TEXT).fillna("?")
    rz = robust_z(long["value_us"], peers)
    long["median_us"] = rz["median"]
    long["mad_us"] = rz["mad"]
    long["z"] = rz["z"]
    long["excess_us"] = long["value_us"] - long["median_us"]
    long["excess_pct"] = 100.0 * long["excess_us"] / long["median_us"].where(
        long["median_us"] > 0)
    n_ranks = long.groupby(peers)["rank"].transform("nunique")
    long["noise_us"] = _noise(s, long, peers)
    wall = step_wall_us(s) if "step_us" in s.columns else pd.Series(dtype="float64")
    med_wall = float(wall.median()) if wall.notna().any() else float("nan")
    long["step_share"] = long["excess_us"] / med_wall if med_wall > 0 else np.nan
    above_noise = ~(long["excess_us"] <= noise_factor * long["noise_us"]).fillna(False)
    big = ~(long["step_share"] < min_step_share).fillna(False)
    long["slow"] = ((long["z"] >= threshold) & (long["excess_pct"] >= 100.0 * min_excess)
                    & (n_ranks >= 3) & above_noise & big)
    order = {m: (o, p) for m, o, p in SLOW_RANK_METRICS}
    long["check_order"] = long["metric"].map(lambda m: order[m][0])
    long["phase"] = long["metric"].map(lambda m: order[m][1])
    long = long.sort_values(["check_order", "metric", "rank"], kind="mergesort")
    out = typed(long, SLOW_COLUMNS).reset_index(drop=True)
    for said in stage_notes(per_rank.index, stage, stages, parallel):
        add_note(out, said)
    if per_rank.shape[0] < 3 or (n_ranks < 3).any():
        add_note(out, "fewer than 3 comparable ranks (per stage when stages are known): a "
                      "robust outlier rule needs at least 3")
    return out


def _noise(s: pd.DataFrame, long: pd.DataFrame, peers: pd.Series) -> np.ndarray:
    """Per (rank, metric) row of ``long``: the larger of the rank's step-to-step noise and
    the median noise of its peer group (same metric and stage); NaN where unknown."""
    out = np.full(len(long), np.nan)
    for metric in pd.unique(long["metric"]):
        noise = step_noise_us(s, str(metric))
        sel = (long["metric"] == metric).to_numpy(bool)
        own = long.loc[sel, "rank"].astype("float64").map(noise).to_numpy(np.float64)
        group = pd.Series(own, index=long.index[sel]).groupby(peers[sel]).transform("median")
        out[sel] = np.fmax(own, group.to_numpy(np.float64))
    return out


def stage_balance(cluster: Any, stages: Mapping[int, int] | Sequence[Sequence[int]] | None
                  = None, parallel: Any = None) -> pd.DataFrame:
    """Pipeline stage times, their imbalance and the measured vs theoretical bubble.

    Parameters
    ----------
    cluster : Cluster
    stages : mapping or list of lists, optional
        Stage membership (see :func:`stage_of_ranks`).
    parallel : perfkit.ParallelConfig, optional
        Gives the stages when ``stages`` is not given, and ``pp``, ``num_micro_batches``,
        ``vpp`` for the theoretical bubble :func:`perfkit.calc.pipeline.bubble_fraction`.

    Returns
    -------
    DataFrame
        One row per stage: ``stage``, ``ranks``, ``step_us``, ``stage_us`` (step time minus
        receive wait; the stage's own work), ``computing_us``, ``bubble_us`` (medians over
        the stage's ranks and steps, robust to a warm-up step), ``imbalance``
        (stage_us / fastest stage_us - 1),
        ``bubble_ratio`` (bubble / stage time, the same definition as
        ``bubble_fraction``: bubble over ideal compute time), ``theoretical_bubble``
        (NA without ``parallel``), ``schedule_bubble_us`` (theoretical_bubble × stage_us:
        the receive wait the schedule itself leaves the stage; NA without ``parallel``)
        and ``excess_wait_us`` (bubble_us − schedule_bubble_us, at least 0; the whole
        bubble_us without ``parallel``): the wait the schedule does not explain, which
        :func:`stage_imbalance_us` and the advisor's ``pipeline`` rule count. Empty with a
        note when the stages are unknown, or when ``parallel`` has one stage (``pp`` 1)
        and ``stages`` is not given.
    """
    cols = {"stage": "int64", "ranks": TEXT, "step_us": "float64", "stage_us": "float64",
            "computing_us": "float64", "bubble_us": "float64", "imbalance": "float64",
            "bubble_ratio": "float64", "theoretical_bubble": "float64",
            "schedule_bubble_us": "float64", "excess_wait_us": "float64"}
    s = step_breakdown(cluster)
    if s.empty:
        return empty_frame(cols, "no step breakdown in this profile")
    stage = stage_of_ranks(cluster, stages, parallel)
    if stage.empty and stages is None and getattr(parallel, "pp", None) == 1:
        return empty_frame(cols, "one pipeline stage (pp 1): no stages to balance")
    if stage.empty:
        return empty_frame(cols, "pipeline stages unknown: pass stages= or parallel= "
                                 "(no pp group in meta.groups)")
    s_ranks = s["rank"].dropna().astype(int).unique()
    s = s.assign(stage=s["rank"].astype("float64").map(stage.astype("float64")))
    s = s.dropna(subset=["stage"])
    if not has_values(s, "stage_us"):
        s["stage_us"] = s["step_us"] - s["bubble_us"]
    g = s.groupby("stage").agg(step_us=("step_us", "median"),
                               stage_us=("stage_us", "median"),
                               computing_us=("computing_us", "median"),
                               bubble_us=("bubble_us", "median"))
    g["ranks"] = s.groupby("stage")["rank"].agg(
        lambda r: ",".join(str(int(x)) for x in sorted(set(r.dropna()))))
    g = g.reset_index()
    g["stage"] = g["stage"].astype("int64")
    g["imbalance"] = g["stage_us"] / g["stage_us"].min() - 1.0
    g["bubble_ratio"] = g["bubble_us"] / g["stage_us"].where(g["stage_us"] > 0)
    if parallel is not None and getattr(parallel, "pp", 1) > 1:
        g["theoretical_bubble"] = bubble_fraction(parallel.pp, parallel.num_micro_batches,
                                                  parallel.vpp)
    else:
        g["theoretical_bubble"] = np.nan
    g["schedule_bubble_us"] = g["theoretical_bubble"] * g["stage_us"]
    g["excess_wait_us"] = (g["bubble_us"] - g["schedule_bubble_us"].fillna(0.0)).clip(lower=0)
    out = typed(g, cols)
    for said in stage_notes(s_ranks, stage, stages, parallel):
        add_note(out, said)
    return out


def stage_imbalance_us(stages: pd.DataFrame) -> float:
    """What the stages' imbalance costs per step, in µs, from :func:`stage_balance`'s rows.

    The faster stages wait for the slowest in their receives, so the cost is that wait
    beyond the schedule's own bubble (the largest ``excess_wait_us``), and at most the
    spread of the stages' own work (max − min ``stage_us``): min(spread, excess). 0 where
    the receive wait is no more than the schedule's bubble (or the stages are even); NaN
    with fewer than two stages. The ``stage_imbalance`` finding and the Communication
    tab's stage table both count it.
    """
    if len(stages) < 2 or not has_values(stages, "stage_us"):
        return float("nan")
    spread = float(stages["stage_us"].max() - stages["stage_us"].min())
    excess = stages["excess_wait_us"]
    if not excess.notna().any():
        return max(spread, 0.0)
    return max(min(spread, float(excess.max())), 0.0)


#: What :func:`data_loading` sums of the loader operators.
_LOADER_COLUMNS = ["rank", "step", "dur_us"]


def _loader_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """:data:`_LOADER_COLUMNS` of the host operators that fetch a batch
    (:data:`DATALOADER_PATTERN`): only the columns summed are taken out for those rows."""
    return ops[_LOADER_COLUMNS][text_matches(ops["name"], DATALOADER_PATTERN).to_numpy(bool)]


def data_loading(profile: Any, stall_share: float = 0.1) -> pd.DataFrame:
    """Data-loading stalls per rank and step: step interval, preparing and loader time.

    Parameters
    ----------
    profile : Profile or Cluster
    stall_share : float
        A step stalls when the largest of the three signals below is at least this share
        of the step time.

    Returns
    -------
    DataFrame
        ``rank``, ``step``, ``step_us``, ``preparing_us`` (host time before the first
        device task), ``iteration_interval_us`` (legacy MindSpore step interval),
        ``dataloader_us`` (host operators matching :data:`DATALOADER_PATTERN` in the step),
        ``free_us``, ``stall_us`` (the device's wait: preparing, or the legacy interval,
        where measured; else the data-loader operators' time, of which part may run while
        the device still finishes the previous step),
        ``stall_share`` (stall / (step + preparing): Ascend's preparing time lies before the
        device span that ``step_us`` measures) and ``stall``. Signals the source lacks
        stay NA.
    """
    cols = {"rank": "Int64", "step": "Int64", "step_us": "float64", "preparing_us": "float64",
            "iteration_interval_us": "float64", "dataloader_us": "float64",
            "free_us": "float64", "stall_us": "float64", "stall_share": "float64",
            "stall": "boolean"}
    s = step_breakdown(profile)
    if s.empty:
        return empty_frame(cols, "no step breakdown in this profile")
    out = s[["rank", "step", "step_us", "preparing_us", "free_us"]].copy()
    out["iteration_interval_us"] = s["iteration_interval_us"] if \
        "iteration_interval_us" in s.columns else np.nan
    ops = table(profile, "ops")
    if is_lazy(ops):  # only the loader operators leave the workers
        timed = any_values(ops, "dur_us")
        dl = collect(transform(ops, _loader_ops), _LOADER_COLUMNS) if timed \
            else None
    else:
        timed = not ops.empty and has_values(ops, "dur_us")
        dl = _loader_ops(ops) if timed else None
    if timed:
        per = dl.groupby(["rank", "step"])["dur_us"].sum().rename("dataloader_us")
        out = out.merge(per.reset_index(), on=["rank", "step"], how="left")
        out["dataloader_us"] = out["dataloader_us"].fillna(0.0)  # ops exist, none matched
    else:
        out["dataloader_us"] = np.nan
    # the device's own wait is what a faster loader wins back: the loader's host time can
    # overlap the previous step's device work (PyTorch 1.9 ResNet-50, num_workers=0: 69 ms
    # in the loader, 59 ms of device wait, means over its steps); the loader time stands in
    # where no wait is measured (a profile without device tasks)
    waited = out[["preparing_us", "iteration_interval_us"]].max(axis=1, skipna=True)
    out["stall_us"] = waited.fillna(out["dataloader_us"])
    wall = out["step_us"] + out["preparing_us"].fillna(0.0)
    out["stall_share"] = (out["stall_us"] / wall.where(wall > 0)).clip(upper=1.0)
    out["stall"] = (out["stall_share"] >= stall_share).where(out["stall_share"].notna())
    return typed(out, cols)


def host_bound(profile: Any, long_gap_us: float = 1000.0, launch_share: float = 0.2
               ) -> pd.DataFrame:
    """Host-bound launching: the device idles in many short gaps between kernels.

    Device busy time is the union of all tasks of a (rank, step); the gaps between busy
    segments are *launch gaps* when shorter than ``long_gap_us`` (the host did not enqueue
    the next kernel in time) and *long gaps* otherwise (data loading, a synchronisation,
    a barrier).

    Returns
    -------
    DataFrame
        ``rank``, ``step``, ``kernels``, ``span_us`` (first start to last end), ``busy_us``,
        ``idle_us``, ``gaps``, ``launch_gap_us``, ``long_gap_us``, ``median_kernel_us``,
        ``median_gap_us``, ``launch_gap_share`` (launch gaps / span), ``host_bound``
        (``launch_gap_share >= launch_share`` and the median gap at least as long as the
        median kernel: the device waits for launches longer than it computes; short
        turnaround gaps between long kernels are normal). Where the ``steps`` table says
        which steps' device tasks were recorded (``tasks_recorded``, see
        :mod:`perfkit.analysis.recorded`), only those steps: the gaps of the others are
        tasks the profiler did not record, not idle time (a note says which steps).
    """
    cols = {"rank": "Int64", "step": "Int64", "kernels": "int64", "span_us": "float64",
            "busy_us": "float64", "idle_us": "float64", "gaps": "int64",
            "launch_gap_us": "float64", "long_gap_us": "float64",
            "median_kernel_us": "float64", "median_gap_us": "float64",
            "launch_gap_share": "float64", "host_bound": "boolean"}
    if is_lazy(profile):  # gaps are per (rank, step): computed on each rank's worker
        return per_rank(profile, host_bound, long_gap_us, launch_share)[list(cols)] \
            .astype(cols)
    k = table(profile, "kernels")
    if k.empty or not has_values(k, "dur_us"):
        return empty_frame(cols, "the profile has no device tasks (kernels table)")
    keys = ["rank", "step"]
    dur = k["dur_us"].to_numpy(np.float64, na_value=np.nan)
    # each task's end (a negative duration as none), handed over to become the running
    # maximum of the ends in place: one new array of a million rows
    ends = np.clip(dur, 0.0, None)
    ends += k["start_us"].to_numpy(np.float64, na_value=np.nan)
    u = union_parts(k, keys, ends=ends)  # sorted by (rank, step, start), their segments
    if u is None:
        return empty_frame(cols, "the profile has no device tasks with a start and duration")
    # per (rank, step) group, on the sorted arrays: groups and segments are contiguous
    starts, at = u.first, u.at
    n = len(starts)
    seg_end = u.segment_ends()
    seg_start = u.start[at]
    # the group of each segment, and the gap after each segment but the last of its group
    seg_group = np.searchsorted(starts, at, side="right") - 1
    inside = np.r_[seg_group[1:] == seg_group[:-1], False]
    gap = (np.r_[seg_start[1:], np.nan] - seg_end)[inside]
    gap_group = seg_group[inside]
    short = gap < long_gap_us
    out = take_rows(k[keys], u.rows_at(starts)).reset_index(drop=True)
    out = out.assign(
        kernels=np.diff(np.r_[starts, len(u.start)]), first=u.start[starts],
        last=u.group_ends(),
        median_kernel_us=slice_median(dur if u.rows is None else dur[u.rows], starts),
        busy_us=np.bincount(seg_group, seg_end - seg_start, n),
        gaps=np.bincount(gap_group, minlength=n),
        launch_gap_us=np.bincount(gap_group, np.where(short, gap, 0.0), n),
        long_gap_us=np.bincount(gap_group, np.where(short, 0.0, gap), n),
        median_gap_us=group_median(gap, gap_group, n))
    out["span_us"] = out["last"] - out["first"]
    out["idle_us"] = out["span_us"] - out["busy_us"]
    out["launch_gap_share"] = out["launch_gap_us"] / out["span_us"].where(out["span_us"] > 0)
    out["host_bound"] = (out["launch_gap_share"] >= launch_share) & \
        (out["median_gap_us"] >= out["median_kernel_us"])
    steps = table(profile, "steps")
    if recorded_mask(steps) is None:
        return typed(out, cols)
    out = typed(_recorded_only(out, steps), cols).reset_index(drop=True)
    return add_note(out, f"gaps of the steps whose device tasks were recorded only: "
                         f"{recorded_text(steps)}")


def _recorded_only(frame: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` (``rank``, ``step``) of steps whose device tasks were recorded
    (:mod:`perfkit.analysis.recorded`); rows outside every step go too, as they are no
    step of the record."""
    skip = set(_pair_keys(unrecorded(steps)))
    keep = frame["step"].notna().to_numpy(bool) & \
        ~_pair_keys(frame).isin(skip).to_numpy(bool)
    return frame[keep]


def _pair_keys(frame: pd.DataFrame) -> pd.Series:
    """``"rank/step"`` of each row, as text (a missing rank or step as ``""``)."""
    return frame["rank"].astype("Int64").astype(TEXT).fillna("") + "/" + \
        frame["step"].astype("Int64").astype(TEXT).fillna("")
