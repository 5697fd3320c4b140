"""An Ascend rank's tables, handed over before its trace: the first answer's job.

:func:`perfkit.io.preview.steps.preview` gives an Ascend rank's step time and split from
``step_trace_time.csv`` in a fraction of a second. The throughput and MFU need the job
(:func:`perfkit.infer_job`: batch and sequence from the operator shapes, micro-batches
from the loss calls, model and layout), which is read from ``kernel_details.csv`` and the
rank's other tables, not from ``trace_view.json`` (host operators). The trace is the
rank's largest file. So the full load of such a rank, listened to, reads its small files
and the job's columns of ``kernel_details.csv`` first and hands them over
(:mod:`perfkit.io.preview.tables_first`); the dashboard works out the job from them while the
load reads the rest, and the trace's decoding waits for it.

It is used where the preview is one Ascend text-export rank, not from perfkit's cache,
whose ``trace_view.json`` is at least :data:`MIN_TRACE_BYTES` (a smaller one is read
about as fast as the tables: the whole load follows at once). On a cluster, whose ranks
are read by worker processes, one rank's tables are read ahead of the load instead
(:mod:`perfkit.io.preview.cluster`), in a :class:`TablesFirst` too. :class:`TablesFirst` is what
the dashboard's first answer (:func:`perfkit.widgets.first_answer.first_answer`) reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...format import counted
from ...profile import Cluster, Profile
from ..ascend.rank import OUTPUT_DIR, rank_dir_of

__all__ = ["TablesFirst", "tables_wanted", "tables_first_of", "MIN_TRACE_BYTES"]

#: Smallest ``trace_view.json`` worth handing the tables over before (bytes): at the
#: measured 0.14 GB/s of its decoding on 2 cores, 64 MiB take about half a second.
MIN_TRACE_BYTES = 64 * 2**20


@dataclass
class TablesFirst:
    """A rank's tables, read before its trace (:func:`tables_first_of`).

    Attributes
    ----------
    profile : Profile
        The rank, every table but ``ops`` (:mod:`perfkit.io.preview.tables_first`).
    steps : list of int
        Its steps (all of them: the tables hold every step).
    trace_bytes : int
        Size of the ``trace_view.json`` still being read.
    seconds : float
        From the start of the load until the tables were handed over (or, read ahead of
        a cluster's load, until they were read).
    notes : list of str
    rank : int, optional
        The rank read, where it is one rank of a cluster
        (:mod:`perfkit.io.preview.cluster`); None for a profile of one rank.
    steps_of : Profile or Cluster, optional
        Whose steps the step time is read from: the cluster's (every rank's steps, of the
        preview) where one rank of it was read; None: the rank's own.
    """

    profile: Profile
    steps: list[int]
    trace_bytes: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    rank: int | None = None
    steps_of: Profile | Cluster | None = None

    @property
    def total_steps(self) -> int:
        """The steps of the rank (all read)."""
        return len(self.steps)

    @property
    def of_cluster(self) -> bool:
        """Whether the tables are one rank's of a cluster (:attr:`steps_of`)."""
        return self.steps_of is not None

    def which(self) -> str:
        """Where the figures come from, for people ("kernel_details.csv and the rank's
        other tables (1 step)"; one rank of a cluster: "rank 0's kernel_details.csv and
        other tables", the step time being every rank's, of the preview)."""
        if self.of_cluster:
            who = f"rank {self.rank}" if self.rank is not None else \
                Path(str(self.profile.meta.path or "")).name or "one rank"
            return f"{who}'s kernel_details.csv and other tables"
        return (f"kernel_details.csv and the rank's other tables "
                f"({counted(len(self.steps), 'step')})")

    def describe(self) -> str:
        """One phrase for people: what was read, and what is still being read."""
        if self.of_cluster:
            return (f"{self.which()}, read in {self.seconds:.1f} s ahead of the ranks' "
                    f"trace_view.json ({self.trace_bytes / 2**30:,.2f} GiB of host "
                    "operators, still being read)")
        return (f"{self.which()}, read in {self.seconds:.1f} s before trace_view.json "
                f"({self.trace_bytes / 2**30:,.2f} GiB of host operators, still being read)")


def _trace_file(preview: Any) -> Path | None:
    """The ``trace_view.json`` of a preview of one Ascend text-export rank (a rank folder,
    or a folder holding one), else None."""
    profile = getattr(preview, "profile", None)
    if isinstance(profile, Cluster) and len(profile.profiles) == 1:
        profile = profile.profiles[0]
    if not isinstance(profile, Profile) or profile.meta.source_format != "ascend_text":
        return None
    rank_dir = rank_dir_of(Path(str(profile.meta.path or "")))
    for out in (rank_dir / OUTPUT_DIR, rank_dir):
        if (out / "trace_view.json").is_file():
            return out / "trace_view.json"
    return None


def tables_wanted(preview: Any) -> bool:
    """Whether a load of ``preview``'s profile is worth listening to for its tables
    (module docstring)."""
    if getattr(preview, "cached", False):
        return False
    trace = _trace_file(preview)
    try:
        return trace is not None and trace.stat().st_size >= MIN_TRACE_BYTES
    except OSError:
        return False


def tables_first_of(preview: Any, meta: Any, tables: dict[str, pd.DataFrame],
                    seconds: float) -> TablesFirst:
    """The tables handed over by the load of ``preview``'s rank
    (:func:`perfkit.io.preview.tables_first.listen`), ``seconds`` after it began."""
    profile = Profile(meta, tables)
    steps = tables.get("steps")
    numbers = sorted({int(s) for s in steps["step"].dropna()}) \
        if isinstance(steps, pd.DataFrame) and "step" in steps.columns else []
    trace = _trace_file(preview)
    size = trace.stat().st_size if trace is not None else 0
    return TablesFirst(profile, numbers, size, seconds)
