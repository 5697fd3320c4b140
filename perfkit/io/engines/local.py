"""Load what a path holds: ``load(path)`` -> :class:`Profile` or :class:`Cluster`.

What a path holds (the formats recognised, see docs/loading.md) is found by
:mod:`perfkit.io.detect.paths` (:func:`detect`, :func:`find_runs`, :func:`runs`, exported
here too under their old path); this module loads the rank sources it finds.

Parsing one rank is :func:`parse_source`, a pure function of a :class:`RankSource`
(path in, tables out); :func:`load` runs it in a local process pool for clusters, or as Dask
tasks with ``engine="dask"`` (:mod:`perfkit.io.engines.dask`). Each rank goes through the
Parquet cache (:mod:`perfkit.io.cache.store`) when it is on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..._hugepages import with_small_pages
from ...bundled_samples import resolve_sample
from ...errors import (
    InvalidArgumentError,
    PerfkitError,
    ProfileError,
    RunNotFoundError,
    RunsFound,
    boundary,
)
from ...format import listed, plural
from ...profile import Cluster, Profile, ProfileMeta
from .._common import release_memory
from .._common.progress import Progress
from ..cache import store as cache

# what a path holds: its own module, every name still importable from here (the tests and
# older callers import the private helpers from perfkit.io.engines.local)
from ..detect.paths import detect, find_runs, runs
from ..detect.runs import Run, facts_from_meta, group_runs, pick_run
from ..detect.sources import RankSource, cluster_meta, input_bytes, parse_source
from . import handoff

__all__ = ["RankSource", "Run", "detect", "find_runs", "runs", "parse_source", "load",
           "default_engine", "checked_engine", "checked_path", "checked_ranks", "select_ranks",
           "absolute_path"]

ENGINES = ("local", "dask")
_PARALLEL_MIN_BYTES = 32 << 20


# ----------------------------------------------------------------------------- parsing

def _work(source: RankSource, use_cache: bool, in_pool: bool = False
          ) -> tuple[RankSource, Any, Any]:
    """Worker body: parse, store in the cache, return meta (+ where the tables are).

    In a worker process the tables travel back as files: the cache entry (Parquet), or,
    when the cache is off, uncompressed Arrow files in a temporary folder outside the
    user's folders (:mod:`perfkit.io.engines.handoff`): much faster and lighter than pickling
    large frames.
    """
    meta, tables = parse_source(source)
    if use_cache:
        key = _key(source)
        if cache.write(key, meta, tables):
            return _done(source, meta, key, tables, in_pool)
    if in_pool:
        tmp = Path(tempfile.mkdtemp(prefix="perfkit-rank-"))
        try:
            handoff.write_tables(tmp, meta, tables)
            return _done(source, meta, ("tmp", str(tmp)), tables, in_pool)
        except Exception:  # noqa: BLE001 - fall back to sending the frames themselves
            shutil.rmtree(tmp, ignore_errors=True)
    return source, meta, tables


def _done(source: RankSource, meta: ProfileMeta, payload: Any, tables: dict[str, Any],
          in_pool: bool) -> tuple[RankSource, Any, Any]:
    """A worker's result; a pool worker first frees the rank's tables (they are on disk).

    Without this a worker keeps the memory of its last rank while it waits, and the pool's
    memory adds up with the parent's reading the tables back.
    """
    if in_pool:
        tables.clear()
        release_memory()
    return source, meta, payload


def _key(source: RankSource) -> str:
    return cache.entry_key(source.fmt, Path(source.path), source.file_paths(), source.rank)


def _reparse(source: RankSource) -> Callable[[], Any]:
    """How a cached Profile heals a table found damaged when read: parse the rank again."""
    return lambda: parse_source(source)


def _profile_from(meta: ProfileMeta, payload: Any, source: RankSource | None = None
                  ) -> Profile:
    if isinstance(payload, str):
        cached = cache.read(payload, reparse=None if source is None else _reparse(source))
        if cached is not None:
            return cached
        if source is not None:  # the entry went bad between the write and this read
            return Profile(*parse_source(source))
    if isinstance(payload, tuple) and payload[0] == "tmp":
        prof = handoff.read_tables(Path(payload[1]), meta)
        if prof is not None:
            return prof
        raise ProfileError(meta.path, "worker output was lost before it could be read")
    return Profile(meta, payload)


def default_engine() -> str:
    """Engine used when ``load`` gets none: ``$PERFKIT_ENGINE`` if set, else ``"local"``."""
    return os.environ.get("PERFKIT_ENGINE", "").strip().lower() or "local"


def checked_path(path: Any) -> None:
    """Refuse a ``path`` that is not a path (an int, None): a TypeError deep in the
    reader used to be reported as a damaged file."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError("path", "must be a path (str or os.PathLike) or "
                                   "'sample:NAME'", type(path).__name__)


def checked_ranks(ranks: Any) -> list[int] | None:
    """``ranks`` as a sorted list of distinct whole numbers >= 0 (None: every rank);
    anything else is refused as the argument it is, not blamed on the files."""
    if ranks is None:
        return None
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, Iterable):
        raise InvalidArgumentError("ranks", "must be an iterable of whole numbers (ranks=[0] "
                                   "for one rank)", ranks)
    out = set()
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 0:
            raise InvalidArgumentError("ranks", "must hold whole numbers >= 0", r)
        out.add(int(r))
    return sorted(out)


def checked_engine(engine: str | None) -> str:
    """``engine``, or :func:`default_engine` when None; an InvalidArgumentError when it is
    neither ``"local"`` nor ``"dask"``."""
    if engine is None:
        engine = default_engine()
    if engine not in ENGINES:
        raise InvalidArgumentError("engine", "must be 'local' or 'dask' (also as "
                                   "$PERFKIT_ENGINE)", engine)
    return engine


@boundary(ProfileError, path_arg="path", what="a profile")
@with_small_pages
def load(path: str | os.PathLike[str], ranks: Iterable[int] | None = None, cache: bool = True,
         engine: str | None = None, client: Any = None, *, run: Any = None,
         workers: int | None = None, progress: bool | None = None) -> Profile | Cluster:
    """Open a profiler output, whatever produced it, into the canonical tables.

    Parameters
    ----------
    path : str or path-like
        A rank folder, a file, or a parent folder of many ranks; or ``"sample:NAME"``, a
        bundled sample (:func:`perfkit.samples`, e.g. ``"sample:slow-rank"``).
    ranks : iterable of int, optional
        Load only these global ranks (a parent folder then gives a Cluster of them).
    cache : bool, default True
        Use the Parquet cache (see :mod:`perfkit.io.cache.store`); ``PERFKIT_CACHE=0`` also
        switches it off.
    engine : {"local", "dask"}, optional
        ``"local"`` parses ranks in a local process pool. ``"dask"`` parses each rank of a
        cluster as a Dask task that writes it to the cache, and gives a Cluster whose
        tables are lazy ``dask.dataframe`` frames (see docs/dask.md and
        :mod:`perfkit.io.engines.dask`; needs ``perfkit[dask]``). Default:
        ``$PERFKIT_ENGINE``, else ``"local"``. A single rank and msprof-analyze output are
        always read locally.
    client : distributed.Client or str, optional
        For ``engine="dask"``: the client (or scheduler address) to run the tasks on.
        Default: the current client, else ``$DASK_SCHEDULER_ADDRESS``, else a LocalCluster
        started for this call and closed before it returns.
    run : int, str or Run, optional
        Which run to load when the folder holds several separate runs (:func:`runs` lists
        them): its ``id``, its ``name``, or the name of one of its files. Without it, a
        folder of several runs raises :class:`~perfkit.errors.RunsFound`, which lists them.
    workers : int, optional
        Processes for a cluster (default: CPU count, 1 for small inputs); with
        ``engine="dask"``, the number of workers of a LocalCluster started here.
    progress : bool, optional
        Show a progress bar (default: when more than one rank must be parsed).

    Returns
    -------
    Profile or Cluster
        A Profile for one rank, a Cluster for a parent folder of ranks.

    Raises
    ------
    RunsFound
        The folder holds several separate runs and ``run`` does not pick one (its ``runs``
        attribute lists them; a ProfileError).
    ProfileError
        Missing path, unknown content, damaged file (for a single rank), duplicate rank
        within a run, a ``run`` that is not among those found.
    perfkit.bundled_samples.UnknownSampleError
        ``"sample:NAME"`` with a name no bundled sample has (the message lists them).

    Nothing else escapes: any other failure while reading is turned into a ProfileError
    naming the file (see docs/errors.md).
    """
    checked_path(path)
    ranks = checked_ranks(ranks)
    path = absolute_path(resolve_sample(path))  # "sample:NAME" -> the sample's folder
    engine = checked_engine(engine)
    kind, found = find_runs(path)
    root = Path(path).expanduser()
    if kind == "cluster_analysis_output":
        from ..ascend import cluster_output

        return cluster_output.load(Path(found[0].sources[0].path), ranks=ranks)
    if len(found) > 1 and run is None:
        raise RunsFound(root, found)
    chosen = found[0] if run is None else pick_run(found, run, root, RunNotFoundError.among(found))
    sources = list(chosen.sources)
    if sources and sources[0].fmt == "cluster_analysis_output":  # one of several profiles
        from ..ascend import cluster_output

        return cluster_output.load(Path(sources[0].path), ranks=ranks)
    skipped = [f"{Path(s.path).name} left out: {s.error}" for s in sources
               if s.fmt == "not_a_trace"]
    sources = [s for s in sources if s.fmt != "not_a_trace"]
    loaded = _load_sources(root, kind, sources, ranks, cache, engine, client, workers,
                           progress)
    loaded.meta.notes.extend(skipped)
    if len(found) > 1:
        loaded.meta.notes.append(f"run: {chosen.label} (of {len(found)} runs found in "
                                 f"{root})")
        loaded.meta.extra["run"] = chosen.to_dict()
    if isinstance(loaded, Cluster):
        _note_apart(loaded)
    return loaded


def absolute_path(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute (``~`` expanded, ``..`` folded, against the current folder)
    before anything is read: every path a profile records (``meta.path``, the cache's
    entries, a journal's runs) then names the same files from any folder. A relative path
    stored once was shown as given ("mine/...") from every other folder, where it named
    nothing."""
    return Path(os.path.abspath(Path(path).expanduser()))


def _note_apart(cluster: Cluster) -> None:
    """A note when the loaded ranks look like separate runs after all (their recorded
    steps share no number, or their times do not overlap), which only parsing shows."""
    facts = [facts_from_meta(p.meta) for p in cluster.profiles]
    groups = group_runs(facts)
    if len(groups) > 1:
        apart = [sorted(cluster.profiles[i].meta.rank for i in g
                        if cluster.profiles[i].meta.rank is not None) for g in groups]
        cluster.meta.extra["apart"] = apart  # for a page to warn about (the dashboard)
        parts = "; ".join(str(g) for g in apart)
        cluster.meta.notes.append(
            f"run: these ranks look like {len(groups)} separate runs ({parts}: no common "
            "step number or time): load them apart with ranks=[...]")
        return
    said = _no_common_step(cluster)
    if said:
        cluster.meta.notes.append(said)


def _no_common_step(cluster: Cluster) -> str:
    """A note when the ranks' step tables share no step number (one rank recorded step 50,
    another step 51): each step's figures across ranks (its slowest rank, the spread over
    ranks) then come from a single rank, which the pages would not say. "" otherwise."""
    seen: dict[int, set] = {}
    for p in cluster.profiles:  # the numbers the loader kept: no table is read here
        numbers = set((p.meta.extra or {}).get("step_numbers") or ())
        if p.meta.rank is not None and numbers:
            seen[int(p.meta.rank)] = numbers
    if len(seen) < 2 or set.intersection(*seen.values()):
        return ""
    shown = "; ".join(f"rank {r}: {', '.join(str(int(s)) for s in sorted(v)[:3])}"
                      + (" ..." if len(v) > 3 else "") for r, v in sorted(seen.items())[:4])
    return (f"steps: no step number is recorded by every rank ({shown}): each step's "
            "figures across ranks (its slowest rank, the spread over ranks) come from the "
            "ranks that recorded it; check that the ranks recorded the same steps")


def _load_sources(root: Path, kind: str, sources: list[RankSource], ranks: Any, cache: bool,
                  engine: str, client: Any, workers: int | None, progress: bool | None
                  ) -> Profile | Cluster:
    """:func:`load` of the rank sources found (``sources``), ``ranks`` of them if given."""
    sources = select_ranks(root, sources, ranks)
    use_cache = bool(cache) and _cache_ok(root)
    if kind == "profile" and len(sources) == 1:
        profile, _ = _load_one(sources[0], use_cache)
        return profile
    if engine == "dask":
        from . import dask as dask_engine

        return dask_engine.load_cluster(root, sources, use_cache, client=client,
                                        workers=workers, progress=progress)
    return _load_cluster(root, sources, use_cache, workers, progress)


def select_ranks(root: Path, sources: list[RankSource], ranks: Iterable[int] | None
                 ) -> list[RankSource]:
    """The ``sources`` of the global ``ranks`` asked for (all when None).

    Raises
    ------
    ProfileError
        A rank asked for is not among the sources (the message lists those present).
    """
    wanted = None if ranks is None else sorted({int(r) for r in ranks})
    if wanted is None:
        return sources
    have = {s.rank for s in sources}
    missing = [r for r in wanted if r not in have]
    if missing:
        raise ProfileError(root, f"{plural(len(missing), 'rank')} {listed(missing)} "
                           "not found; ranks present: "
                           f"{sorted(r for r in have if r is not None)}")
    return [s for s in sources if s.rank in wanted]


def _cache_ok(root: Path) -> bool:
    return cache.usable_for(root)


def _load_one(source: RankSource, use_cache: bool) -> tuple[Profile, bool]:
    key = None
    if use_cache:
        key = _key(source)
        hit = cache.read(key, reparse=_reparse(source))
        if hit is not None:
            return hit, True
    meta, tables = parse_source(source)
    if use_cache and key is not None:
        cache.write(key, meta, tables)
    return Profile(meta, tables), False


def _load_cluster(root: Path, sources: Sequence[RankSource], use_cache: bool,
                  workers: int | None, progress: bool | None) -> Cluster:
    profiles: list[Profile] = []
    failed: dict[Any, str] = {}
    todo: list[RankSource] = []
    for s in sources:
        if use_cache and s.fmt != "unreadable":
            hit = cache.read(_key(s), reparse=_reparse(s))
            if hit is not None:
                profiles.append(hit)
                continue
        todo.append(s)
    size = input_bytes(todo)
    if workers is None:
        workers = 1 if size < _PARALLEL_MIN_BYTES else min(len(todo), os.cpu_count() or 1)
    workers = max(1, min(int(workers), len(todo) or 1))
    show = (len(todo) > 1) if progress is None else bool(progress)
    bar = Progress(len(todo), f"perfkit: loading {len(todo)} rank{'s' * (len(todo) != 1)}",
                   enabled=show and bool(todo))
    try:
        if workers == 1:
            for s in todo:
                _collect(s, lambda s=s: _work(s, use_cache), profiles, failed, bar)
        else:
            # imported here: a cached reopen or a one-rank load starts no process
            from concurrent.futures import ProcessPoolExecutor, as_completed
            from multiprocessing import get_context

            # fork starts workers fast and works from scripts, stdin and notebooks alike;
            # platforms without it (Windows, macOS default) use spawn
            method = "fork" if sys.platform.startswith("linux") else "spawn"
            ctx = get_context(method)
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {pool.submit(_work, s, use_cache, True): s for s in todo}
                for fut in as_completed(futures):
                    _collect(futures[fut], fut.result, profiles, failed, bar)
    finally:
        bar.close(f"{len(failed)} not loaded (see the notes)" if failed else "")
    if not profiles:
        first = next(iter(failed.values()), "no rank could be read")
        raise ProfileError(root, f"no rank could be loaded; first error: {first}")
    return Cluster(profiles, cluster_meta(root, profiles, failed), failed)


def _collect(source: RankSource, run: Any, profiles: list[Profile], failed: dict[Any, str],
             bar: Progress) -> None:
    label = source.rank if source.rank is not None else source.path
    try:
        _, meta, payload = run()
        profiles.append(_profile_from(meta, payload, source))
        bar.update(1, f"rank {label}")
    except PerfkitError as exc:
        failed[label] = str(exc)
        bar.update(1, f"rank {label} failed")
    except Exception as exc:  # noqa: BLE001 - a damaged rank must not sink the cluster
        failed[label] = f"{source.path}: unexpected {type(exc).__name__}: {exc}"
        bar.update(1, f"rank {label} failed")
