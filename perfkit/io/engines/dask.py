"""Dask engine of :func:`perfkit.io.engines.local.load`: ranks parsed as Dask tasks, lazy tables.

``load(path, engine="dask")`` sends every rank of a cluster that is not already in the
Parquet cache to Dask as one task. The task runs :func:`perfkit.io.detect.sources.parse_source`, the
same pure function the local engine runs, and writes the rank once to the cache
(:func:`perfkit.io.cache.store.write`: temporary folder, then one rename), returning only the
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

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import PerfkitError, ProfileError
from ...profile import Cluster, Profile, ProfileMeta, _shift_us
from .._common.progress import Progress
from ..cache import store as cache
from ..detect.sources import RankSource, parse_source
from ..detect.sources import cluster_meta as _cluster_meta

# the lazy cluster and a rank's partitions: modules of their own, every name still
# importable from here
from .dask_cluster import DaskCluster
from .dask_parts import (
    RankPart,
)

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
        The rank, from :func:`perfkit.io.engines.local.detect`.
    key : str or None
        Its cache key (:func:`perfkit.io.cache.store.entry_key`, computed by the client); None
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
        The ranks, from :func:`perfkit.io.engines.local.detect`.
    use_cache : bool
        Whether the cache may be used (then the result is a :class:`DaskCluster`).
    client, workers, progress
        See :func:`perfkit.io.engines.local.load`.

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

