"""The window of a timeline: which step and ranks, and each rank's time span.

:func:`timeline_window` chooses the step (by default the median-duration step of the
slowest rank) and the ranks (by default the slowest and the fastest) and finds each rank's
window from its device tasks, its step table or its host operators
(:class:`TimelineWindow`); :class:`TimelineError` says why a timeline cannot be drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..._stats import median
from ...errors import InvalidArgumentError, PerfkitError
from ...format import counted, listed, plural, share_text, time_text
from .._frames import any_values, is_lazy
from .._util import has_values, table
from ..recorded import recorded_mask, recorded_text
from ..steps import step_breakdown, step_wall_us
from .ranks_shown import default_ranks
from .waits import longest_other_wait

__all__ = ["timeline_window", "TimelineWindow", "TimelineError", "has_timed_events",
           "MIN_WAIT_SHARE"]

#: A wait before the step's first task is drawn (:attr:`TimelineWindow.wait_us`) when it is
#: at least this share of the step's time: a launch latency of a fraction of a millisecond
#: in a second-long step would be a lane with nothing to see. A shorter wait is said in the
#: caption instead (the data-loading finding, which points here, names it).
MIN_WAIT_SHARE = 0.01


class TimelineError(InvalidArgumentError):
    """A timeline cannot be drawn for this step or these ranks; the message says why."""


@dataclass(frozen=True)
class TimelineWindow:
    """The time window of one step on a few ranks, on the profile's clock.

    Attributes
    ----------
    step : int or None
        The step shown (None: the profile has no step numbers; the window is the whole
        trace of each rank).
    ranks : tuple
        The ranks shown, in drawing order (a rank may be None for a single profile whose
        rank is not recorded).
    start_us, end_us : dict
        ``{rank: microseconds}``: each rank's window on the profile's clock.
    origin_us : dict
        ``{rank: microseconds}`` subtracted from that rank's times in :func:`timeline`: the
        earliest window start of all ranks (``align="common"``: ranks stay aligned, a late
        rank starts late) or the rank's own start (``align="rank"``), each window start
        taken back by its :attr:`wait_us`.
    source : dict
        ``{rank: how the window was found}``: ``"device tasks"`` (first start to last end
        of the step's device tasks, the span :func:`~perfkit.analysis.step_breakdown`
        derives), ``"step table"`` (the profiler's step span, e.g. a Kineto
        ``ProfilerStep``), or ``"host ops"`` (first start to last end of the step's host
        operators).
    step_us : dict
        ``{rank: the step time}``: the step breakdown's device span and the wait before
        it (:func:`~perfkit.analysis.step_wall_us`, the step time the Overview shows; NaN
        when unknown).
    wait_us : dict
        ``{rank: µs}``: the device's wait before the step's first task (``preparing_us``
        of the step breakdown: data, launch) where the window was found from the device
        tasks and the wait is at least :data:`MIN_WAIT_SHARE` of the step's time. It lies
        just before the window, which stays the device span; the origin leaves room for
        it, and :func:`timeline` draws it on a lane of its own.
    slowest_rank, fastest_rank : int or None
        By median step time over the steps (None with one rank).
    reason : str
        Why this step and these ranks, in words.
    """

    step: int | None
    ranks: tuple[Any, ...]
    start_us: dict[Any, float]
    end_us: dict[Any, float]
    origin_us: dict[Any, float]
    source: dict[Any, str]
    step_us: dict[Any, float] = field(default_factory=dict)
    wait_us: dict[Any, float] = field(default_factory=dict)
    slowest_rank: Any = None
    fastest_rank: Any = None
    reason: str = ""

    def duration_us(self, rank: Any) -> float:
        """Length of ``rank``'s window in µs."""
        return self.end_us[rank] - self.start_us[rank]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (ranks as given, NA rank as None)."""
        return {"step": self.step, "ranks": list(self.ranks),
                "start_us": {str(r): v for r, v in self.start_us.items()},
                "end_us": {str(r): v for r, v in self.end_us.items()},
                "origin_us": {str(r): v for r, v in self.origin_us.items()},
                "source": {str(r): v for r, v in self.source.items()},
                "step_us": {str(r): v for r, v in self.step_us.items()},
                "wait_us": {str(r): v for r, v in self.wait_us.items()},
                "slowest_rank": self.slowest_rank, "fastest_rank": self.fastest_rank,
                "reason": self.reason}


# ----------------------------------------------------------------------------- tables

def _is_cluster(profile: Any) -> bool:
    return hasattr(profile, "profiles")


def _profile_ranks(profile: Any) -> list[Any]:
    if _is_cluster(profile):
        return list(profile.ranks)
    return [profile.meta.rank]


def _rank_tables(profile: Any, rank: Any) -> dict[str, pd.DataFrame]:
    """``kernels``, ``ops`` and ``steps`` of one rank as pandas frames, on the profile's clock.

    A lazy cluster hands over that rank alone (``rank_view``: one cache entry read, on the
    cluster's clock); an eager cluster's tables are filtered by rank.
    """
    if is_lazy(profile):
        view = getattr(profile, "rank_view", None)
        if view is None:
            raise PerfkitError("timeline: this lazy cluster cannot hand over one rank's "
                               "tables; load it with engine=\"local\"")
        source: Any = view(rank)
        return {n: table(source, n) for n in ("kernels", "ops", "steps")}
    out = {}
    for name in ("kernels", "ops", "steps"):
        frame = table(profile, name)
        if _is_cluster(profile) and len(frame) and "rank" in frame.columns:
            frame = frame[(frame["rank"] == rank).fillna(False).to_numpy(bool)]
        out[name] = frame
    return out


def _timed(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with a start and a non-negative duration."""
    if frame.empty or not {"start_us", "dur_us"} <= set(frame.columns):
        return frame.iloc[0:0]
    ok = frame["start_us"].notna() & frame["dur_us"].notna() & (frame["dur_us"] >= 0)
    return frame[ok.to_numpy(bool)]


def _of_step(frame: pd.DataFrame, step: int | None) -> pd.DataFrame:
    if step is None or "step" not in frame.columns:
        return frame
    return frame[(frame["step"] == step).fillna(False).to_numpy(bool)]


def _span(frame: pd.DataFrame) -> tuple[float, float] | None:
    if frame.empty:
        return None
    start = float(frame["start_us"].min())
    end = float((frame["start_us"] + frame["dur_us"]).max())
    return (start, end) if math.isfinite(start) and math.isfinite(end) else None


def _rank_window(tables: dict[str, pd.DataFrame], step: int | None
                 ) -> tuple[float, float, str] | None:
    """The window of ``step`` on one rank: device span, else step table span, else host."""
    span = _span(_of_step(_timed(tables["kernels"]), step))
    if span is not None:
        return (*span, "device tasks")
    steps = _of_step(tables["steps"], step)
    if (step is not None and has_values(steps, "step_start_us")
            and has_values(steps, "total_us")):
        row = steps.dropna(subset=["step_start_us", "total_us"]).iloc[0]
        start, total = float(row["step_start_us"]), float(row["total_us"])
        if math.isfinite(start) and math.isfinite(total) and total >= 0:
            return start, start + total, "step table"
    span = _span(_of_step(_timed(tables["ops"]), step))
    if span is not None:
        return (*span, "host ops")
    return None


def has_timed_events(profile: Any) -> bool:
    """Whether some rank of ``profile`` has what a timeline draws: a device task or a host
    operator with its start and duration.

    A summary-only export has none: msprof-analyze's ``cluster_analysis_output`` holds
    per-rank step totals and per-collective figures, not the events themselves, and
    :func:`timeline_window` refuses it with a :class:`TimelineError`. A view asks this
    first to explain why there is no timeline instead of showing that error.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster

    Returns
    -------
    bool
    """
    for name in ("kernels", "ops"):
        frame = table(profile, name)
        if is_lazy(frame):
            if any_values(frame, "start_us") and any_values(frame, "dur_us"):
                return True
        elif len(_timed(frame)):
            return True
    return False


# ----------------------------------------------------------------------------- window

def _as_rank_list(ranks: Any) -> list[Any] | None:
    if ranks is None:
        return None
    if isinstance(ranks, (int, np.integer)):
        return [int(ranks)]
    if isinstance(ranks, str) or not isinstance(ranks, Iterable):
        raise TimelineError("ranks", "must be a rank number or a list of them", ranks)
    out = []
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
            raise TimelineError("ranks", "must be a rank number or a list of them", ranks)
        if int(r) not in out:
            out.append(int(r))
    if not out:
        raise TimelineError("ranks", "is empty; give at least one rank", ranks)
    return out


def _fmt_us(us: float) -> str:
    if not math.isfinite(us):
        return "n/a"
    return time_text(us)


def _median_step(s: pd.DataFrame) -> int:
    """The step whose time is nearest the median of ``s`` (earliest on a tie).

    With an even number of steps the median lies halfway between the two middle steps, so
    they tie: a difference in the last bits of the floats (1e-9 of the median) is no
    reason to prefer the later one.
    """
    med = median(s["step_us"])
    dist = (s["step_us"] - med).abs()
    near = dist <= float(dist.min()) + 1e-9 * abs(med)
    return int(s.loc[near.to_numpy(bool), "step"].min())


def _median_words(s: pd.DataFrame, step: int, whose: str, among: str) -> str:
    """Why ``step`` is drawn, with its own time beside the median it was chosen by.

    ``step`` is :func:`_median_step` of ``s`` (one rank's steps: ``step``, ``step_us``);
    its own time is its row's ``step_us``, which differs from the median of an even
    number of steps (the median lies halfway between the two middle ones: of
    ``gpu/hta-trace_filter``'s 2 steps, step 551 took 608 ms, their median is 619 ms).
    Each clause has one basis: the step's time, then the median over the steps.
    """
    own = _fmt_us(float(s.loc[(s["step"] == step).to_numpy(bool), "step_us"].iloc[0]))
    if len(s) == 1:
        return f"step {step}: the only step of {whose}{among}, {own} long"
    med = _fmt_us(median(s["step_us"]))
    over = f"the median over its {counted(len(s), 'step')}{among}"
    if own == med:
        return f"step {step}: the median-duration step of {whose}, {own} long, {over}"
    return f"step {step}: the median-duration step of {whose}, {own} long; {over} is {med}"


def timeline_window(profile: Any, step: int | None = None, ranks: Any = None,
                    align: str = "common", parallel: Any = None) -> TimelineWindow:
    """Choose the step and ranks of a timeline and find each rank's time window.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    step : int, optional
        The step to show. Default: the median-duration step of the slowest rank (the step
        whose :func:`~perfkit.analysis.step_breakdown` ``step_us`` is nearest that rank's
        median; the earliest on a tie) — a typical step of the rank that sets the pace —
        among the steps whose device tasks were recorded where the profile says
        (``steps.tasks_recorded``, :mod:`perfkit.analysis.recorded`; ``reason`` then says
        which, or that none was).
    ranks : int or list of int, optional
        Ranks to show. Default: the slowest and the fastest rank, the slowest being the
        one every tab names (:func:`perfkit.analysis.slowest_rank`) where there is one,
        else by median step time (one rank when the profile has one, or when all ranks
        are equally fast).
    align : {"common", "rank"}
        ``"common"``: every rank's times are measured from the earliest window start of
        the ranks shown, so a rank that starts the step late is drawn late (the clocks are
        the profile's, aligned across ranks by the loader). ``"rank"``: each rank from its
        own window start.
    parallel : ParallelConfig, optional
        The job's layout: with pipeline stages, the slowest rank is named among its own
        stage's ranks, as the findings and the tabs name it.

    Returns
    -------
    TimelineWindow

    Raises
    ------
    TimelineError
        A rank or step that the profile does not have (the message lists those it has),
        or no timed event at all.
    """
    if align not in ("common", "rank"):
        raise TimelineError("align", "must be 'common' or 'rank'", align)
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, np.integer))):
        raise TimelineError("step", "must be a step number (int) or None", step)
    have = _profile_ranks(profile)
    wanted = _as_rank_list(ranks)
    single = not _is_cluster(profile)
    if wanted is not None and not single:
        missing = [r for r in wanted if r not in have]
        if missing:
            raise TimelineError("ranks", f"{plural(len(missing), 'rank')} {listed(missing)} "
                                f"{plural(len(missing), 'is', 'are')} not in this profile "
                                f"(ranks: {have})", ranks)
    if single and wanted is not None and have[0] is not None and wanted != [have[0]]:
        raise TimelineError("ranks", f"this profile holds rank {have[0]} only", ranks)

    bd = step_breakdown(profile)
    recorded = recorded_text(bd) if len(bd) else None  # None: every step's tasks recorded
    if len(bd):  # the step time is the wall (the device span and the wait before it)
        wait = bd["preparing_us"].astype("float64") if "preparing_us" in bd.columns \
            else pd.Series(np.nan, index=bd.index)
        interval = bd["iteration_interval_us"].astype("float64") \
            if "iteration_interval_us" in bd.columns else pd.Series(np.nan, index=bd.index)
        mask = recorded_mask(bd)
        bd = pd.DataFrame({"rank": bd["rank"], "step": bd["step"],
                           "step_us": step_wall_us(bd), "wait_us": wait,
                           "interval_us": interval,
                           "recorded": True if mask is None else mask.to_numpy(bool)})
    known = bd.dropna(subset=["step", "step_us"]) if len(bd) else bd
    known = known[known["step_us"] > 0] if len(known) else known
    if single and len(known):
        known = known.assign(rank=have[0] if have[0] is not None else pd.NA)

    # a cluster of one rank, as a Profile: its rank is neither the slowest nor the fastest
    alone = not single and len(have) == 1
    chosen, slowest, fastest, reasons = default_ranks(profile, have, known, wanted, single,
                                                      parallel)
    if step is None:
        if len(known):
            pace = slowest if slowest is not None and wanted is None else chosen[0]
            mine = known[(known["rank"] == pace).fillna(False).to_numpy(bool)] \
                if pace is not None else known
            if mine.empty:
                mine = known
            slowest_one = pace == slowest and not (single or alone)
            whose = f"{'the slowest rank' if slowest_one else 'rank'} {pace}"
            full = mine[mine["recorded"].to_numpy(bool)]
            if recorded is None or len(full):
                # a step whose device tasks were not recorded shows no device time
                among = "" if recorded is None else " whose device tasks were recorded"
                step = _median_step(full)
                reasons.insert(0, _median_words(full, step, whose, among)
                               + (f"; {recorded}" if recorded else ""))
            else:
                step = _median_step(mine)
                reasons.insert(0, _median_words(mine, step, whose, "")
                               + f"; {recorded}, so no step of "
                               f"{whose} has all its device tasks drawn")
        else:
            step = _first_step(profile, chosen)
            # a profile with step times but no step numbers (a trace without step marks,
            # one span: the Overview's step time) has no step to pick, not no step time
            unmarked = len(bd) and not bd["step"].notna().any() \
                and bd["step_us"].notna().any()
            reasons.insert(0, ("no step marks in the profile: " if unmarked else
                               "no step times: ")
                           + (f"step {step}, the first with events" if step is not None
                              else "the whole trace is one window"))
    else:
        step = int(step)
        reasons.insert(0, f"step {step}: chosen by the caller")
        missed = known[(known["step"] == step).fillna(False).to_numpy(bool)
                       & ~known["recorded"].to_numpy(bool)] if recorded else known.iloc[0:0]
        if len(missed):  # its gaps are tasks not recorded, not the device idling
            reasons.insert(1, f"its device tasks were not recorded in full ({recorded}), "
                              "so the gaps drawn are not idle time")

    starts, ends, sources, step_us, wait_us = {}, {}, {}, {}, {}
    short_us: dict[Any, float] = {}
    inner_us: dict[Any, float] = {}  # a legacy step trace's interval, inside the step
    none_in: dict[Any, tuple[float, Any, bool]] = {}  # no wait here; others' longest
    for r in chosen:
        tables = _rank_tables(profile, r)
        win = _rank_window(tables, step)
        if win is None:
            with_events = _steps_with_events(tables)
            if wanted is None and r != chosen[0]:  # a default rank: leave it out, say so
                reasons.append(f"rank {r} left out: it has no timed event in step {step}")
                continue
            if not with_events and not len(_timed(tables["kernels"])) \
                    and not len(_timed(tables["ops"])):
                where = getattr(profile.meta, "path", "") or "the profile"
                raise TimelineError(
                    "profile", f"{where}: rank {r} has no device task or host operator "
                    f"with a time (a {profile.meta.source_format} profile may hold summaries "
                    "only); a timeline needs the ranks' own profiler output", r)
            raise TimelineError("step", f"rank {r} has no timed event in step {step} "
                                f"(steps with events on rank {r}: {with_events or 'none'})",
                                step)
        starts[r], ends[r], sources[r] = win
        if len(known):
            hit = known[(known["step"] == step).fillna(False).to_numpy(bool)]
            if not single:
                hit = hit[(hit["rank"] == r).fillna(False).to_numpy(bool)]
            step_us[r] = float(hit["step_us"].iloc[0]) if len(hit) else math.nan
            wait = float(hit["wait_us"].iloc[0]) if len(hit) else math.nan
            interval = float(hit["interval_us"].iloc[0]) if len(hit) else math.nan
            if sources[r] == "device tasks" and wait > 0:
                if wait >= MIN_WAIT_SHARE * step_us[r]:  # drawn before the first task
                    wait_us[r] = wait
                else:  # too short to see: said, as the data-loading finding names it
                    short_us[r] = wait
            elif sources[r] == "device tasks" and math.isnan(wait) and interval > 0:
                inner_us[r] = interval
            elif sources[r] == "device tasks":
                other = longest_other_wait(known, r, step, single)
                if other is not None:
                    none_in[r] = other
        else:
            step_us[r] = math.nan
    if wait_us:
        waits = [_fmt_us(w) if len(chosen) == 1 else f"{_fmt_us(w)} on rank {r}"
                 for r, w in wait_us.items()]
        reasons.append("drawn before the step's first device task, the device's wait for "
                       f"it (data, launch): {listed(waits)}")
    if short_us:
        waits = [_fmt_us(w) if len(chosen) == 1 else f"{_fmt_us(w)} on rank {r}"
                 for r, w in short_us.items()]
        reasons.append(f"not drawn (under {share_text(MIN_WAIT_SHARE, 0)} of the step): the "
                       "device's wait before the step's first device task (data, launch), "
                       f"{listed(waits)}")
    if inner_us:
        waits = [_fmt_us(w) if len(chosen) == 1 else f"{_fmt_us(w)} on rank {r}"
                 for r, w in inner_us.items()]
        reasons.append("not drawn: the step trace's wait between steps, "
                       f"{listed(waits)} (its step interval, from the previous step's end to "
                       "the forward pass's start, which the step time counts; not a gap "
                       "before the step's first device task, as that task may start inside "
                       "it)")
    for r, (longest, at, seen) in none_in.items():
        who = "" if len(chosen) == 1 else f" on rank {r}"
        reasons.append(f"no wait before the step's first device task in step {step}{who}; "
                       f"other steps wait up to {_fmt_us(longest)} before theirs (step {at}"
                       + (": pick it to see its wait)" if seen else
                          "), not drawn: the device tasks of that step were not recorded"))
    chosen = [r for r in chosen if r in starts]
    begins = {r: starts[r] - wait_us.get(r, 0.0) for r in chosen}  # room for the waits
    first = min(begins.values())
    origin = {r: (first if align == "common" else begins[r]) for r in chosen}
    return TimelineWindow(step=step, ranks=tuple(chosen), start_us=starts, end_us=ends,
                          origin_us=origin, source=sources, step_us=step_us, wait_us=wait_us,
                          slowest_rank=None if alone else slowest,
                          fastest_rank=None if alone else fastest,
                          reason="; ".join(reasons))


def _steps_with_events(tables: dict[str, pd.DataFrame]) -> list[int]:
    steps: set[int] = set()
    for name in ("kernels", "ops"):
        f = tables[name]
        if "step" in f.columns:
            steps |= {int(s) for s in f["step"].dropna().unique()}
    return sorted(steps)


def _first_step(profile: Any, ranks: Sequence[Any]) -> int | None:
    steps = _steps_with_events(_rank_tables(profile, ranks[0]))
    return steps[0] if steps else None
