"""The job of a profile in perfkit's cache, kept beside it: a second open gets it at once.

Working out the job (:func:`perfkit.infer_job`) reads the operator shapes of every task:
about 2 s on a 1.1 GB Kineto pair, once its tables are read back from the cache in a
fraction of a second. The job depends only on those tables and on perfkit's code, so
:func:`stored_infer_job` keeps it in the cache (``jobs/<key>.pickle`` under
:func:`perfkit.io.cache.store.cache_root`), keyed by:

- the cache entry of every rank (:func:`perfkit.io.cache.store.entry_key`: the format, the files'
  paths, sizes and modification times, and the parsing code), so that other files, or
  changed ones, have another key;
- a hash of the source of every perfkit module (:func:`code_fingerprint`), so that a
  change anywhere in the rules gives another key, even within one version.

A job is kept only for a profile every rank of which is in the cache (a profile read
without the cache, ``PERFKIT_CACHE=0``, is worked out every time), and read back only
when it unpickles as a :class:`~perfkit.job.Job`; anything else (a damaged file, a
foreign object) is worked out again and written over. Nothing is written beside the
user's files.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from .core import Job
from .infer import infer_job

__all__ = ["stored_infer_job", "job_key", "code_fingerprint", "JOB_FOLDER"]

#: Folder of the kept jobs under the cache root.
JOB_FOLDER = "jobs"


@functools.cache
def code_fingerprint() -> str:
    """Hash of the source of every perfkit module and of its version (read once per
    process: :func:`perfkit.io.cache.store.source_hash`)."""
    from .._version import __version__
    from ..io.cache.store import source_hash

    return f"{source_hash(('.',))}-{__version__}"


def job_key(path: str | os.PathLike[str], run: Any = None) -> str | None:
    """The key of the job of the profile at ``path`` (``run``: as for :func:`perfkit.load`),
    or None where no job is kept: the cache is off or inside the folder, a rank is not in
    the cache, the folder holds several runs and ``run`` picks none, or the path cannot be
    read (the load says why)."""
    from ..io.cache import store as cache
    from ..io.detect.runs import pick_run
    from ..io.engines.local import _key, find_runs

    try:
        root = Path(path).expanduser()
        if not cache.usable_for(root):
            return None
        kind, found = find_runs(root)
        if kind == "cluster_analysis_output" or not found or (len(found) > 1 and run is None):
            return None
        chosen = found[0] if run is None else pick_run(found, run, root, ValueError)
        sources = [s for s in chosen.sources if s.fmt not in ("not_a_trace", "unreadable")]
        keys = sorted(_key(s) for s in sources)
        if not keys or not all(cache.entry_path(k).is_dir() for k in keys):
            return None
    except Exception:  # noqa: BLE001 - no key: the job is worked out as always
        return None
    return hashlib.sha256("\n".join([*keys, code_fingerprint()]).encode()).hexdigest()[:32]


def _job_file(key: str) -> Path:
    from ..io.cache.store import cache_root

    return cache_root() / JOB_FOLDER / f"{key}.pickle"


def stored_infer_job(profile: Any, path: str | os.PathLike[str], run: Any = None) -> Job:
    """:func:`perfkit.infer_job` of ``profile``, loaded from ``path`` (and ``run``), kept
    in perfkit's cache and read back from it the next time (module docstring).

    Parameters
    ----------
    profile : Profile or Cluster
        What :func:`perfkit.load` gave for ``path``.
    path : path-like
        The profile's folder or file, as given to :func:`perfkit.load`.
    run : int, str or Run, optional
        As given to :func:`perfkit.load`.

    Returns
    -------
    Job
        The same job :func:`perfkit.infer_job` gives.
    """
    key = job_key(path, run)
    if key is None:
        return infer_job(profile)
    target = _job_file(key)
    try:
        job = pickle.loads(target.read_bytes())
        if isinstance(job, Job):
            return job
    except Exception:  # noqa: BLE001 - none kept, or damaged: work it out again
        pass
    job = infer_job(profile)
    _keep(job, target)
    return job


def _keep(job: Job, target: Path) -> None:
    """Write ``job`` to ``target`` whole or not at all (a temporary file, then renamed)."""
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(job, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
        tmp = None
    except Exception:  # noqa: BLE001 - a read-only cache: the job given is still right
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
