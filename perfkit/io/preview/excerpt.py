"""A few whole steps of a large Kineto profile, read ahead of its load: the first answer.

:func:`perfkit.io.preview.steps.preview` gives a profile's step time in a fraction of a second,
but on a Kineto trace the step's split and the job (batch, sequence, model: throughput and
MFU) need the device tasks and the operator shapes, which come with the full parse. Each
step holds only a small part of them: :func:`first_steps` cuts the same middle steps from
every rank's trace (:mod:`perfkit.io.kineto.excerpt`) and loads them with perfkit's Kineto
reader, so that their split, and the job read from them, are the full load's for those
steps, in about a second for a gigabyte of traces.

It is used where the preview read Kineto ``ProfilerStep`` spans of at most
:data:`MAX_RANKS` uncompressed traces of at least
:data:`~perfkit.io.kineto.excerpt.MIN_TRACE_BYTES` each, not from perfkit's cache (a
cached profile opens in a fraction of a second anyway).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...format import counted
from ...profile import Cluster, Profile
from ..detect.sources import cluster_meta
from ..kineto.excerpt import EXCERPT_BYTES, MIN_TRACE_BYTES, middle_steps, read_excerpt
from .kineto import STEP_SPANS

__all__ = ["FirstSteps", "first_steps", "excerpt_wanted", "reported_rows", "MAX_RANKS"]

#: Ranks cut at most: each takes about half a second before the load starts (the ranks one
#: after the other), so a larger job waits for its full load instead.
MAX_RANKS = 8


@dataclass
class FirstSteps:
    """What :func:`first_steps` read.

    Attributes
    ----------
    profile : Profile or Cluster
        The excerpts, loaded: every table of the full load, for the steps read. Its
        ``steps`` table also holds the step before and the step after the reported ones
        (read for their waits and idle tails): use :attr:`steps`.
    steps : list of int
        The steps reported, the same on every rank.
    total_steps : int
        The steps in the traces (the most of any rank).
    bytes_read : int
        Bytes of the traces decoded to cut the steps.
    trace_bytes : int
        Size of the traces.
    seconds : float
        How long the cut and the load took.
    notes : list of str
        Ranks read, and anything to know.
    """

    profile: Profile | Cluster
    steps: list[int]
    total_steps: int
    bytes_read: int
    trace_bytes: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    def which(self) -> str:
        """The steps read, for people ("steps 168-169 of 353")."""
        first, last = self.steps[0], self.steps[-1]
        which = f"step {first}" if first == last else f"steps {first}-{last}"
        return f"{which} of {self.total_steps}"

    def describe(self) -> str:
        """One phrase for people: which steps, how they were read."""
        return (f"{self.which()}, cut from the trace"
                f"{'s' if isinstance(self.profile, Cluster) else ''} "
                f"({self.bytes_read / 2**20:,.0f} MiB of {self.trace_bytes / 2**30:,.2f} GiB "
                f"read in {self.seconds:.1f} s)")


def _ranks(preview: Any) -> list[Profile]:
    profile = getattr(preview, "profile", None)
    if profile is None:
        return []
    return list(profile.profiles) if isinstance(profile, Cluster) else [profile]


def excerpt_wanted(preview: Any) -> bool:
    """Whether :func:`first_steps` applies to ``preview`` (module docstring)."""
    ranks = _ranks(preview)
    if not ranks or len(ranks) > MAX_RANKS or getattr(preview, "cached", False):
        return False
    for rank in ranks:
        spans = rank.meta.extra.get(STEP_SPANS)
        path = Path(str(rank.meta.path or ""))
        if rank.meta.source_format != "kineto" or not isinstance(spans, pd.DataFrame) or \
                not {"step", "ts_us", "dur_us"} <= set(spans.columns) or len(spans) < 3 or \
                path.suffix.lower() == ".gz":
            return False
        try:
            if path.stat().st_size < MIN_TRACE_BYTES:
                return False
        except OSError:
            return False
    return True


def first_steps(preview: Any, budget: int = EXCERPT_BYTES) -> FirstSteps | None:
    """The same middle steps of every rank of ``preview``, cut and loaded.

    Parameters
    ----------
    preview : perfkit.io.preview.steps.Preview
        A preview of Kineto traces (:func:`excerpt_wanted`).
    budget : int
        About how many bytes of each trace to read.

    Returns
    -------
    FirstSteps or None
        None where it does not apply (:func:`excerpt_wanted`), the ranks have no three
        steps in common, or a trace's events do not let its steps be cut
        (:func:`perfkit.io.kineto.excerpt.cut_steps`).
    """
    began = time.perf_counter()
    if not excerpt_wanted(preview):
        return None
    ranks = _ranks(preview)
    spans = [r.meta.extra[STEP_SPANS] for r in ranks]
    common = set(spans[0]["step"])
    for s in spans[1:]:
        common &= set(s["step"])
    ordered = [int(s) for s in spans[0].sort_values("ts_us")["step"] if s in common]
    sizes = [Path(str(r.meta.path)).stat().st_size for r in ranks]
    per_rank = max(sizes) * len(ordered) / max(len(s) for s in spans)  # bytes of those steps
    report = middle_steps(ordered, per_rank, budget)
    if not report:
        return None
    loaded, read = [], 0
    for rank, s in zip(ranks, spans, strict=True):
        got = read_excerpt(str(rank.meta.path), s, budget, report)
        if got is None:
            return None
        profile, excerpt = got
        if isinstance(profile, Cluster):
            return None  # one trace is one rank
        if rank.meta.rank is not None and profile.meta.rank is None:
            profile.meta.rank = rank.meta.rank
        loaded.append(profile)
        read += excerpt.bytes_read
        report = [x for x in report if x in set(excerpt.steps)]
    if not report:
        return None
    root = Path(str(getattr(preview, "path", "") or ranks[0].meta.path))
    whole: Profile | Cluster = loaded[0] if len(loaded) == 1 and not isinstance(
        preview.profile, Cluster) else Cluster(loaded, cluster_meta(root, loaded, {}))
    return FirstSteps(whole, report, max(len(s) for s in spans), read, sum(sizes),
                      time.perf_counter() - began,
                      [f"{counted(len(loaded), 'rank')} read"])


def reported_rows(breakdown: pd.DataFrame, first: Any) -> pd.DataFrame:
    """The rows of ``breakdown`` (:func:`perfkit.analysis.step_breakdown` of
    ``first.profile``) of the reported steps (``first.steps``: a :class:`FirstSteps`, or
    :class:`perfkit.io.preview.tables.TablesFirst`)."""
    if "step" not in breakdown.columns:
        return breakdown.iloc[0:0]
    return breakdown[breakdown["step"].isin(first.steps)].reset_index(drop=True)


