"""Step breakdown: where the time of each training step went, per rank.

The seeds start every diagnosis here. A step of one device splits into three parts that
add up to the step time:

- ``computing`` — the device executes computation (any non-communication task);
- ``comm_not_overlapped`` — the device only communicates (nothing computes meanwhile);
- ``free`` — the device runs nothing (waiting for the host, for data, for a barrier).

Three more quantities are reported next to them but are *not* added to the step time:
``overlapped`` (communication hidden under computation) and ``bubble`` (pipeline receive
wait, a part of ``comm_not_overlapped``) are contained in the parts above; ``preparing``
(time from the framework's step start to the first device task, host launch latency) lies
before the device span that the parts cover: on the Ascend samples Computing +
Communication(Not Overlapped) + Free equals the span from the step's first device task to
its last, and Preparing comes on top: the data-loading analysis, the advisor and the
measured step time (:func:`measured_step_s`) add it to the step's wall time.

When the profile ships a step table (Ascend ``step_trace_time.csv``, the DB, msprof-analyze,
legacy MindSpore) the profiler's numbers are used. Otherwise — or with
``derive="always"`` — the parts are derived from the device tasks with a priority rule:
every instant of the step window (first task start to last task end) is attributed to
*computing* if any compute task runs, else to *communication* if a communication task
runs, else to *free*. The three parts then sum to the window exactly.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from .._text_dtype import TEXT
from ..errors import InvalidArgumentError
from ..format import counted
from ._frames import is_lazy, is_lazy_frame, per_rank, table_columns
from ._intervals import interval_union
from ._shared import shared
from ._util import add_note, empty_frame, has_values, table
from .recorded import withhold_fragments

__all__ = ["step_breakdown", "derive_steps", "measured_step_s", "step_basis", "step_owner",
           "step_wall_us",
           "exposed_comm_us", "has_wait", "inferred_steps", "STEP_COLUMNS", "PART_COLUMNS",
           "RECEIVE_PATTERN", "STEP_MARK"]

#: Parts whose sum is the step time.
PART_COLUMNS = ("computing_us", "comm_not_overlapped_us", "free_us")

#: Columns of :func:`step_breakdown`.
STEP_COLUMNS: dict[str, str | pd.StringDtype] = {
    "rank": "Int64", "step": "Int64", "step_us": "float64",
    "computing_us": "float64", "comm_not_overlapped_us": "float64",
    "overlapped_us": "float64", "communication_us": "float64", "free_us": "float64",
    "bubble_us": "float64", "preparing_us": "float64", "stage_us": "float64",
    "computing_share": "float64", "comm_not_overlapped_share": "float64",
    "overlapped_share": "float64", "free_share": "float64", "bubble_share": "float64",
    "preparing_share": "float64", "source": TEXT,
}

#: Optional ``steps`` column of steps a reader inferred: the annotation that ends each step
#: (``Optimizer.step#SGD.step`` for a Kineto trace without ``ProfilerStep``,
#: :mod:`perfkit.io.kineto.iterations`); absent where the profiler marked its steps.
STEP_MARK = "step_mark"

#: Names of pipeline-parallel receive operators (their time is the bubble).
RECEIVE_PATTERN = r"(?i)(?:hcom_receive|^receive(?:[-_]op|$)|\breceive-op)"

_DERIVE = ("auto", "always", "never")


def _shares(out: pd.DataFrame) -> pd.DataFrame:
    step = out["step_us"].where(out["step_us"] > 0)
    for col in ("bubble_us", "preparing_us", "overlapped_us"):
        if col not in out.columns:
            out[col] = np.nan
    for part in ("computing", "comm_not_overlapped", "overlapped", "free", "bubble",
                 "preparing"):
        out[f"{part}_share"] = out[f"{part}_us"] / step
    return out


def _finish(out: pd.DataFrame) -> pd.DataFrame:
    for col, dtype in STEP_COLUMNS.items():
        if col not in out.columns:
            out[col] = pd.Series(np.nan if dtype == "float64" else pd.NA, index=out.index,
                                 dtype=dtype)
        else:
            out[col] = out[col].astype(dtype)
    extra = [c for c in out.columns if c not in STEP_COLUMNS]
    out = out[[*STEP_COLUMNS, *extra]]
    return out.sort_values(["rank", "step"], kind="mergesort").reset_index(drop=True)


def derive_steps(kernels: pd.DataFrame, ops: pd.DataFrame | None = None) -> pd.DataFrame:
    """Derive the step breakdown from device tasks with the priority rule.

    Parameters
    ----------
    kernels : DataFrame
        Canonical ``kernels`` table (``rank``, ``step``, ``category``, ``start_us``,
        ``dur_us``, ``name``). Rows without a step are grouped under step NA.
    ops : DataFrame, optional
        Canonical ``ops`` table; when given, ``preparing_us`` is the first device task
        start minus the first host operator start of the step (clipped at 0).

    Returns
    -------
    DataFrame
        Columns of :data:`STEP_COLUMNS`; ``source`` is ``"derived"``. ``bubble_us`` is the
        union of receive tasks (:data:`RECEIVE_PATTERN`) when the profile has any receive
        task, else NA (a GPU ``SendRecv`` kernel cannot be split into send and receive).
    """
    cols = ["rank", "step", "category", "start_us", "dur_us", "name"]
    k = kernels[[c for c in cols if c in kernels.columns]].dropna(subset=["start_us", "dur_us"])
    if k.empty:
        return _finish(pd.DataFrame(columns=list(STEP_COLUMNS)))
    k = k.assign(end_us=k["start_us"] + k["dur_us"].clip(lower=0))
    keys = ["rank", "step"]
    comm = k["category"].eq("communication").fillna(False).to_numpy(bool)
    span = k.groupby(keys, dropna=False).agg(first_us=("start_us", "min"),
                                             last_us=("end_us", "max"))
    span["step_us"] = span["last_us"] - span["first_us"]
    busy = interval_union(k, keys).groupby(keys, dropna=False)["length_us"].sum()
    comp = interval_union(k[~comm], keys).groupby(keys, dropna=False)["length_us"].sum()
    com = interval_union(k[comm], keys).groupby(keys, dropna=False)["length_us"].sum()
    out = span.join(busy.rename("busy_us")).join(comp.rename("computing_us"))
    out = out.join(com.rename("communication_us"))
    out[["busy_us", "computing_us", "communication_us"]] = \
        out[["busy_us", "computing_us", "communication_us"]].fillna(0.0)
    out["comm_not_overlapped_us"] = (out["busy_us"] - out["computing_us"]).clip(lower=0)
    out["overlapped_us"] = (out["communication_us"] - out["comm_not_overlapped_us"]).clip(lower=0)
    out["free_us"] = (out["step_us"] - out["busy_us"]).clip(lower=0)
    recv = k["name"].astype(TEXT).str.contains(RECEIVE_PATTERN, regex=True).fillna(False)
    recv = recv.to_numpy(bool) & comm
    if recv.any():
        bub = interval_union(k[recv], keys).groupby(keys, dropna=False)["length_us"].sum()
        out = out.join(bub.rename("bubble_us"))
        out["bubble_us"] = out["bubble_us"].fillna(0.0)
        out["stage_us"] = out["step_us"] - out["bubble_us"]
    if ops is not None and not ops.empty and has_values(ops, "start_us"):
        host_start = ops.groupby(keys, dropna=False)["start_us"].min().rename("host_start_us")
        out = out.join(host_start)
        out["preparing_us"] = _device_wait(out)
    out = out.reset_index()
    out["source"] = "derived"
    out = _shares(out)
    return _finish(out.drop(columns=["first_us", "last_us", "busy_us", "host_start_us"],
                            errors="ignore"))


def _device_wait(windows: pd.DataFrame) -> pd.Series:
    """Each (rank, step) window's wait before its first device task: from the step's first
    host operator, or from the end of the rank's earlier windows when that is later (the
    device still running the previous step is not waiting), clipped at 0; NaN without a
    host start. No device time is then counted in two steps, as in a Kineto trace's
    (:func:`perfkit.io.chrome.tables.device_wait_us`)."""
    order = windows.sort_values("first_us", kind="mergesort")
    rank = order.index.get_level_values("rank")
    before = order["last_us"].groupby(rank, dropna=False).cummax().groupby(
        rank, dropna=False).shift(1)
    start = np.fmax(order["host_start_us"].to_numpy(np.float64),
                    before.to_numpy(np.float64))  # fmax: a missing one is ignored
    start[order["host_start_us"].isna().to_numpy()] = np.nan
    wait = pd.Series(order["first_us"].to_numpy(np.float64) - start, index=order.index)
    return wait.clip(lower=0).reindex(windows.index)


def _from_profiler(steps: pd.DataFrame) -> pd.DataFrame:
    out = steps.copy()
    parts = out[list(PART_COLUMNS)]
    step = parts.sum(axis=1, min_count=len(PART_COLUMNS)).where(parts.notna().all(axis=1))
    if "total_us" in out.columns:  # legacy step trace: the step's own total
        step = step.fillna(out["total_us"])
    step = step.fillna(out["stage_us"] + out["bubble_us"])
    out["step_us"] = step
    if not has_values(out, "overlapped_us"):
        out["overlapped_us"] = out["communication_us"] - out["comm_not_overlapped_us"]
    out["source"] = "profiler"
    return _finish(_shares(out))


def step_breakdown(profile: Any, derive: str = "auto") -> pd.DataFrame:
    """Per rank and step: computing, communication, free, bubble, preparing time and shares.

    Parameters
    ----------
    profile : Profile or Cluster
        Any object with the canonical ``steps``, ``kernels`` and ``ops`` tables. A lazy
        cluster (``load(..., engine="dask")``) is computed rank by rank on the workers
        and the result (the same frame) is kept per cluster object and ``derive``.
    derive : {"auto", "always", "never"}
        ``"auto"`` uses the profiler's step table when it has ``computing_us`` values and
        derives from device tasks otherwise; ``"always"`` derives from device tasks;
        ``"never"`` only reports the profiler's table.

    Returns
    -------
    DataFrame
        One row per (rank, step) with the columns of :data:`STEP_COLUMNS`:
        ``step_us`` (= computing + comm_not_overlapped + free when all three are known,
        else the profiler's step total, else stage + bubble); the absolute parts in µs;
        ``*_share`` = part / ``step_us``; ``source`` = ``"profiler"`` or ``"derived"``.
        Parts the source does not provide stay NA. Extra columns of the profiler's table
        (for example legacy ``iteration_interval_us``) are kept after these.
        ``frame.attrs["notes"]`` says which source was used when it matters.

    Notes
    -----
    Shares of ``computing``, ``comm_not_overlapped`` and ``free`` add up to 1;
    ``overlapped`` and ``bubble`` are contained in them; ``preparing`` lies before the
    device span they cover.
    """
    if derive not in _DERIVE:
        raise InvalidArgumentError("derive", f"must be one of {_DERIVE}", derive)
    if is_lazy(profile):  # each rank where its data lies; only the step rows travel
        return _lazy_step_breakdown(profile, derive)
    # the analyses of one shared_results block (pk.advise) read it several times: worked
    # out once, each caller given its own shallow copy (a column added stays its own)
    return shared("step_breakdown", (profile,), (derive,),
                  lambda: _step_breakdown(profile, derive)).copy(deep=False)


def _step_breakdown(profile: Any, derive: str) -> pd.DataFrame:
    """:func:`step_breakdown` of a profile in memory."""
    steps = table(profile, "steps")
    usable = (not steps.empty and "computing_us" in steps.columns
              and (has_values(steps, "computing_us") or has_values(steps, "total_us")))
    if derive == "never" or (derive == "auto" and usable):
        if steps.empty or "computing_us" not in steps.columns:
            return empty_frame(STEP_COLUMNS, "the profile has no step table")
        return _clip_preparing(_from_profiler(steps), profile)
    kernels = table(profile, "kernels")
    if kernels.empty or not has_values(kernels, "dur_us"):
        return empty_frame(STEP_COLUMNS, "no step table and no device tasks to derive one from")
    # a step of the steps table known to hold a fragment of its tasks: no time, no parts
    out = withhold_fragments(derive_steps(kernels, table(profile, "ops")), steps)
    if out["step"].isna().any():
        add_note(out, "some device tasks have no step; they are grouped under step NA")
    return add_note(out, "derived from device tasks: computing > communication > free")


#: Step breakdowns of lazy clusters already computed, per cluster object and ``derive``.
#: A lazy cluster's tables never change (cache entries are written once), and the
#: breakdown is read by several analyses (slow ranks, stage balance, data loading, the
#: advisor): computing it once saves a pass over every rank.
_BREAKDOWNS: weakref.WeakKeyDictionary[Any, dict[str, pd.DataFrame]] = \
    weakref.WeakKeyDictionary()


def _profiler_steps_usable(obj: Any) -> bool:
    """The test ``step_breakdown(derive="auto")`` makes, over the whole (lazy) cluster."""
    cols = table_columns(obj, "steps")
    if "computing_us" not in cols:
        return False
    steps = obj.steps
    probe = [c for c in ("computing_us", "total_us") if c in cols]
    counts = steps[probe].count()  # non-missing values per column
    if is_lazy_frame(counts):
        counts = counts.compute()
    return bool((counts > 0).any())


def _lazy_step_breakdown(obj: Any, derive: str) -> pd.DataFrame:
    """:func:`step_breakdown` of a lazy cluster: once per cluster and ``derive``, a copy."""
    try:
        done = _BREAKDOWNS.setdefault(obj, {})
    except TypeError:  # not weak-referenceable: no memo
        done = {}
    if derive not in done:
        done[derive] = _lazy_breakdown(obj, derive)
    return done[derive].copy(deep=True)


def _lazy_breakdown(obj: Any, derive: str) -> pd.DataFrame:
    """The breakdown of a lazy cluster, each rank computed on the worker holding it."""
    if derive == "auto":
        derive = "never" if _profiler_steps_usable(obj) else "always"
    out = per_rank(obj, step_breakdown, derive=derive)
    if out.empty:
        notes = out.attrs.get("notes", [])
        out = empty_frame(STEP_COLUMNS)
        out.attrs["notes"] = notes
    return out.sort_values(["rank", "step"], kind="mergesort").reset_index(drop=True)


#: Formats whose loader measures ``preparing_us`` as the device's wait before the step's
#: first task (after the previous step's tasks end), so :func:`_clip_preparing` cannot cut
#: anything there: the Kineto reader (:mod:`perfkit.io.kineto.scan`) and raw CANN output
#: (:mod:`perfkit.io.cann.tables`). Skipping them keeps a cached reopen of a Kineto
#: trace from reading its whole ``kernels`` table for the step breakdown.
_DEVICE_WAIT_FORMATS = frozenset({"kineto", "cann_raw"})


def _clip_preparing(out: pd.DataFrame, profile: Any) -> pd.DataFrame:
    """The profiler's ``preparing_us`` of each step, clipped to start where the rank's
    earlier steps' device tasks end.

    An Ascend step table measures Preparing from the framework's step start to the step's
    first device task. The host may start a step while the device still runs the
    previous one; that tail is then in the previous step's device span and in this step's
    Preparing, counted twice. Where the device tasks (the ``kernels`` table, with their
    step) show it, Preparing is cut to the first device task's start less the latest end
    of the rank's earlier steps (never below 0), as :func:`derive_steps` and the Kineto
    reader do. A rank with one step, or a step table alone, is left as it is."""
    prep = out["preparing_us"] if "preparing_us" in out.columns else None
    if prep is None or not prep.notna().any() or not out.duplicated("rank").any():
        return out
    if getattr(getattr(profile, "meta", None), "source_format", None) in _DEVICE_WAIT_FORMATS:
        return out  # Preparing is already the device's wait: no need to read the kernels
    kernels = table(profile, "kernels")
    need = ("rank", "step", "start_us", "dur_us")
    if kernels.empty or any(c not in kernels.columns for c in need):
        return out
    k = kernels[list(need)].dropna()
    k = k.assign(end_us=k["start_us"] + k["dur_us"].clip(lower=0))
    span = k.groupby(["rank", "step"]).agg(first_us=("start_us", "min"),
                                           last_us=("end_us", "max")).reset_index()
    span = span.astype({"rank": "Int64", "step": "Int64"})
    span = span.sort_values(["rank", "first_us"], kind="mergesort")
    span["before_us"] = span.groupby("rank")["last_us"].cummax().groupby(
        span["rank"]).shift(1)
    at = out[["rank", "step"]].merge(span, on=["rank", "step"], how="left")
    # the step starts (first device task less Preparing) before the earlier steps end
    start = at["first_us"].to_numpy(np.float64) - prep.to_numpy(np.float64)
    before = at["before_us"].to_numpy(np.float64)
    cut = before > start  # NaN compares False: nothing known, nothing cut
    if not cut.any():
        return out
    out = out.copy()
    clipped = np.clip(at["first_us"].to_numpy(np.float64) - before, 0.0, None)
    out.loc[cut, "preparing_us"] = np.minimum(prep.to_numpy(np.float64), clipped)[cut]
    out["preparing_share"] = out["preparing_us"] / out["step_us"].where(out["step_us"] > 0)
    return add_note(out, f"The Preparing time of {counted(int(cut.sum()), 'step')} starts "
                         "where the previous step's device tasks end, so that no time "
                         "counts in two steps.")


def measured_step_s(breakdown: pd.DataFrame, preparing: bool = True) -> float:
    """The measured step time in seconds from a step breakdown: the step's wall time.

    A step's wall time is its device span (``step_us``: computing + exposed
    communication + free) and, with ``preparing``, the device's wait before that span
    (``preparing_us``: the batch being fetched, the host launching the step), where the
    profile measures one. The seed guides count data processing and host launch as parts
    of the training step, and a training log's step time (the interval between
    iterations) includes them; without them a data-loading stall would leave the step
    time and the throughput computed from it as if the device never waited. A Kineto
    trace's ``preparing_us`` is idle device time only (the previous step's tail is left
    out, :mod:`perfkit.io.kineto.steps`), so that no device time is counted in two steps.

    A synchronous data-parallel or pipelined job steps at the pace of its slowest rank,
    so each step counts as its longest wall over the ranks; the median over the steps
    keeps one odd step (a warm-up, a checkpoint) from moving the figure.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`perfkit.analysis.step_breakdown` output (columns ``step`` and ``step_us``;
        ``preparing_us`` where known, missing values counted as 0).
    preparing : bool
        Add the wait before the device span (default); ``False``: the device span alone
        (Ascend's Computing + Communication(Not Overlapped) + Free).

    Returns
    -------
    float
        Seconds; NaN when the breakdown has no known step time.
    """
    for column in ("step", "step_us"):
        if column not in breakdown.columns:
            raise InvalidArgumentError("breakdown", f"needs the column {column}")
    known = breakdown.dropna(subset=["step_us"])
    if known.empty:
        return math.nan
    wall = step_wall_us(known) if preparing else known["step_us"]
    slowest = pd.DataFrame({"step": known["step"], "w": wall}).groupby(
        "step", dropna=False)["w"].max()
    return median(slowest) / 1e6


#: A step whose slowest rank takes more than this many times the median step is far from
#: the others (a warm-up, a checkpoint): :func:`far_steps`.
FAR_STEP = 2.0


def far_steps(breakdown: pd.DataFrame, factor: float = FAR_STEP) -> pd.Series:
    """The steps whose slowest rank's wall time (:func:`step_wall_us`) is above ``factor``
    times the median step (:func:`measured_step_s`): a warm-up or a checkpoint, which the
    median leaves out and a sum over steps would let dominate.

    Returns
    -------
    pandas.Series
        The far steps' slowest walls in µs, indexed by step number (empty when none, or
        without numbered steps).
    """
    if breakdown.empty or "step_us" not in breakdown.columns or "step" not in \
            breakdown.columns or not breakdown["step"].notna().any():
        return pd.Series(dtype="float64")
    wall = step_wall_us(breakdown).groupby(breakdown["step"]).max().dropna()
    median_step = measured_step_s(breakdown) * 1e6
    return wall[wall > factor * median_step] if median_step > 0 else wall.iloc[:0]


def step_wall_us(breakdown: pd.DataFrame) -> pd.Series:
    """Each row's wall time in µs: ``step_us`` + ``preparing_us`` (missing: 0), the step
    time :func:`measured_step_s` counts."""
    wall = breakdown["step_us"].astype("float64")
    if "preparing_us" in breakdown.columns:
        wall = wall + breakdown["preparing_us"].astype("float64").fillna(0.0)
    return wall


def exposed_comm_us(breakdown: pd.DataFrame) -> pd.Series:
    """Each row's exposed communication without the pipeline bubble, in µs.

    The profiler's ``comm_not_overlapped_us`` (Ascend's "Communication(Not Overlapped)")
    holds the pipeline receive wait, ``bubble_us``; msprof-analyze writes the difference
    as "Communication(Not Overlapped and Exclude Receive)". This is that difference, the
    exposed communication every view shows beside the bubble: computing + exposed
    communication + bubble + free is the device span. Where the bubble is not known (NA,
    or no ``bubble_us`` column) nothing is subtracted; never below 0.

    Parameters
    ----------
    breakdown : pandas.DataFrame
        :func:`step_breakdown` output, or any frame with ``comm_not_overlapped_us`` (and
        ``bubble_us`` where known).

    Returns
    -------
    pandas.Series
        float64, on the frame's index; NA where ``comm_not_overlapped_us`` is NA.
    """
    comm = breakdown["comm_not_overlapped_us"].astype("float64")
    if "bubble_us" not in breakdown.columns:
        return comm.clip(lower=0.0)
    bubble = breakdown["bubble_us"].astype("float64").fillna(0.0)
    return (comm - bubble).clip(lower=0.0)


def step_owner(breakdown: pd.DataFrame) -> str:
    """Whose step :func:`measured_step_s` takes, in words: ``"the slowest rank's"`` (per
    step, the rank with the longest), or ``"the one rank's"`` where the steps with a
    duration are of one rank, which is no slowest of several."""
    known = breakdown.dropna(subset=["step_us"]) if "step_us" in breakdown.columns \
        else breakdown
    one = "rank" not in known.columns or known["rank"].nunique(dropna=False) <= 1
    return "the one rank's" if one else "the slowest rank's"


def step_basis(breakdown: pd.DataFrame) -> str:
    """What :func:`measured_step_s` is over, in words: the steps it counts (a span without
    a step number among them), or the one span of a profile without step marks. Steps
    a reader inferred (a :data:`STEP_MARK` column: a Kineto trace without ``ProfilerStep``,
    split at the ends of its ``Optimizer.step#...`` annotations) are said to be so. The
    step is the slowest rank's, or, where the steps are of one rank, that rank's."""
    known = breakdown.dropna(subset=["step_us"])
    if not known["step"].notna().any():
        return "the one span without step numbers: no step marks in the profile"
    steps = int(known["step"].nunique(dropna=False))
    whose = f"{step_owner(known)} step"
    inferred = inferred_steps(breakdown)
    return (f"median over {steps} step{'s' if steps != 1 else ''} of {whose}"
            + (" with the wait before its first device task" if has_wait(breakdown) else "")
            + (f"; {inferred}" if inferred else ""))


def inferred_steps(breakdown: pd.DataFrame) -> str:
    """How the steps with a duration were told, where a reader inferred them (a
    :data:`STEP_MARK` column: a Kineto trace without ``ProfilerStep``, split at the ends of
    its ``Optimizer.step#...`` annotations): "the steps are iterations inferred from the
    optimizer's ... annotations, as the trace has no ProfilerStep marks"; empty where the
    profiler marked them. One sentence for :func:`step_basis` and the job's evidence."""
    if STEP_MARK not in breakdown.columns or "step_us" not in breakdown.columns:
        return ""
    marks = sorted(set(breakdown.dropna(subset=["step_us"])[STEP_MARK].dropna()))
    return (f"the steps are iterations inferred from the optimizer's {', '.join(marks)} "
            "annotations, as the trace has no ProfilerStep marks" if marks else "")


def has_wait(breakdown: pd.DataFrame) -> bool:
    """Whether some row of a step breakdown has a wait before its device span
    (``preparing_us`` above 0), which :func:`measured_step_s` counts."""
    return "preparing_us" in breakdown.columns and bool(
        breakdown["preparing_us"].astype("float64").fillna(0.0).gt(0).any())
