"""Dask engine of :func:`perfkit.io.detect.load`: ranks parsed as Dask tasks, lazy tables.

``load(path, engine="dask")`` sends every rank of a cluster that is not already in the
Parquet cache to Dask as one task. The task runs :func:`perfkit.io.sources.parse_source`, the
same pure function the local engine runs, and writes the rank once to the cache
(:func:`perfkit.io.cache.write`: temporary folder, then one rename), returning only the
rank's :class:`~perfkit.profile.ProfileMeta`. The result is a :class:`DaskCluster`: its
tables (``kernels``, ``steps``, ...) are lazy ``dask.dataframe`` frames with **one partition
per rank**, read from the cache entries, aligned on the cluster's origin exactly as
:class:`~perfkit.profile.Cluster` aligns them; ``cluster[r]`` is still that rank's pandas
:class:`~perfkit.profile.Profile`.

When the cache is off (``cache=False``, ``PERFKIT_CACHE=0``, or the cache folder would be
inside the profile folder) the tasks send the tables back and ``load`` returns an ordinary
(eager, pandas) :class:`~perfkit.profile.Cluster`.

Which Dask cluster runs the tasks:

1. ``client=`` a ``distributed.Client``: that one (never closed here);
2. ``client=`` a scheduler address (``"tcp://host:8786"``): a Client connected for the load;
3. no client: the current Client (``distributed.get_client``) if there is one, else
   ``$DASK_SCHEDULER_ADDRESS`` (Dask's ``scheduler-address`` setting), else a
   ``LocalCluster`` (one single-threaded worker process per core, ``workers=`` to choose)
   started for the load.

A Client or LocalCluster opened here is closed before ``load`` returns; the lazy tables
are computed later by whatever scheduler is current then (the user's Client, else Dask's
local threads). Workers must see the profile folder and the cache folder at the same
paths as the client (a shared filesystem), and have perfkit installed.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import PerfkitError, ProfileError
from ..profile import (
    LINK_COLUMNS,
    Cluster,
    Profile,
    ProfileMeta,
    _shift_us,
    apply_group_rank_maps,
    group_rank_maps,
    shift_times,
)
from . import cache
from ._progress import Progress
from .rank_tables import cached_table
from .schema import conform
from .sources import RankSource, parse_source
from .sources import cluster_meta as _cluster_meta

#: A function that shows one rank's Profile otherwise (:meth:`DaskCluster.viewed`).
RankView = Callable[[Profile], Profile]

__all__ = ["DaskCluster", "RankPart", "load_cluster", "parse_task", "from_entries",
           "require_dask", "INSTALL_HINT", "pandas_below_bytes"]

INSTALL_HINT = ("engine='dask' needs the optional dependencies dask[dataframe] and "
                "distributed: pip install 'perfkit[dask]'")


def require_dask() -> None:
    """Raise :class:`~perfkit.PerfkitError` with the install command when Dask is missing."""
    try:
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise PerfkitError(f"{INSTALL_HINT} ({exc})") from None


# ----------------------------------------------------------------------------- the task

def parse_task(source: RankSource, key: str | None, root: str | None
               ) -> tuple[str, Any, Any]:
    """Parse one rank on a Dask worker and store it in the cache.

    Parameters
    ----------
    source : RankSource
        The rank, from :func:`perfkit.io.detect.detect`.
    key : str or None
        Its cache key (:func:`perfkit.io.cache.entry_key`, computed by the client); None
        when the cache is off.
    root : str or None
        The client's cache folder (workers may have another ``$PERFKIT_CACHE_DIR``).

    Returns
    -------
    (status, meta, payload)
        ``("cached", meta, None)`` when the rank is in the cache (written now, or already
        there), ``("tables", meta, tables)`` when it could not be stored (the tables travel
        back), ``("error", None, message)`` when the rank could not be parsed; the message
        names the file, as the local engine's does.
    """
    if key is not None and root is not None:
        meta, _ = cache.check_entry(cache.entry_path(key, root))
        if meta is not None:  # a retried task, or another client loaded it meanwhile
            return "cached", meta, None
    try:
        meta, tables = parse_source(source)
    except PerfkitError as exc:
        return "error", None, str(exc)
    except Exception as exc:  # noqa: BLE001 - a damaged rank must not sink the cluster
        return "error", None, f"{source.path}: unexpected {type(exc).__name__}: {exc}"
    if key is not None and root is not None and cache.write(key, meta, tables, root=root):
        return "cached", meta, None
    return "tables", meta, tables


# ----------------------------------------------------------------------------- one rank

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
                                   f"{exc}); clear the cache (perfkit.io.cache.clear()) and "
                                   "load again") from exc
        return (self.tables or {}).get(name)

    def table(self, name: str, maps: Mapping[str, list[int]] | None = None) -> pd.DataFrame:
        """The rank's slice of the cluster table ``name``: the rows Cluster would hold.

        Built from a cache entry once per worker process and then served from memory
        (:mod:`perfkit.io.rank_tables`), so the analyses of a cluster do not read the
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


# ----------------------------------------------------------------------------- cluster

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
        raise KeyError(f"rank {rank} is not in this cluster (ranks: {self.ranks})")

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
        return (f"DaskCluster(ranks={self.ranks}, format={self.meta.source_format!r}, "
                f"lazy tables, failed={sorted(map(str, self.failed))})")


def from_entries(entries: Sequence[str | os.PathLike[str]], root: str | os.PathLike[str] = "",
                 failed: Mapping[Any, str] | None = None) -> DaskCluster:
    """A :class:`DaskCluster` over cache entry folders (as written by the cache).

    Parameters
    ----------
    entries : sequence of path
        One entry folder (``meta.json`` + ``<table>.parquet``) per rank.
    root : path
        Recorded as the cluster's ``meta.path``.
    failed : mapping, optional
        Ranks known to be lost, with their error.

    Raises
    ------
    ProfileError
        An entry is missing or incomplete.
    """
    require_dask()
    profiles: list[Profile] = []
    found: list[tuple[Profile, str]] = []
    for e in entries:
        prof = cache.read_entry(Path(e))
        if prof is None:
            raise ProfileError(e, "not a complete perfkit cache entry (no readable meta.json)")
        profiles.append(prof)
        found.append((prof, str(e)))
    failed = dict(failed or {})
    meta = _cluster_meta(Path(root), profiles, failed)
    parts = [RankPart(p.meta.rank, _shift_us(p.meta.origin_ns, meta.origin_ns), entry=e)
             for p, e in found]
    return DaskCluster(parts, profiles, meta, failed)


# ----------------------------------------------------------------------------- load

@contextmanager
def _connect(client: Any, workers: int | None, n_tasks: int) -> Iterator[Any]:
    """The Client to run the parse tasks on (closing whatever is opened here)."""
    import dask
    from distributed import Client, LocalCluster, get_client

    if client is not None and not isinstance(client, str):
        yield client
        return
    address = client
    if address is None:
        try:
            current = get_client()
        except ValueError:
            current = None
        if current is not None:
            yield current
            return
        address = dask.config.get("scheduler-address", None)
    if address:
        own = Client(address, set_as_default=False)
        try:
            yield own
        finally:
            own.close()
        return
    n = workers or min(max(n_tasks, 1), os.cpu_count() or 1)
    local = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                         dashboard_address=":0")
    own = Client(local, set_as_default=False)
    try:
        yield own
    finally:
        own.close()
        local.close()


def load_cluster(root: Path, sources: Sequence[RankSource], use_cache: bool,
                 client: Any = None, workers: int | None = None,
                 progress: bool | None = None) -> Cluster:
    """Load many ranks with Dask (``load(..., engine="dask")`` for a cluster).

    Parameters
    ----------
    root : Path
        The folder given to ``load``.
    sources : sequence of RankSource
        The ranks, from :func:`perfkit.io.detect.detect`.
    use_cache : bool
        Whether the cache may be used (then the result is a :class:`DaskCluster`).
    client, workers, progress
        See :func:`perfkit.io.detect.load`.

    Returns
    -------
    Cluster
        A :class:`DaskCluster` (lazy tables) when the cache is used, else an eager Cluster.

    Raises
    ------
    PerfkitError
        Dask is not installed.
    ProfileError
        No rank could be loaded (the message has the first rank's error).
    """
    require_dask()
    from distributed import as_completed

    croot = str(cache.cache_root()) if use_cache else None
    loaded: dict[int, tuple[ProfileMeta, str | None, dict[str, pd.DataFrame] | None]] = {}
    hits: dict[int, Profile] = {}
    failed: dict[Any, str] = {}
    todo: list[tuple[int, RankSource, str | None]] = []
    for i, s in enumerate(sources):
        key = cache.entry_key(s.fmt, Path(s.path), s.file_paths(), s.rank) if use_cache \
            else None
        if key is not None:
            hit = cache.read(key, croot, reparse=lambda s=s: parse_source(s))
            if hit is not None:
                loaded[i] = (hit.meta, key, None)
                hits[i] = hit
                continue
        todo.append((i, s, key))
    if todo:
        show = (len(todo) > 1) if progress is None else bool(progress)
        bar = Progress(len(todo), f"perfkit: loading {len(todo)} ranks with Dask",
                       enabled=show)
        try:
            with _connect(client, workers, len(todo)) as cl:
                names = [f"perfkit-parse-{k or i}-{s.rank}" for i, s, k in todo]
                futures = cl.map(parse_task, [s for _, s, _ in todo], [k for _, _, k in todo],
                                 root=croot, key=names, pure=False)
                index = {f.key: (i, s, k) for f, (i, s, k) in zip(futures, todo, strict=True)}
                for fut in as_completed(futures, loop=cl.loop):
                    i, s, key = index[fut.key]
                    label = s.rank if s.rank is not None else s.path
                    try:
                        status, meta, payload = fut.result()
                    except Exception as exc:  # noqa: BLE001 - e.g. the worker died twice
                        status, meta, payload = ("error", None, f"{s.path}: Dask task failed: "
                                                 f"{type(exc).__name__}: {exc}")
                    fut.release()
                    if status == "error":
                        failed[label] = payload
                        bar.update(1, f"rank {label} failed")
                        continue
                    if status == "tables" and key is not None and \
                            cache.write(key, meta, payload, root=croot):
                        status, payload = "cached", None  # the client could store it
                    loaded[i] = (meta, key if status == "cached" else None, payload)
                    bar.update(1, f"rank {label}")
        finally:
            bar.close()
    if not loaded:
        first = next(iter(failed.values()), "no rank could be read")
        raise ProfileError(root, f"no rank could be loaded; first error: {first}")
    order = sorted(loaded)
    profiles: list[Profile] = []
    for i in order:
        meta, key, tables = loaded[i]
        prof = hits.get(i) or (cache.read(key, croot, reparse=lambda s=sources[i]:
                                          parse_source(s)) if key is not None else None)
        profiles.append(prof if prof is not None else Profile(meta, tables or {}))
    cmeta = _cluster_meta(root, profiles, failed)
    if not use_cache:
        cmeta.notes.append("engine='dask' without the cache: tables were sent back by the "
                           "workers and are held in memory (pandas)")
        return Cluster(profiles, cmeta, failed)
    parts = []
    for i, prof in zip(order, profiles, strict=True):
        _, key, tables = loaded[i]
        shift = _shift_us(prof.meta.origin_ns, cmeta.origin_ns)
        if key is not None:
            parts.append(RankPart(prof.meta.rank, shift,
                                  entry=str(cache.entry_path(key, croot))))
        else:
            parts.append(RankPart(prof.meta.rank, shift, tables=dict(tables or {})))
    if any(p.entry is None for p in parts):
        cmeta.notes.append("some ranks could not be written to the cache; their tables are "
                           "held in memory and shipped inside the Dask graph")
    small = _entries_bytes(parts) < pandas_below_bytes()
    if small:
        cmeta.notes.append(f"the job's cached tables are small (under "
                           f"{pandas_below_bytes() >> 20} MB): they are analysed in pandas "
                           "on this machine, where one pass costs less than scheduling it "
                           "on Dask ($PERFKIT_DASK_PANDAS_MB sets the limit; 0: always lazy)")
    return DaskCluster(parts, profiles, cmeta, failed, in_pandas=small)


def pandas_below_bytes() -> int:
    """Cached tables of a job smaller than this are analysed in pandas (default 32 MB).

    ``$PERFKIT_DASK_PANDAS_MB`` sets it (0: the tables are always lazy). Computing on Dask
    costs a scheduling round trip per pass (about 0.1 s on a small LocalCluster, whatever
    the size), more than pandas takes for a whole table of a few MB; above the limit the
    tables are lazy and the work is spread over the workers.
    """
    try:
        mb = float(os.environ.get("PERFKIT_DASK_PANDAS_MB", "32"))
    except ValueError:
        mb = 32.0
    return max(0, int(mb * (1 << 20)))


def _entries_bytes(parts: Sequence[RankPart]) -> float:
    """Total size of the ranks' cache entries; infinite when a rank is not in the cache."""
    total = 0
    for p in parts:
        if p.entry is None:
            return float("inf")
        try:
            total += sum(f.stat().st_size for f in Path(p.entry).glob("*.parquet"))
        except OSError:
            return float("inf")
    return total

