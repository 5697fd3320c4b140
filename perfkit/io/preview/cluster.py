"""One rank's tables read ahead of an Ascend cluster's load: the cluster's first answer.

An Ascend text-export cluster is read by worker processes, none of which hands its tables
over (:mod:`perfkit.io.preview.tables_first` listens in one thread): the throughput and MFU would
wait for every rank's ``trace_view.json``. So where the preview (:func:`perfkit.io.preview.steps.
preview`) is such a cluster of at least two ranks, not from perfkit's cache, whose traces
add up to at least :data:`MIN_CLUSTER_TRACE_BYTES`, the dashboard first reads one rank's
tables directly (:func:`perfkit.io.detect.sources.tables_first_source`: the small files and the
job's columns of ``kernel_details.csv``, by the code the load's hand-over uses, checked
as every rank is) and works the job out from them (:func:`perfkit.infer_job`).

Which rank: the lowest rank of the preview. Every rank of a data-, tensor- or
pipeline-parallel job runs the same batch, so its job's batch, sequence and layout (the
throughput's tokens and devices) are the cluster's: checked on every simulated cluster
and the real torch_npu pair (tests/test_cluster_first.py). Its model is not, with
pipeline parallelism (one rank holds one stage's layers): the first answer's MFU then
says so instead of a figure (:mod:`perfkit.widgets.first_answer`). The step time is
the cluster's: the preview's steps of every rank (the slowest rank's step,
:func:`perfkit.analysis.measured_step_s`), kept in :attr:`TablesFirst.steps_of`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd

from ...profile import Cluster, Profile
from ..ascend.rank import OUTPUT_DIR, rank_dir_of
from ..detect.sources import RankSource, tables_first_source
from .tables import TablesFirst

__all__ = ["cluster_tables_wanted", "cluster_tables_first", "MIN_CLUSTER_TRACE_BYTES"]

#: Smallest sum of a cluster's ``trace_view.json`` sizes worth reading one rank's tables
#: ahead of its load (bytes). The read-ahead delays the load by its own time: 0.1 s for a
#: simulated rank, 1.6-2.5 s for the 0.87 GB benchmark rank (its 345 MB
#: kernel_details.csv). The load took 3.1 s for 4 ranks of 104 MiB of traces each and
#: 12.4 s to read four copies of the benchmark rank (2 cores; benchmarks/README.md):
#: about 7 s per GiB of traces, so below 256 MiB the whole page comes within about 2 s
#: anyway, and a first answer would add a redraw for little.
MIN_CLUSTER_TRACE_BYTES = 256 * 2**20


def _ranks(preview: Any) -> list[Profile]:
    """The ranks of a preview of an Ascend text-export cluster of two ranks or more, lowest
    rank first; [] for anything else."""
    cluster = getattr(preview, "profile", None)
    if not isinstance(cluster, Cluster) or len(cluster.profiles) < 2:
        return []
    ranks = list(cluster.profiles)
    if any(p.meta.source_format != "ascend_text" for p in ranks):
        return []
    return sorted(ranks, key=lambda p: (p.meta.rank is None, p.meta.rank or 0))


def _trace_bytes(rank: Profile) -> int:
    """Size of the rank's ``trace_view.json`` (0 without one)."""
    rank_dir = rank_dir_of(Path(str(rank.meta.path or "")))
    for out in (rank_dir / OUTPUT_DIR, rank_dir):
        try:
            return (out / "trace_view.json").stat().st_size
        except OSError:
            continue
    return 0


def cluster_tables_wanted(preview: Any) -> bool:
    """Whether one rank's tables are worth reading ahead of the load of ``preview``'s
    cluster (module docstring)."""
    if getattr(preview, "cached", False):
        return False
    ranks = _ranks(preview)
    return bool(ranks) and sum(_trace_bytes(r) for r in ranks) >= MIN_CLUSTER_TRACE_BYTES


def cluster_tables_first(preview: Any) -> TablesFirst:
    """The lowest rank's tables of ``preview``'s cluster, read ahead of the load, with the
    cluster's steps (module docstring).

    Raises
    ------
    ProfileError
        Not an Ascend text-export cluster, or the rank's tables cannot be read (naming the
        file).
    """
    began = time.perf_counter()
    ranks = _ranks(preview)
    if not ranks:
        from ...errors import ProfileError

        raise ProfileError(getattr(preview, "path", ""), "not an Ascend text-export cluster")
    first = ranks[0]
    meta, tables = tables_first_source(RankSource("ascend_text", str(first.meta.path),
                                                  rank=first.meta.rank))
    steps = preview.profile.steps
    numbers = sorted({int(s) for s in steps["step"].dropna()}) \
        if isinstance(steps, pd.DataFrame) and "step" in steps.columns else []
    return TablesFirst(Profile(meta, tables), numbers, sum(_trace_bytes(r) for r in ranks),
                       time.perf_counter() - began, rank=meta.rank,
                       steps_of=preview.profile)
