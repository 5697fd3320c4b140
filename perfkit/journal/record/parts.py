"""The tables a run record keeps besides its metrics: the step breakdown
(:func:`run_breakdown`), the advisor's findings (:func:`run_findings`) and the operator time
per category and per name (:func:`run_operators`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...advisor import advise
from ...analysis.compare import operator_totals
from ...analysis.steps import step_breakdown
from ...job import Job
from .basis import MEAN_WALL, WALL, job_step_parts
from .fields import (
    BREAKDOWN_COLUMNS,
    BREAKDOWN_PARTS,
    FINDING_COLUMNS,
    GROUPINGS,
    MAX_OPERATOR_NAMES,
    OPERATOR_COLUMNS,
)

__all__ = ["run_breakdown", "run_findings", "run_operators"]


def run_breakdown(profile: Any) -> pd.DataFrame:
    """The step breakdown of a run: the job's step and its parts.

    Returns
    -------
    pandas.DataFrame
        One row per part the profile has, ``wall_us`` (the job's step: device span and
        the wait before the first device task, the step time of the run's metrics) first,
        then those of :data:`BREAKDOWN_PARTS`: ``part``, ``us`` (the part's share of every
        rank's and step's wall time × the job's step,
        :func:`perfkit.journal.record.basis.job_step_parts`) and ``share`` (``us /
        wall_us``, so that computing, communication not overlapped, free and the wait add
        up to 1); last ``mean_wall_us``, the mean wall time over every rank and step (the
        step the shares are of; no share). Empty when the profile has no step breakdown.
    """
    steps = step_breakdown(profile)
    rows = []
    if not steps.empty and "step_us" in steps.columns:
        parts = job_step_parts(steps, BREAKDOWN_PARTS)
        step = parts.get(WALL, math.nan)
        for part, us in parts.items():
            share = us / step if step > 0 and part != MEAN_WALL else None  # NaN > 0: False
            rows.append({"part": part, "us": us, "share": share})
    return pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS))


def run_findings(profile: Any, job: Job) -> pd.DataFrame:
    """The advisor's findings for the run, best first (:func:`perfkit.advise` with the
    job's model, layout and hardware).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FINDING_COLUMNS`; ``position`` 1 is the first finding;
        ``ms_per_step`` NaN when the cost is not measurable.
    """
    found = advise(profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    rows = [{"position": i, "rule": f.rule, "severity": f.severity, "area": f.area,
             "title": f.title, "ms_per_step": float(f.ms_per_step), "measured": bool(f.measured),
             "score": float(f.score), "evidence": f.evidence,
             "recommendation": f.recommendation} for i, f in enumerate(found, 1)]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def run_operators(profile: Any, max_names: int = MAX_OPERATOR_NAMES) -> tuple[pd.DataFrame, int]:
    """Device time per operator category and per task name, per (rank, step).

    Parameters
    ----------
    profile : Profile or Cluster
    max_names : int
        Task names kept (the longest first).

    Returns
    -------
    (pandas.DataFrame, int)
        Columns :data:`OPERATOR_COLUMNS` (``grouping`` is ``"category"`` or ``"name"``):
        :func:`perfkit.analysis.compare.operator_totals` with its defaults (per (rank,
        step), communication included) — the two sides :func:`perfkit.analysis.
        compare_profiles` diffs, so a diff of two stored runs is the one the profiles
        would give; and the number of distinct task names before ``max_names`` was
        applied.
    """
    frames = []
    total_names = 0
    for grouping in GROUPINGS:
        t = operator_totals(profile, by=grouping)
        if grouping == "name":
            total_names = len(t)
            t = t.sort_values("us", ascending=False, kind="mergesort").head(max_names)
        frames.append(pd.DataFrame({"grouping": grouping, "key": t.index.astype(str),
                                    "count": t["count"].to_numpy(float),
                                    "us": t["us"].to_numpy(float)}))
    return pd.concat(frames, ignore_index=True)[list(OPERATOR_COLUMNS)], total_names
