"""One rank of a lazy cluster: where its tables are, and one partition built from them.

The one job of this module: :class:`RankPart` (a rank's cache entry, or its tables when it
could not be cached, and its shift onto the cluster's clock) and the functions the Dask
tasks of a :class:`~perfkit.io.engines.dask_cluster.DaskCluster` run on a worker: build one
partition of a table (:func:`_read_partition`, the rows the local engine's ``Cluster``
would hold for that rank), the empty frame a lazy table is declared with
(:func:`_table_meta`), and one rank as a pandas Profile for a per-rank function
(:func:`_run_on_rank`). Nothing here imports Dask.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import ProfileError
from ...profile import Profile, ProfileMeta, apply_group_rank_maps, shift_times
from ..cache import store as cache
from ..cache.rank_tables import cached_table
from ..canonical.schema import conform

__all__ = ["RankPart", "RankView"]

#: A function that shows one rank's Profile otherwise (:meth:`DaskCluster.viewed`).
RankView = Callable[[Profile], Profile]


@dataclass
class RankPart:
    """Where one rank's tables are, and how they are put on the cluster's clock.

    Attributes
    ----------
    rank : int or None
        Global rank.
    shift_us : float
        Added to the rank's instants (rank origin minus cluster origin, in µs).
    entry : str or None
        Cache entry folder holding ``<table>.parquet`` files.
    tables : dict or None
        The tables themselves, for a rank that could not be cached.
    """

    rank: int | None
    shift_us: float = 0.0
    entry: str | None = None
    tables: dict[str, pd.DataFrame] | None = field(default=None, repr=False)

    def raw(self, name: str) -> pd.DataFrame | None:
        """The table as stored (what a cached :class:`Profile`'s provider returns)."""
        if self.entry is not None:
            f = Path(self.entry) / f"{name}.parquet"
            try:
                return cache.read_table_file(f)
            except Exception as exc:  # noqa: BLE001 - name the damaged file
                raise ProfileError(f, f"perfkit cache entry is damaged ({type(exc).__name__}: "
                                   f"{exc}); clear the cache (perfkit.io.cache.store.clear()) and "
                                   "load again") from exc
        return (self.tables or {}).get(name)

    def table(self, name: str, maps: Mapping[str, list[int]] | None = None) -> pd.DataFrame:
        """The rank's slice of the cluster table ``name``: the rows Cluster would hold.

        Built from a cache entry once per worker process and then served from memory
        (:mod:`perfkit.io.cache.rank_tables`), so the analyses of a cluster do not read the
        same files again and again.
        """
        if self.entry is None:
            return self._build(name, maps)
        frozen = None if not maps else tuple(sorted((k, tuple(v)) for k, v in maps.items()))
        return cached_table(Path(self.entry) / f"{name}.parquet",
                            (name, self.rank, self.shift_us, frozen),
                            lambda: self._build(name, maps))

    def _build(self, name: str, maps: Mapping[str, list[int]] | None) -> pd.DataFrame:
        frame = conform(self.raw(name), name, self.rank)        # Profile._table
        frame = conform(shift_times(frame, name, self.shift_us), name)  # Cluster._table
        if name == "comm_matrix" and maps:
            frame = apply_group_rank_maps(frame, maps)
        return frame

    def schema(self, name: str) -> tuple[int, pd.DataFrame]:
        """(rows, empty frame with the columns and dtypes of :meth:`table`), cheaply.

        For a cache entry only the Parquet footer is read.
        """
        if self.entry is None:
            frame = self.table(name)
            return len(frame), frame.iloc[:0]
        f = Path(self.entry) / f"{name}.parquet"
        if not f.is_file():
            return 0, self.table(name)
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(f)
        buf = io.BytesIO()
        # the empty table goes through pandas.read_parquet, so dtypes match a full read
        pq.write_table(pf.schema_arrow.empty_table(), buf)
        buf.seek(0)
        empty = conform(pd.read_parquet(buf), name, self.rank)
        return pf.metadata.num_rows, conform(empty, name)


def _read_partition(part: RankPart, name: str, columns: Sequence[str],
                    dtypes: Mapping[str, Any], maps: Mapping[str, list[int]] | None,
                    view: RankView | None = None, meta: ProfileMeta | None = None
                    ) -> pd.DataFrame:
    """Build one partition (one rank) of a lazy table, shaped like the table's meta (the
    rank seen through ``view``, when given: :meth:`DaskCluster.viewed`)."""
    if view is None or meta is None:
        frame = part.table(name, maps)
    else:
        frame = getattr(view(_aligned_profile(part, meta, maps)), name)
    for col in columns:
        if col not in frame.columns:
            frame[col] = pd.Series(index=frame.index, dtype=dtypes[col])  # all missing
    frame = frame[list(columns)]
    for col in columns:
        if frame[col].dtype != dtypes[col]:
            frame[col] = frame[col].astype(dtypes[col])
    return frame


def _read_viewed(item: tuple[RankPart, ProfileMeta | None], name: str,
                 columns: Sequence[str], dtypes: Mapping[str, Any],
                 maps: Mapping[str, list[int]] | None, view: RankView) -> pd.DataFrame:
    """:func:`_read_partition` of one (rank, its facts) of a viewed cluster."""
    part, meta = item
    return _read_partition(part, name, columns, dtypes, maps, view, meta)


def _table_meta(parts: Sequence[RankPart], name: str) -> pd.DataFrame:
    """Empty frame with the columns and dtypes the concatenated (local) table would have.

    Like ``Cluster``, ranks with no rows of this table do not contribute columns.
    """
    if len(parts) > 8:  # footers of many entries: mostly waiting on a (shared) filesystem
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=16) as pool:
            shapes = list(pool.map(lambda p: p.schema(name), parts))
    else:
        shapes = [p.schema(name) for p in parts]
    frames = [e for n, e in shapes if n] or [shapes[0][1]]
    first = frames[0]
    if all(list(f.columns) == list(first.columns) and f.dtypes.equals(first.dtypes)
           for f in frames[1:]):
        return first
    meta = conform(pd.concat(frames, ignore_index=True), name)
    for col in meta.columns:  # a column some ranks lack becomes nullable, as concat does
        if any(col not in f.columns for f in frames):
            kind = meta[col].dtype.kind
            if kind in "iu":
                meta[col] = meta[col].astype("float64")
            elif kind == "b":
                meta[col] = meta[col].astype(object)
    return meta


def _aligned_profile(part: RankPart, meta: ProfileMeta,
                     maps: Mapping[str, list[int]] | None) -> Profile:
    """One rank as a pandas Profile whose tables equal its rows of the cluster tables."""
    return Profile(meta, lambda name: part.table(name, maps))


def _both_views(first: RankView, second: RankView, profile: Profile) -> Profile:
    """``profile`` seen through ``first``, then ``second`` (:meth:`DaskCluster.viewed`)."""
    return second(first(profile))


def _run_on_rank(func: Callable[..., Any], part: RankPart, meta: ProfileMeta,
                 maps: Mapping[str, list[int]] | None, args: tuple[Any, ...],
                 kwargs: dict[str, Any], view: RankView | None = None) -> Any:
    rank = _aligned_profile(part, meta, maps)
    return func(rank if view is None else view(rank), *args, **kwargs)

