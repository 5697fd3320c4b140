"""Timeline: the events of one step of one or a few ranks, as swimlanes a browser can draw.

Every profiler viewer (MindStudio Insight, TensorBoard's profiler, Perfetto, Nsight Systems)
starts from a timeline. :func:`timeline` picks one step (by default a representative one:
the median-duration step of the slowest rank), the ranks to show (by default the slowest
and the fastest), and returns one row per event, laid out in lanes:

- ``lanes="streams"``: one lane per device stream (tasks that have no stream, such as HCCL
  collectives in the Ascend text export, get a lane per core type), and for a profile
  without device tasks (a CPU-only PyTorch trace) one lane per host thread and nesting
  depth;
- ``lanes="categories"``: a *computing*, a *communication* and a *free* lane, the three
  parts of :func:`perfkit.analysis.step_breakdown` drawn in time (free is the time of the
  window when no task runs).

Events that overlap on a lane (concurrent send and receive, two compute streams in the
computing lane) are spread over numbered sub-lanes (``stream 2 · 2``), so no mark hides
another.

**The event cap.** A browser draws a few thousand SVG/canvas marks smoothly; a 16-rank
LLM step has tens of thousands of kernels. Above ``max_events`` rows, tiny events that
follow each other on a lane are merged into blocks (``"37 kernels"``) by
:func:`merge_tiny_events`: the smallest duration threshold that brings the frame under the
cap is searched; a block spans its first event's start to its last event's end, and its
``dur_us`` is the *sum* of its events' durations, so the time per lane is preserved
exactly and nothing is dropped. The default cap, :data:`DEFAULT_MAX_EVENTS`, comes from a
measurement in headless Chromium (``benchmarks/bench_timeline_render.py``; figures and
method in ``docs/timeline.md``).

:func:`timeline_window` and :func:`window_events` are the two halves :func:`timeline` is
built from; :func:`perfkit.export_trace` uses them to write the same window, uncapped, as
a Chrome trace for Perfetto.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InvalidArgumentError, PerfkitError
from ..format import counted, listed, plural, time_text
from ..io.categories import HOST_COMM_PATTERN
from ._frames import is_lazy
from ._util import has_values, table
from .steps import step_breakdown

__all__ = ["timeline", "timeline_window", "window_events", "merge_tiny_events",
           "short_label", "pack_sublanes", "TimelineWindow", "TimelineError",
           "TIMELINE_COLUMNS", "EVENT_COLUMNS", "DEFAULT_MAX_EVENTS", "DEFAULT_LABELS",
           "DEFAULT_HOST_DEPTH", "HOST_COMM_PATTERN", "LANE_MODES"]

DEFAULT_MAX_EVENTS = 5000
"""Most rows :func:`timeline` returns before merging tiny events (see docs/timeline.md).

Measured in headless Chromium (``benchmarks/bench_timeline_render.py``) on the chart of
:func:`perfkit.charts.timeline_chart`: at 5,000 rects one wheel-zoom step re-renders in
about 25 ms with the canvas renderer and 85-100 ms with the SVG renderer (about the 100 ms
within which a response feels immediate), against 85 ms and 250 ms at 20,000; first paint
stays under half a second. 5,000 is also the ceiling the dashboard sets for any chart.
"""

DEFAULT_LABELS = 5
"""Longest kernels, and longest collectives, labelled per rank by default."""

DEFAULT_HOST_DEPTH = 3
"""Nesting levels of host operators drawn by default (0 = outermost)."""

LANE_MODES = ("streams", "categories")

# HOST_COMM_PATTERN (host operators that are communication: PyTorch c10d, gloo/NCCL
# annotations, HCCL) is the rule the Kineto loader applies when it splits a CPU-only step
# into computing and communication, so that the lanes of a host-only timeline add up like
# its step table: one definition, in perfkit.io.categories.

EVENT_COLUMNS: dict[str, str] = {
    "rank": "Int64", "source": "string", "name": "string", "type": "string",
    "category": "string", "stream": "Int64", "core": "string", "thread": "Int64",
    "depth": "Int64", "start_us": "float64", "end_us": "float64", "dur_us": "float64",
}
"""Columns of :func:`window_events`: whole events on the profile's clock (not clipped)."""

TIMELINE_COLUMNS: dict[str, str] = {
    "rank": "Int64", "lane": "string", "track": "string", "track_order": "int64",
    "name": "string", "label": "string", "category": "string", "kind": "string",
    "start_us": "float64", "end_us": "float64", "dur_us": "float64", "n_events": "int64",
    "labelled": "bool", "clipped": "bool",
}
"""Columns of :func:`timeline`.

``rank`` and ``lane`` (``"stream 2"``, ``"no stream (HCCL)"``, ``"host thread 7"``,
``"computing"``, ``"communication"``, ``"free"``; `` · 2`` for a sub-lane); ``track``
(``"rank 0 · stream 2"``, what a chart puts on its y axis) and ``track_order`` (its rank
from the top); ``name`` (full) and ``label`` (short, for a text mark); ``category``
(``compute``, ``communication``, ``memory``, ``other`` for device tasks, ``host`` for a
host operator, ``free``, or ``mixed`` for a block of several); ``kind`` (``"event"``,
``"free"`` or ``"block"``); ``start_us`` / ``end_us`` relative to the window origin
(see :class:`TimelineWindow`), clipped to the window; ``dur_us`` the time the event ran
inside the window (for a block: the sum over its events, which can be less than
``end_us - start_us``); ``n_events`` (1, or the number of events a block stands for);
``labelled`` (among the longest kernels / collectives of its rank); ``clipped`` (the
event began before or ended after the window).
"""


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
        rank starts late) or the rank's own start (``align="rank"``).
    source : dict
        ``{rank: how the window was found}``: ``"device tasks"`` (first start to last end
        of the step's device tasks, the span :func:`~perfkit.analysis.step_breakdown`
        derives), ``"step table"`` (the profiler's step span, e.g. a Kineto
        ``ProfilerStep``), or ``"host ops"`` (first start to last end of the step's host
        operators).
    step_us : dict
        ``{rank: the step time of the step breakdown}`` (NaN when unknown).
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
    """The step whose time is nearest the median of ``s`` (earliest on a tie)."""
    med = float(s["step_us"].median())
    dist = (s["step_us"] - med).abs()
    return int(s.loc[dist.sort_values(kind="mergesort").index[0], "step"])


def timeline_window(profile: Any, step: int | None = None, ranks: Any = None,
                    align: str = "common") -> TimelineWindow:
    """Choose the step and ranks of a timeline and find each rank's time window.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    step : int, optional
        The step to show. Default: the median-duration step of the slowest rank (the step
        whose :func:`~perfkit.analysis.step_breakdown` ``step_us`` is nearest that rank's
        median; the earliest on a tie) — a typical step of the rank that sets the pace.
    ranks : int or list of int, optional
        Ranks to show. Default: the slowest and the fastest rank by median step time
        (one rank when the profile has one, or when all ranks are equally fast).
    align : {"common", "rank"}
        ``"common"``: every rank's times are measured from the earliest window start of
        the ranks shown, so a rank that starts the step late is drawn late (the clocks are
        the profile's, aligned across ranks by the loader). ``"rank"``: each rank from its
        own window start.

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
    bd = bd[["rank", "step", "step_us"]] if len(bd) else bd
    known = bd.dropna(subset=["step", "step_us"]) if len(bd) else bd
    known = known[known["step_us"] > 0] if len(known) else known
    if single and len(known):
        known = known.assign(rank=have[0] if have[0] is not None else pd.NA)

    slowest = fastest = None
    if len(known) and not single:
        med = known.groupby("rank")["step_us"].median()
        timed = len(med)
        slowest = int(med.sort_values(ascending=False, kind="mergesort").index[0])
        fastest = int(med.sort_values(kind="mergesort").index[0])
    reasons = []
    if wanted is None:
        if single:
            chosen = [have[0]]
        elif slowest is not None:
            chosen = [slowest] if slowest == fastest else [slowest, fastest]
            reasons.append(f"ranks: the slowest ({slowest}) and the fastest ({fastest}) by "
                           "median step time" if slowest != fastest else
                           f"rank {slowest}: the only rank" if len(have) == 1 else
                           f"rank {slowest}: the only rank with step times "
                           f"({counted(len(have) - 1, 'other rank')} without)"
                           if timed == 1 else
                           f"rank {slowest}: all ranks have the same median step time")
        else:
            chosen = have[:1]
            reasons.append(f"rank {chosen[0]}: the first (no step times to rank them)")
    else:
        chosen = [have[0]] if single else wanted
    if step is None:
        if len(known):
            pace = slowest if slowest is not None and wanted is None else chosen[0]
            mine = known[(known["rank"] == pace).fillna(False).to_numpy(bool)] \
                if pace is not None else known
            if mine.empty:
                mine = known
            step = _median_step(mine)
            reasons.insert(0, f"step {step}: the median-duration step of "
                           f"{'the slowest rank' if pace == slowest and not single else 'rank'}"
                           f" {pace} ({_fmt_us(float(mine['step_us'].median()))} median over "
                           f"{counted(len(mine), 'step')})")
        else:
            step = _first_step(profile, chosen)
            reasons.insert(0, "no step times: " + (f"step {step}, the first with events"
                                                   if step is not None else
                                                   "the whole trace is one window"))
    else:
        step = int(step)
        reasons.insert(0, f"step {step}: chosen by the caller")

    starts, ends, sources, step_us = {}, {}, {}, {}
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
        else:
            step_us[r] = math.nan
    chosen = [r for r in chosen if r in starts]
    first = min(starts.values())
    origin = {r: (first if align == "common" else starts[r]) for r in chosen}
    return TimelineWindow(step=step, ranks=tuple(chosen), start_us=starts, end_us=ends,
                          origin_us=origin, source=sources, step_us=step_us,
                          slowest_rank=slowest, fastest_rank=fastest,
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


# ----------------------------------------------------------------------------- events

def _depths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of each interval among those of one thread (sorted by start, -dur)."""
    depth = np.zeros(len(start), dtype=np.int64)
    stack: list[float] = []
    for i in range(len(start)):
        s = start[i]
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


def window_events(profile: Any, window: TimelineWindow, host: bool | str = "auto"
                  ) -> pd.DataFrame:
    """Every event that overlaps the window, whole (not clipped), on the profile's clock.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster
    window : TimelineWindow
        From :func:`timeline_window`.
    host : bool or "auto"
        Include host operators (``ops``). ``"auto"``: only for a rank without device tasks
        in the window (a CPU-only trace), where they are the whole timeline.

    Returns
    -------
    DataFrame
        :data:`EVENT_COLUMNS`, sorted by rank (in window order), source (device first),
        stream / thread, start. ``source`` is ``"device"`` or ``"host"``; ``depth`` is the
        nesting level of a host operator on its thread (0 = outermost; NA for device
        tasks). An event overlaps the window when it ends after the window starts and
        starts before it ends; an instantaneous event counts when it lies inside.
    """
    if host not in (True, False, "auto"):
        raise TimelineError("host", "must be True, False or 'auto'", host)
    parts = []
    for order, r in enumerate(window.ranks):
        tables = _rank_tables(profile, r)
        ws, we = window.start_us[r], window.end_us[r]
        dev = _overlapping(_timed(tables["kernels"]), ws, we)
        rows = []
        if len(dev):
            rows.append(pd.DataFrame({
                "source": "device", "name": _col(dev, "name"), "type": _col(dev, "type"),
                "category": _col(dev, "category").fillna("other"),
                "stream": _col(dev, "stream", "Int64"), "core": _col(dev, "core"),
                "thread": pd.array([pd.NA] * len(dev), dtype="Int64"),
                "depth": pd.array([pd.NA] * len(dev), dtype="Int64"),
                "start_us": dev["start_us"].to_numpy(float),
                "end_us": (dev["start_us"] + dev["dur_us"]).to_numpy(float),
                "dur_us": dev["dur_us"].to_numpy(float)}))
        if host is True or (host == "auto" and not len(dev)):
            # an operator's ancestors contain it, so they overlap the window too: the
            # nesting depth can be computed among the overlapping operators alone
            ops = _overlapping(_timed(tables["ops"]), ws, we)
            ops = ops.assign(_end=ops["start_us"] + ops["dur_us"])
            thread = _col(ops, "thread", "Int64")
            ops = ops.assign(_thread=thread.fillna(-1).to_numpy())
            ops = ops.sort_values(["_thread", "start_us", "dur_us"],
                                  ascending=[True, True, False], kind="mergesort")
            depth = np.zeros(len(ops), dtype=np.int64)
            th = ops["_thread"].to_numpy()
            st, en = ops["start_us"].to_numpy(float), ops["_end"].to_numpy(float)
            for t in np.unique(th):
                sel = th == t
                depth[sel] = _depths(st[sel], en[sel])
            ops = ops.assign(_depth=depth).reset_index(drop=True)
            if len(ops):
                name = _col(ops, "name")
                comm = name.str.contains(HOST_COMM_PATTERN, regex=True).fillna(False)
                rows.append(pd.DataFrame({
                    "source": "host", "name": name,
                    "type": pd.array([pd.NA] * len(ops), dtype="string"),
                    "category": np.where(comm.to_numpy(bool), "communication", "host"),
                    "stream": pd.array([pd.NA] * len(ops), dtype="Int64"),
                    "core": pd.array([pd.NA] * len(ops), dtype="string"),
                    "thread": _col(ops, "thread", "Int64"),
                    "depth": ops["_depth"].to_numpy(np.int64),
                    "start_us": ops["start_us"].to_numpy(float),
                    "end_us": ops["_end"].to_numpy(float),
                    "dur_us": ops["dur_us"].to_numpy(float)}))
        for f in rows:
            f.insert(0, "rank", pd.array([r if r is not None else pd.NA] * len(f),
                                         dtype="Int64"))
            f["_order"] = order
            parts.append(f)
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in EVENT_COLUMNS.items()})
    out = pd.concat(parts, ignore_index=True)
    out["_src"] = (out["source"] == "host").astype(int)
    out = out.sort_values(["_order", "_src", "stream", "core", "thread", "start_us"],
                          kind="mergesort", na_position="last")
    out = out.drop(columns=["_order", "_src"]).reset_index(drop=True)
    return out.astype(EVENT_COLUMNS)[list(EVENT_COLUMNS)]


def _col(frame: pd.DataFrame, name: str, dtype: str = "string") -> pd.Series:
    if name in frame.columns:
        return frame[name].astype(dtype).reset_index(drop=True)
    return pd.Series(pd.array([pd.NA] * len(frame), dtype=dtype))


def _overlapping(frame: pd.DataFrame, ws: float, we: float) -> pd.DataFrame:
    if frame.empty:
        return frame
    s = frame["start_us"].to_numpy(float)
    e = s + frame["dur_us"].to_numpy(float)
    hit = ((e > ws) & (s < we)) | ((e == s) & (s >= ws) & (s <= we))
    return frame[hit].reset_index(drop=True)


# ----------------------------------------------------------------------------- labels

_TEMPLATE = re.compile(r"<[^<>]*>")


def short_label(name: str, type_: str | None = None, max_len: int = 28) -> str:
    """A short label for an event name (for a text mark; the tooltip shows the whole name).

    The operator type is used when the name contains it and is not a C++ signature (Ascend:
    ``aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore`` →
    ``FlashAttentionScore``); a collective keeps its HCCL/NCCL kind
    (``hcom_allReduce__586_0_1`` → ``hcom_allReduce``); a C++ kernel loses its template
    arguments, parameters, return type and namespaces
    (``void at::native::elementwise_kernel<128, 4, ...>(int, ...)`` →
    ``elementwise_kernel``; ``(anonymous namespace)`` is no parameter list); a runtime
    task's own words stay (``Memcpy DtoD (Device -> Device)`` → ``Memcpy DtoD``). Longer
    results are cut to ``max_len`` characters with ``…``.
    """
    text = str(name).strip()
    t = str(type_).strip().rstrip("_") if type_ is not None and not pd.isna(type_) else ""
    cxx = any(ch in text for ch in "(<:")  # a C++ signature: its type is a generic category
    if t and not cxx and t in text and len(t) >= 3:
        text = t
    else:
        text = text.replace("(anonymous namespace)::", "")
        signature = "::" in text or "<" in text or text.startswith("void ")
        prev = None
        while prev != text:
            prev, text = text, _TEMPLATE.sub("", text)
        text = text.split("(", 1)[0].strip()
        if signature:  # a return type before the function's name
            text = text.split(" ")[-1] if " " in text else text
        text = text.rsplit("::", 1)[-1] or text
        text = re.sub(r"__\d+(?:_\d+)*$", "", text)
    text = text or str(name)
    return text if len(text) <= max_len else text[: max_len - 1] + "…"


# ----------------------------------------------------------------------------- lanes

def pack_sublanes(start: np.ndarray, end: np.ndarray, nested: bool = False,
                  tolerance_us: float = 0.0) -> np.ndarray:
    """Sub-lane of each interval so that intervals on one sub-lane never overlap.

    Parameters
    ----------
    start, end : numpy.ndarray
        Intervals of one lane, sorted by start (then longest first).
    nested : bool
        Allow an interval inside another on the same sub-lane (a call stack: what a Chrome
        trace thread can show); only partial overlaps are moved.
    tolerance_us : float
        Overlaps up to this length count as none (timestamps rounded by the profiler).

    Returns
    -------
    numpy.ndarray
        0 for the first sub-lane, 1 for the next, ...; first fit, in order.
    """
    lanes: list[list[float]] = []  # per sub-lane: stack of open ends (one end when disjoint)
    out = np.zeros(len(start), dtype=np.int64)
    for i in range(len(start)):
        s, e = start[i], end[i]
        for j, stack in enumerate(lanes):
            while stack and stack[-1] <= s + tolerance_us:
                stack.pop()
            if not stack or (nested and e <= stack[-1] + tolerance_us):
                stack.append(e)
                out[i] = j
                break
        else:
            lanes.append([e])
            out[i] = len(lanes) - 1
    return out


def _lane_keys(ev: pd.DataFrame, lanes: str, host_only: bool
               ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Lane name and sort key of each event row of one rank.

    ``host_only``: the rank has no device task in the window, so in ``"categories"`` mode
    its host operators make the computing and communication lanes.
    """
    names: list[str] = []
    keys: list[tuple[Any, ...]] = []
    for src, cat, stream, core, thread, depth in zip(
            ev["source"], ev["category"], ev["stream"], ev["core"], ev["thread"],
            ev["depth"], strict=True):
        if src == "host" and not (lanes == "categories" and host_only):
            t = "?" if pd.isna(thread) else int(thread)
            d = int(depth)
            names.append(f"host thread {t}" + (f" · depth {d}" if d else ""))
            keys.append((3, -1 if t == "?" else t, d))
        elif lanes == "categories":
            comm = cat == "communication"
            names.append("communication" if comm else "computing")
            keys.append((1 if comm else 0, 0, 0))
        elif pd.isna(stream):
            c = "?" if pd.isna(core) else str(core)
            names.append(f"no stream ({c})")
            keys.append((1, c, 0))
        else:
            names.append(f"stream {int(stream)}")
            keys.append((0, int(stream), 0))
    return names, keys


def _free_rows(busy_s: np.ndarray, busy_e: np.ndarray, ws: float, we: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """Gaps of [ws, we] not covered by any busy interval (already clipped to the window)."""
    if not len(busy_s):
        return np.array([ws]), np.array([we])
    order = np.argsort(busy_s, kind="mergesort")
    s, e = busy_s[order], busy_e[order]
    reach = np.maximum.accumulate(e)
    gap_s = np.concatenate([[ws], reach])
    gap_e = np.concatenate([s, [we]])
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


# ----------------------------------------------------------------------------- cap

def merge_tiny_events(frame: pd.DataFrame, max_events: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Merge runs of tiny events per track into blocks until at most ``max_events`` rows.

    Parameters
    ----------
    frame : DataFrame
        :data:`TIMELINE_COLUMNS` rows (``n_events`` 1), sorted by ``track_order`` then
        ``start_us``.
    max_events : int
        The cap.

    Returns
    -------
    (DataFrame, dict)
        The frame with runs replaced by blocks, and what was done: ``threshold_us`` (the
        duration threshold used, NaN when nothing was merged), ``blocks`` and
        ``merged_events`` (rows replaced by blocks), ``reached`` (False when even merging
        every unlabelled run could not reach the cap).

    Notes
    -----
    With a threshold ``t``, an event is *tiny* when ``dur_us <= t`` and it is not
    labelled; a tiny event joins the tiny event before it on the same track when they have
    the same category and the gap between them (this start minus the previous end) is at
    most ``t``. The number of rows falls as ``t`` grows, so the smallest sufficient ``t``
    among the durations and gaps is found by bisection. Should no ``t`` reach the cap,
    the search is repeated letting runs mix categories (``category`` ``"mixed"``).
    A block keeps ``start_us`` of its first event and the largest ``end_us``; its
    ``dur_us`` is the sum of its events' ``dur_us`` and ``n_events`` their number, so the
    sum of ``dur_us`` per track is unchanged.
    """
    info: dict[str, Any] = {"threshold_us": math.nan, "blocks": 0, "merged_events": 0,
                            "reached": True}
    n = len(frame)
    if n <= max_events:
        return frame, info
    tr = frame["track_order"].to_numpy()
    st = frame["start_us"].to_numpy(float)
    en = frame["end_us"].to_numpy(float)
    du = frame["dur_us"].to_numpy(float)
    cat = frame["category"].astype(str).to_numpy()
    free = frame["kind"].astype(str).to_numpy() != "event"
    protected = frame["labelled"].to_numpy(bool)
    same = np.zeros(n, dtype=bool)
    same[1:] = tr[1:] == tr[:-1]
    gap = np.full(n, np.inf)
    gap[1:] = st[1:] - en[:-1]
    gap = np.where(same, gap, np.inf)
    same_cat = np.zeros(n, dtype=bool)
    same_cat[1:] = cat[1:] == cat[:-1]
    same_kind = np.zeros(n, dtype=bool)
    same_kind[1:] = free[1:] == free[:-1]

    def joins(t: float, mix: bool) -> np.ndarray:
        tiny = (du <= t) & ~protected
        j = np.zeros(n, dtype=bool)
        j[1:] = tiny[1:] & tiny[:-1]
        j &= same & same_kind & (gap <= t)
        if not mix:
            j &= same_cat
        return j

    cands = np.unique(np.concatenate([du[~protected], gap[np.isfinite(gap)].clip(min=0)]))
    mix = False
    if n - int(joins(np.inf, False).sum()) > max_events:
        mix = True
        if n - int(joins(np.inf, True).sum()) > max_events:
            info["reached"] = False
            cands = np.array([np.inf])
    lo, hi = 0, len(cands) - 1
    while lo < hi:  # smallest candidate whose row count is within the cap
        mid = (lo + hi) // 2
        if n - int(joins(cands[mid], mix).sum()) <= max_events:
            hi = mid
        else:
            lo = mid + 1
    t = float(cands[lo])
    j = joins(t, mix)
    group = np.cumsum(~j) - 1
    g = frame.assign(_g=group)
    size = np.bincount(group)
    agg = g.groupby("_g", sort=True).agg(
        start_us=("start_us", "min"), end_us=("end_us", "max"), dur_us=("dur_us", "sum"),
        n_events=("n_events", "sum"), clipped=("clipped", "any"),
        _cats=("category", "nunique"))
    first = g.drop_duplicates("_g").set_index("_g")
    out = first.copy()
    for c in ("start_us", "end_us", "dur_us", "n_events", "clipped"):
        out[c] = agg[c]
    block = size > 1
    out.loc[block & (agg["_cats"].to_numpy() > 1), "category"] = "mixed"
    unit = np.where(first["kind"].to_numpy() == "free", "gaps",
                    np.where(first["category"].to_numpy() == "host", "host ops", "kernels"))
    names = [f"{k} {u}" for k, u in zip(agg["n_events"].to_numpy(), unit, strict=True)]
    out.loc[block, "name"] = np.asarray(names, dtype=object)[block]
    out.loc[block, "label"] = out.loc[block, "name"]
    out.loc[block & (first["kind"].to_numpy() == "event"), "kind"] = "block"
    out.loc[block & (first["kind"].to_numpy() == "free"), "kind"] = "block"
    info.update(threshold_us=t, blocks=int(block.sum()), merged_events=int(size[block].sum()))
    return out.reset_index(drop=True)[list(frame.columns)], info


# ----------------------------------------------------------------------------- timeline

def timeline(profile: Any, step: int | None = None, ranks: Any = None,
             lanes: str = "streams", max_events: int | None = DEFAULT_MAX_EVENTS,
             n_labels: int = DEFAULT_LABELS, host: bool | str = "auto",
             host_depth: int | None = DEFAULT_HOST_DEPTH, align: str = "common"
             ) -> pd.DataFrame:
    """The events of one step of one or a few ranks, one row per event, in lanes.

    Parameters
    ----------
    profile : Profile, Cluster or lazy cluster (``load(..., engine="dask")``)
    step : int, optional
        Step to show; default the median-duration step of the slowest rank
        (:func:`timeline_window`).
    ranks : int or list of int, optional
        Ranks to show; default the slowest and the fastest.
    lanes : {"streams", "categories"}
        One lane per device stream (host thread and depth for host operators), or the
        computing / communication / free lanes of the step breakdown.
    max_events : int or None
        Cap on the rows; above it tiny adjacent events are merged into blocks
        (:func:`merge_tiny_events`, time-preserving). None: no cap (every event).
    n_labels : int
        Per rank, the ``n_labels`` longest kernels and the ``n_labels`` longest collectives
        (host operators when the rank has no device task) get ``labelled = True``.
    host : bool or "auto"
        Draw host operators too (:func:`window_events`); ``"auto"``: only for ranks
        without device tasks.
    host_depth : int or None
        Host operators nested deeper than this many levels are left out (their time lies
        inside the operator that contains them, which is drawn); None: all levels.
    align : {"common", "rank"}
        Origin of the times (see :func:`timeline_window`).

    Returns
    -------
    DataFrame
        :data:`TIMELINE_COLUMNS`, sorted by ``track_order`` then ``start_us``. Times are
        µs relative to the window origin (``attrs["timeline"]["origin_us"]``), clipped to
        the rank's window. ``attrs["notes"]`` says which step and ranks and why, and
        whether events were merged; ``attrs["timeline"]`` holds the window
        (:meth:`TimelineWindow.to_dict`), ``lanes``, ``max_events``, ``events`` (events in
        the window before the cap), ``threshold_us``, ``blocks``, ``merged_events``,
        ``omitted_host_events`` (deeper than ``host_depth``).

    Notes
    -----
    In ``lanes="categories"`` a device task goes to *communication* when its category is
    communication and to *computing* otherwise (memory copies included), the rule of
    :func:`~perfkit.analysis.step_breakdown`; *free* holds the gaps of the window where no
    task (no host operator, for a host-only rank) runs, so for a window found from the
    device tasks the free lane adds up to the derived ``free_us`` of that step.
    On a host-only rank, *computing* holds the outermost non-communication host operators
    (less the time their thread spends inside a collective) and *communication* the
    communication ones (:data:`HOST_COMM_PATTERN`) at any depth.
    """
    if lanes not in LANE_MODES:
        raise TimelineError("lanes", f"must be one of {LANE_MODES}", lanes)
    if max_events is not None and (isinstance(max_events, bool)
                                   or not isinstance(max_events, (int, np.integer))
                                   or max_events < 10):
        raise TimelineError("max_events", "must be a whole number >= 10, or None",
                            max_events)
    if isinstance(n_labels, bool) or not isinstance(n_labels, (int, np.integer)) \
            or n_labels < 0:
        raise TimelineError("n_labels", "must be a whole number >= 0", n_labels)
    if host_depth is not None and (isinstance(host_depth, bool)
                                   or not isinstance(host_depth, (int, np.integer))
                                   or host_depth < 1):
        raise TimelineError("host_depth", "must be a whole number >= 1, or None", host_depth)
    window = timeline_window(profile, step=step, ranks=ranks, align=align)
    events = window_events(profile, window, host=host)
    notes = [window.reason]
    omitted = 0
    if host_depth is not None and len(events):
        deep = (events["depth"] >= host_depth).fillna(False).to_numpy(bool)
        if lanes == "categories":  # communication host ops stay at any depth
            deep &= (events["category"] != "communication").to_numpy(bool)
        omitted = int(deep.sum())
        events = events[~deep].reset_index(drop=True)
    if omitted:
        notes.append(f"{omitted} host operators nested deeper than {host_depth} levels are "
                     "not drawn (their time lies inside the operator that contains them)")
    if lanes == "categories" and len(events):
        # a host-only rank: computing = the outermost host ops, less the time their
        # thread spends inside a collective (the step table's rule)
        dev_ranks = set(events.loc[events["source"] == "device", "rank"].dropna())
        inner = ((events["source"] == "host") & (events["category"] == "host")
                 & (events["depth"] > 0) & ~events["rank"].isin(dev_ranks))
        events = events[~inner.fillna(False).to_numpy(bool)].reset_index(drop=True)
        events = _cut_by_own_collectives(events, dev_ranks)
    frame = _layout(events, window, lanes, n_labels)
    info: dict[str, Any] = {"threshold_us": math.nan, "blocks": 0, "merged_events": 0,
                            "reached": True}
    n_before = len(frame)
    if max_events is not None:
        frame, info = merge_tiny_events(frame, int(max_events))
    if info["blocks"]:
        notes.append(
            f"{n_before:,} events in the window exceed the cap of {max_events:,}: events of "
            f"{_fmt_us(info['threshold_us'])} or less that follow each other within that "
            f"time on a lane are merged into {info['blocks']:,} blocks standing for "
            f"{info['merged_events']:,} events; a block's duration is the sum of its "
            "events', so no time is dropped")
    if not info["reached"]:
        notes.append(f"the cap of {max_events:,} events could not be reached without merging "
                     "labelled events; the frame has more rows")
    frame.attrs["notes"] = notes
    frame.attrs["timeline"] = {
        **window.to_dict(), "lanes": lanes, "align": align, "max_events": max_events,
        "events": n_before, "threshold_us": info["threshold_us"], "blocks": info["blocks"],
        "merged_events": info["merged_events"], "omitted_host_events": omitted,
    }
    return frame


def _cut_by_own_collectives(events: pd.DataFrame, dev_ranks: set[Any]) -> pd.DataFrame:
    """Host computing bars of host-only ranks with their thread's collectives cut out.

    A thread inside ``c10d::allreduce_`` waits for the collective even when an enclosing
    operator (the backward pass) is open around it: that time is communication, as in
    the step table (:func:`perfkit.io.trace_tables.host_steps`). A bar cut in two keeps
    its name in both pieces.
    """
    host = (events["source"] == "host").to_numpy(bool) & \
        ~events["rank"].isin(dev_ranks).fillna(False).to_numpy(bool)
    comp = host & (events["category"] == "host").to_numpy(bool)
    comm = host & (events["category"] == "communication").to_numpy(bool)
    if not comp.any() or not comm.any():
        return events
    key = events["rank"].astype("string").fillna("") + "/" + \
        events["thread"].astype("string").fillna("")
    keys = key.to_numpy(dtype=object)
    start = events["start_us"].to_numpy(float)
    end = events["end_us"].to_numpy(float)
    cuts: dict[Any, list[tuple[float, float]]] = {}
    for k, a, b in zip(keys[comm], start[comm], end[comm], strict=True):
        cuts.setdefault(k, []).append((a, b))
    pieces: list[pd.DataFrame] = []
    cut_rows = np.zeros(len(events), dtype=bool)
    for i in np.flatnonzero(comp):
        spans = cuts.get(keys[i])
        if not spans:
            continue
        a, b = start[i], end[i]
        inside = sorted((max(x, a), min(y, b)) for x, y in spans if x < b and y > a)
        if not inside:
            continue
        cut_rows[i] = True
        left = a
        for x, y in inside:
            if x > left:
                pieces.append(events.iloc[[i]].assign(start_us=left, end_us=x, dur_us=x - left))
            left = max(left, y)
        if b > left:
            pieces.append(events.iloc[[i]].assign(start_us=left, end_us=b, dur_us=b - left))
    if not cut_rows.any():
        return events
    out = pd.concat([events[~cut_rows], *pieces], ignore_index=True)
    return out.astype(events.dtypes.to_dict()).sort_values(
        ["rank", "source", "thread", "start_us"], kind="mergesort").reset_index(drop=True)


def _layout(events: pd.DataFrame, window: TimelineWindow, lanes: str, n_labels: int
            ) -> pd.DataFrame:
    """Clip, shift, name lanes, add the free lane, pack sub-lanes and pick the labels."""
    rows = []
    for r in window.ranks:
        ev = events[(events["rank"] == r).fillna(False).to_numpy(bool)] \
            if r is not None else events[events["rank"].isna().to_numpy(bool)]
        ws, we, origin = window.start_us[r], window.end_us[r], window.origin_us[r]
        s = ev["start_us"].to_numpy(float).clip(ws, we)
        e = ev["end_us"].to_numpy(float).clip(ws, we)
        host_only = not (ev["source"] == "device").any()
        names, keys = _lane_keys(ev, lanes, host_only)
        part = pd.DataFrame({
            "rank": pd.array([r if r is not None else pd.NA] * len(ev), dtype="Int64"),
            "lane": names, "_key": keys, "name": ev["name"].to_numpy(object),
            "label": _labels_of(ev),
            "category": ev["category"].to_numpy(object), "kind": "event",
            "start_us": s, "end_us": e, "dur_us": e - s, "n_events": 1,
            "clipped": (ev["start_us"].to_numpy(float) < ws) | (ev["end_us"].to_numpy(float) > we),
            "_src": ev["source"].to_numpy(object),
        })
        part["labelled"] = _labels(part, n_labels)
        if lanes == "categories":
            busy = part[(part["_src"] == "device").to_numpy(bool)]
            if busy.empty:
                busy = part
            fs, fe = _free_rows(busy["start_us"].to_numpy(float),
                                busy["end_us"].to_numpy(float), ws, we)
            part = pd.concat([part, pd.DataFrame({
                "rank": pd.array([r if r is not None else pd.NA] * len(fs), dtype="Int64"),
                "lane": "free", "_key": [(2, 0, 0)] * len(fs), "name": "free",
                "label": "free", "category": "free", "kind": "free",
                "start_us": fs, "end_us": fe, "dur_us": fe - fs, "n_events": 1,
                "clipped": False, "_src": "free", "labelled": False})], ignore_index=True)
        part["start_us"] -= origin
        part["end_us"] -= origin
        rows.append(part)
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=[*TIMELINE_COLUMNS, "_key", "_src"])
    if frame.empty:
        return _typed(frame)
    # sub-lanes: events that overlap on a lane (host depths are already disjoint)
    frame = frame.sort_values(["start_us", "dur_us"], ascending=[True, False], kind="mergesort")
    sub = np.zeros(len(frame), dtype=np.int64)
    lane_id = frame["rank"].astype(str) + "\x00" + frame["lane"]
    for _, idx in frame.groupby(lane_id, sort=False).indices.items():
        sub[idx] = pack_sublanes(frame["start_us"].to_numpy(float)[idx],
                                 frame["end_us"].to_numpy(float)[idx], tolerance_us=1e-3)
    frame["lane"] = [ln if k == 0 else f"{ln} · {k + 1}"
                     for ln, k in zip(frame["lane"], sub, strict=True)]
    frame["_key"] = [(*key, k) for key, k in zip(frame["_key"], sub, strict=True)]
    rank_pos = {r: i for i, r in enumerate(window.ranks)}
    frame["_rk"] = [rank_pos.get(None if pd.isna(r) else int(r), 0) for r in frame["rank"]]
    tracks = frame[["_rk", "_key"]].drop_duplicates()
    tracks = sorted(map(tuple, tracks.itertuples(index=False, name=None)), key=_track_sort)
    order = {t: i for i, t in enumerate(tracks)}
    frame["track_order"] = [order[(a, b)] for a, b in zip(frame["_rk"], frame["_key"],
                                                          strict=True)]
    frame["track"] = [f"rank {'?' if pd.isna(r) else int(r)} · {ln}"
                      for r, ln in zip(frame["rank"], frame["lane"], strict=True)]
    frame = frame.sort_values(["track_order", "start_us", "dur_us"],
                              ascending=[True, True, False], kind="mergesort")
    return _typed(frame.reset_index(drop=True))


def _track_sort(t: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    rk, key = t
    return (rk, *[(0, v) if isinstance(v, (int, np.integer)) else (1, str(v)) for v in key])


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    for c in TIMELINE_COLUMNS:
        if c not in frame.columns:
            frame[c] = pd.Series(dtype=TIMELINE_COLUMNS[c])
    return frame[list(TIMELINE_COLUMNS)].astype(TIMELINE_COLUMNS)


def _labels_of(ev: pd.DataFrame) -> np.ndarray:
    """:func:`short_label` of every event, computed once per distinct (name, type)."""
    pairs = ev[["name", "type"]].astype(object).where(ev[["name", "type"]].notna(), None)
    key = list(zip(pairs["name"], pairs["type"], strict=True))
    done = {k: short_label(k[0], k[1]) for k in dict.fromkeys(key)}
    return np.array([done[k] for k in key], dtype=object)


def _labels(part: pd.DataFrame, n: int) -> np.ndarray:
    """The ``n`` longest compute and ``n`` longest communication events of one rank."""
    out = np.zeros(len(part), dtype=bool)
    if not n or part.empty:
        return out
    dev = (part["_src"] == "device").to_numpy(bool)
    pool = dev if dev.any() else np.ones(len(part), dtype=bool)
    comm = (part["category"] == "communication").to_numpy(bool)
    dur = part["dur_us"].to_numpy(float)
    for mask in (pool & ~comm, pool & comm):
        idx = np.flatnonzero(mask & (dur > 0))
        top = idx[np.argsort(-dur[idx], kind="mergesort")[:n]]
        out[top] = True
    return out
