"""The lazy cluster of the Dask engine: :class:`DaskCluster`.

The one job of this module: a :class:`~perfkit.profile.Cluster` whose tables are lazy
``dask.dataframe`` frames with one partition per rank (built on the workers by
:mod:`perfkit.io.engines.dask_parts`), with the comm_matrix's group ranks mapped by two
small Dask aggregations, per-rank work as Dask tasks (:meth:`DaskCluster.map_ranks`) and
views of its ranks (:meth:`DaskCluster.viewed`). Dask is imported inside the methods:
:mod:`perfkit.io.engines.dask` makes the cluster (``load(..., engine="dask")``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from ...profile import (
    LINK_COLUMNS,
    Cluster,
    Profile,
    ProfileMeta,
    group_rank_maps,
    missing_rank,
)
from .dask_parts import (
    RankPart,
    RankView,
    _aligned_profile,
    _both_views,
    _read_partition,
    _read_viewed,
    _run_on_rank,
    _table_meta,
)

__all__ = ["DaskCluster"]

class DaskCluster(Cluster):
    """A Cluster whose tables are lazy ``dask.dataframe`` frames, one partition per rank.

    Made by ``load(..., engine="dask")`` or :func:`from_entries`. Everything else is a
    :class:`~perfkit.profile.Cluster`: ``meta``, ``failed``, ``ranks``, ``cluster[r]`` (that
    rank's pandas Profile, on its own clock, read from the cache).

    Each table equals the local engine's (``load(..., engine="local")``) once computed,
    except for the index: every partition keeps its own 0-based index, so sort by a key
    rather than rely on row positions. Partition ``i`` holds ``ranks[i]`` and nothing else;
    per-rank work can therefore run with ``map_partitions`` or :meth:`map_ranks` without
    moving data between workers.

    Parameters
    ----------
    parts : list of RankPart
        Where each rank's tables are.
    profiles : list of Profile
        The same ranks as pandas Profiles (for ``cluster[r]``).
    meta : ProfileMeta
        Cluster facts (``origin_ns`` is the clock every table is put on).
    failed : mapping, optional
        Ranks that could not be read, with the error.
    """

    lazy = True

    def __init__(self, parts: list[RankPart], profiles: list[Profile], meta: ProfileMeta,
                 failed: Mapping[Any, str] | None = None, *, in_pandas: bool = False):
        super().__init__(profiles, meta, failed)
        self.parts = sorted(parts, key=lambda p: (p.rank is None, p.rank or 0))
        self._maps: dict[str, list[int]] | None = None
        self._view: RankView | None = None
        if in_pandas:
            # a small job: its tables are pandas frames on this machine (see load_cluster)
            self.lazy = False

    @property
    def npartitions(self) -> int:
        """Number of partitions of every table (= number of ranks)."""
        return len(self.parts)

    def _lazy(self, name: str, maps: Mapping[str, list[int]] | None) -> Any:
        import dask
        import dask.dataframe as dd

        meta = _table_meta(self.parts, name)
        view = {} if self._view is None else {"view": self._view}
        # keep perfkit's dtypes: no conversion of text columns to pyarrow strings
        with dask.config.set({"dataframe.convert-string": False}):
            if view:  # each partition needs its rank's facts: one (part, meta) pair each
                metas = {p.meta.rank: p.meta for p in self.profiles}
                return dd.from_map(_read_viewed, [(p, metas.get(p.rank)) for p in self.parts],
                                   name=name, columns=list(meta.columns),
                                   dtypes=dict(meta.dtypes), maps=dict(maps) if maps else None,
                                   meta=meta, label=f"perfkit-{name}", enforce_metadata=False,
                                   **view)
            return dd.from_map(_read_partition, self.parts, name=name,
                               columns=list(meta.columns), dtypes=dict(meta.dtypes),
                               maps=dict(maps) if maps else None, meta=meta,
                               label=f"perfkit-{name}", enforce_metadata=False)

    def _table(self, name: str) -> Any:
        if not self.lazy:
            return super()._table(name)
        if name not in self._cache:
            frame = self._lazy(name, None)
            if name == "comm_matrix":
                maps = self.group_maps(frame)
                if maps:
                    frame = self._lazy(name, maps)
            self._cache[name] = frame
        return self._cache[name]

    def group_maps(self, matrix: Any = None) -> dict[str, list[int]]:
        """Groups whose local ranks are mapped to global ranks in ``comm_matrix``.

        Computed once, with two small Dask aggregations (the distinct local-rank links
        and the members of each group), by the rule of
        :func:`perfkit.profile.group_rank_maps`.
        """
        if self._maps is not None:
            return self._maps
        if matrix is None:
            matrix = self._lazy("comm_matrix", None)
        maps: dict[str, list[int]] = {}
        if all(c in matrix.columns for c in LINK_COLUMNS):
            todo = matrix["src_rank"].isna() | matrix["dst_rank"].isna()
            # distinct rows per partition (= per rank) on the workers, then here: no shuffle
            links = matrix[todo][list(LINK_COLUMNS)].map_partitions(
                pd.DataFrame.drop_duplicates).compute().drop_duplicates()
            if len(links):
                ops = self._lazy("comm_ops", None)
                members = ops[["group", "rank"]].dropna(subset=["group"]).map_partitions(
                    pd.DataFrame.drop_duplicates).compute()
                maps = group_rank_maps(links, members)
        if maps:
            self._note_mapped(list(maps))
        self._maps = maps
        return maps

    def map_ranks(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Run ``func(rank_profile, *args, **kwargs)`` for every rank, as Dask tasks.

        ``rank_profile`` is a pandas :class:`~perfkit.profile.Profile` whose tables are
        exactly that rank's rows of this cluster's tables (same clock, same comm_matrix
        mapping), read from the cache on the worker. Use it for per-rank work that needs
        several tables or the events themselves, and return something small.

        Returns
        -------
        list
            One result per rank, in rank order (see :attr:`ranks`).
        """
        import dask

        maps = self.group_maps()
        metas = {p.meta.rank: p.meta for p in self.profiles}
        tasks = [dask.delayed(_run_on_rank, pure=False)(func, part, metas.get(part.rank),
                                                         maps or None, args, kwargs,
                                                         self._view)
                 for part in self.parts]
        return list(dask.compute(*tasks))

    def rank_view(self, rank: int) -> Profile:
        """Rank ``rank`` as the pandas Profile :meth:`map_ranks` hands to its function."""
        for part, prof in zip(self.parts, self.profiles, strict=True):
            if part.rank == rank:
                out = _aligned_profile(part, prof.meta, self.group_maps() or None)
                return out if self._view is None else self._view(out)
        raise missing_rank(rank, self.ranks)

    def viewed(self, view: RankView) -> DaskCluster:
        """This cluster with every rank seen through ``view``, still lazy.

        ``view(rank_profile)`` gives the Profile to show for one rank (a pandas Profile of
        that rank, on the cluster's clock); it must keep each table's columns and dtypes
        (leaving rows out, as :func:`perfkit.analysis.recorded.recorded_profile` does), be
        cheap until a table is read, and be picklable (a module-level function). The
        tables' partitions, :meth:`map_ranks`, :meth:`rank_view` and ``cluster[r]`` all
        show the viewed ranks, so that an analysis sees the same tasks whichever it reads.
        A viewed cluster viewed again shows each rank through its view, then ``view``.
        """
        import copy
        import threading

        out = copy.copy(self)
        out._cache = {}
        out._lock = threading.RLock()
        # a viewed cluster viewed again shows its ranks through both views, in turn
        out._view = view if self._view is None else functools.partial(_both_views,
                                                                      self._view, view)
        out.profiles = [view(p) for p in self.profiles]
        return out

    def to_pandas(self) -> Cluster:
        """The same ranks as an eager :class:`~perfkit.profile.Cluster` (pandas tables).

        Everything is read into this process: meant for clusters that fit in memory, or
        for analyses that do not accept lazy tables yet.
        """
        import copy

        return Cluster(self.profiles, copy.deepcopy(self.meta), self.failed)

    def __repr__(self) -> str:
        tables = "lazy tables" if self.lazy else \
            "tables in pandas (a small job: $PERFKIT_DASK_PANDAS_MB)"
        return (f"DaskCluster(ranks={self.ranks}, format={self.meta.source_format!r}, "
                f"{tables}, failed={sorted(map(str, self.failed))})")
