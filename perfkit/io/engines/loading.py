"""``perfkit.load``: :func:`perfkit.io.engines.local.load`, or with ``wait=False`` the profile at
once and its tables when a background parse ends.

``load(path)`` (``wait=True``, the default) is :func:`perfkit.io.engines.local.load`: it returns
once the whole profile is parsed.

A profile of a gigabyte takes seconds to parse. ``load(path, wait=False)`` only finds the
ranks (what ``load`` does before parsing: milliseconds), starts a daemon thread and returns
a :class:`LoadingProfile` (one rank) or a :class:`LoadingCluster` (several): subclasses of
:class:`~perfkit.Profile` and :class:`~perfkit.Cluster`, with the same attributes. The
thread

1. reads the steps alone (:func:`perfkit.io.preview.steps.preview`: small files, a fraction of a
   second), unless every rank is in perfkit's cache already (the load is then quick);
2. runs ``load(path, ...)`` with the same arguments, as ``wait=True`` does: the same
   tables, the same errors, the cache written the same way.

Meanwhile:

- ``steps`` is served from step 1 when the preview read it as the parse will
  (:attr:`~perfkit.io.preview.steps.Preview.steps_final`: Ascend ``step_trace_time.csv``,
  msprof-analyze's ``cluster_step_trace_time.csv``); otherwise (the quick reading of a
  Kineto trace, its host ``ProfilerStep`` spans, is not the device steps the parse gives)
  it waits like the rest. Once the parse has ended, ``steps`` is the loaded table: the same
  rows, less those of a rank of a Cluster that failed to load;
- every other table, ``meta``, and a Cluster's ``profiles``, ``ranks``, ``failed``,
  ``len()``, iteration and ``cluster[rank]`` wait for the parse: never an empty table in
  the meantime;
- when the parse fails, every access that waits raises its error, the same
  :class:`~perfkit.PerfkitError` that ``wait=True`` raises;
- ``done``, ``loading`` (a :class:`Loading`: stage, seconds so far and expected, fraction,
  the preview, the error) and ``repr`` never wait; ``wait(timeout)`` waits up to
  ``timeout``.

What is known before parsing is raised by the call itself, as with ``wait=True``: a path
that does not exist or holds no profile, a folder of several runs without ``run``
(:class:`~perfkit.RunsFound`), a ``run`` or ``ranks`` not found. ``engine="dask"`` is
refused: its Cluster's tables are lazy frames already.

The thread is a daemon: a script that ends before the parse stops it. Cache entries are
written to a temporary folder and renamed into place (:mod:`perfkit.io.cache.store`), so an
interrupted parse leaves no entry, never half of one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from ...bundled_samples import resolve_sample
from ...errors import InvalidArgumentError, ProfileError, RunNotFoundError, RunsFound, boundary
from ...format import bytes_text
from ...profile import Cluster, Profile, ProfileMeta
from ..detect.runs import pick_run
from . import local as detect

__all__ = ["load", "Loading", "LoadingProfile", "LoadingCluster", "expected_seconds",
           "record_rate", "DEFAULT_RATE_BYTES_PER_S"]

#: Reading rate (bytes per second) assumed before any load was timed in this process:
#: about what the loaders reach on two busy cores (benchmarks/README.md: a 1.1 GB Kineto
#: pair in 8 s, a 0.87 GB Ascend rank in 6 s).
DEFAULT_RATE_BYTES_PER_S = 100e6

_rate = [DEFAULT_RATE_BYTES_PER_S]  # the last measured rate


def expected_seconds(input_bytes: int, cached: bool = False) -> float:
    """Seconds a load of ``input_bytes`` is expected to take: the size over the last rate
    measured in this process (:func:`record_rate`; :data:`DEFAULT_RATE_BYTES_PER_S` before
    any), at least one second; one second when every rank is cached."""
    if cached:
        return 1.0
    return max(input_bytes / _rate[0], 1.0)


def record_rate(input_bytes: int, seconds: float) -> None:
    """Remember the rate of a load that parsed ``input_bytes`` in ``seconds`` (the next
    estimates use it)."""
    if seconds > 0 and input_bytes:
        _rate[0] = max(input_bytes / seconds, 1e6)


class Loading:
    """A profile being parsed on a background thread (see the module docstring).

    Attributes
    ----------
    path : str
        The path given to ``load``.
    cluster : bool
        The parse gives a Cluster (else a Profile).
    stage : str
        ``"steps"`` (reading the steps alone), ``"reading"`` (the full parse), ``"done"``
        or ``"failed"``.
    preview : perfkit.io.preview.steps.Preview or None
        What step 1 read (the steps, the size of the files, whether they are cached); None
        before it ends or when it could not read them (the parse then says why). Its
        ``profile`` holds the quick reading even when it is not the final table (a Kineto
        trace's host step spans).
    input_bytes : int or None
        Size of the files the parse reads, once step 1 has found it.
    cached : bool
        Every rank is in the cache: the parse reads it back.
    error : BaseException or None
        Why the parse failed (what the first access that waits raises).
    seconds : float or None
        How long the whole load took, once it has ended.
    """

    def __init__(self, path: str, cluster: bool) -> None:
        self.path = path
        self.cluster = cluster
        self.stage = "steps"
        self.preview: Any = None
        self.input_bytes: int | None = None
        self.cached = False
        self.error: BaseException | None = None
        self._traceback: Any = None  # the error's, as the parse raised it
        self.seconds: float | None = None
        self.started = time.perf_counter()
        self._steps: pd.DataFrame | None = None
        self._result: Profile | Cluster | None = None
        self._previewed = threading.Event()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- asking without waiting ------------------------------------------------------
    @property
    def done(self) -> bool:
        """True once the parse has ended (loaded or failed)."""
        return self._ended.is_set()

    @property
    def steps_early(self) -> bool:
        """True when ``steps`` can be read before the parse ends (it is the parse's table)."""
        return self._steps is not None

    @property
    def elapsed_s(self) -> float:
        """Seconds since ``load`` was called (the whole load's, once it has ended)."""
        return self.seconds if self.seconds is not None else \
            time.perf_counter() - self.started

    @property
    def expected_s(self) -> float | None:
        """Seconds the whole load is expected to take (an estimate from the size, see
        :func:`expected_seconds`); None before the size is known."""
        if self.input_bytes is None:
            return None
        return expected_seconds(self.input_bytes, self.cached)

    @property
    def fraction(self) -> float:
        """Progress between 0 and 1: elapsed over expected seconds, at most 0.95 before
        the end (an estimate: the parse reports no progress of its own); 1 once ended."""
        if self.done:
            return 1.0
        expected = self.expected_s
        if expected is None:
            return 0.0
        return min(self.elapsed_s / expected, 0.95)

    def describe(self) -> str:
        """One sentence for people: how far the load is."""
        elapsed = self.elapsed_s
        if self.stage == "done":
            return f"{self.path} loaded in {elapsed:.1f} s"
        if self.stage == "failed":
            return f"{self.path} failed to load after {elapsed:.1f} s: {self.error}"
        if self.stage == "steps" or self.input_bytes is None:
            return f"reading the steps of {self.path} ({elapsed:.1f} s so far)"
        if self.cached:
            return f"reading {self.path} back from the cache ({elapsed:.1f} s so far)"
        expected = self.expected_s or 0.0
        left = expected - elapsed
        guess = (f"about {left:.0f} s left (an estimate from the size)" if left >= 1
                 else "under a second left (an estimate from the size)" if left > 0
                 else "longer than estimated from the size")
        return (f"reading {bytes_text(self.input_bytes)} of {self.path}: {elapsed:.1f} s "
                f"so far, {guess}")

    def __repr__(self) -> str:
        return f"Loading({self.describe()})"

    # ---- waiting -----------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the parse to end (at most ``timeout`` seconds).

        Returns
        -------
        bool
            True when it has loaded; False when ``timeout`` passed first.

        Raises
        ------
        PerfkitError
            The parse failed (its error).
        """
        if not self._ended.wait(timeout):
            return False
        if self.error is not None:
            self._raise()
        return True

    def result(self) -> Profile | Cluster:
        """The loaded Profile or Cluster (what ``load(..., wait=True)`` returns), once the
        parse has ended; raises its error when it failed."""
        self.wait()
        assert self._result is not None
        return self._result

    def _raise(self) -> NoReturn:
        error = self.error
        assert error is not None
        # the traceback of the parse, not one grown by every access that raised it
        raise error.with_traceback(self._traceback)

    def early_steps(self) -> pd.DataFrame | None:
        """The steps served before the parse ends: None when they are not (or no longer:
        the loaded table is then read). Waits for step 1, a fraction of a second."""
        if self.done:
            return None
        self._previewed.wait()
        return None if self.done else self._steps

    # ---- the thread ----------------------------------------------------------------------
    def start(self, path: str, run: Any, ranks: list[int] | None,
              options: dict[str, Any]) -> None:
        """Start the thread that reads the steps, then loads (see the module docstring)."""
        self._thread = threading.Thread(target=self._run, name="perfkit-load", daemon=True,
                                        args=(path, run, ranks, options))
        self._thread.start()

    def _run(self, path: str, run: Any, ranks: list[int] | None,
             options: dict[str, Any]) -> None:
        try:
            self._read_steps(path, run, ranks, bool(options.get("cache", True)))
        finally:
            self._previewed.set()
        self.stage = "reading"
        t0 = time.perf_counter()
        try:
            loaded = detect.load(path, ranks, run=run, **options)
        except BaseException as exc:  # noqa: BLE001 - raised by the first access that waits
            self.error, self._traceback = exc, exc.__traceback__
            self.stage = "failed"
        else:
            self._result = loaded
            if not self.cached and self.input_bytes:
                record_rate(self.input_bytes, time.perf_counter() - t0)
            self.stage = "done"
        finally:
            self.seconds = time.perf_counter() - self.started
            self._ended.set()

    def _read_steps(self, path: str, run: Any, ranks: list[int] | None,
                    use_cache: bool) -> None:
        """Step 1: the size, whether it is cached, and the steps when the preview reads
        them as the parse will. Any failure here is left to the parse to report."""
        # imported here, not at the top: a plain ``load`` (a cached reopen above all)
        # does not pay for the preview's Kineto scanners (about 35 ms)
        from ..preview.steps import preview

        try:
            found = preview(path, run=run, read_steps=False)
            self.input_bytes, self.cached = found.input_bytes, found.cached and use_cache
            self.preview = found
            if self.cached:
                return  # read back from the cache, the whole profile comes in a moment
            found = preview(path, run=run)
            self.preview = found
        except Exception:  # noqa: BLE001 - the parse says what is wrong, as always
            return
        if found.steps_final and found.profile is not None:
            self._steps = self._steps_of(found.profile, ranks)

    def _steps_of(self, quick: Profile | Cluster, ranks: list[int] | None
                  ) -> pd.DataFrame | None:
        """The preview's steps shaped as the parse's ``steps`` (the ranks asked for, in the
        same kind of object), or None when they cannot be."""
        if not self.cluster:
            return None if isinstance(quick, Cluster) else quick.steps
        if not isinstance(quick, Cluster):
            return None
        steps = quick.steps
        if ranks is None:
            return steps
        if not set(ranks) <= set(quick.ranks):
            return None
        return steps[steps["rank"].isin(ranks).to_numpy()].reset_index(drop=True)


class _Background:
    """What :class:`LoadingProfile` and :class:`LoadingCluster` share: tables, ``meta``,
    ``done`` and ``wait`` answered from their :class:`Loading`."""

    loading: Loading

    @property
    def meta(self) -> ProfileMeta:
        """Facts about the profile (waits for the parse)."""
        return self.loading.result().meta

    @property
    def done(self) -> bool:
        """True once the parse has ended (loaded or failed); never waits."""
        return self.loading.done

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the parse (see :meth:`perfkit.Profile.wait`)."""
        return self.loading.wait(timeout)

    def _table(self, name: str) -> pd.DataFrame:
        early = self.loading.early_steps() if name == "steps" else None
        if early is not None:
            return early
        return self.loading.result()._table(name)

    def _describe(self, kind: str) -> str:
        loading = self.loading
        if loading.stage == "done":
            return repr(loading.result())
        if loading.stage == "failed":
            return f"{kind}(failed to load: {loading.error})"
        return f"{kind}(loading {loading.path!r}: {loading.stage}, {loading.elapsed_s:.1f} s)"


class LoadingProfile(_Background, Profile):
    """A :class:`~perfkit.Profile` parsed on a background thread (``load(..., wait=False)``;
    see :mod:`perfkit.io.engines.loading`)."""

    def __init__(self, loading: Loading) -> None:  # noqa: D107 - see the class
        self.loading = loading
        self._cache: dict[str, pd.DataFrame] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return self._describe("Profile")


class LoadingCluster(_Background, Cluster):
    """A :class:`~perfkit.Cluster` parsed on a background thread (``load(..., wait=False)``;
    see :mod:`perfkit.io.engines.loading`). ``profiles``, ``failed`` (and so ``ranks``, ``len()``,
    iteration, ``cluster[rank]``) wait for the parse."""

    def __init__(self, loading: Loading) -> None:  # noqa: D107 - see the class
        self.loading = loading
        self._cache: dict[str, pd.DataFrame] = {}
        self._lock = threading.RLock()

    @property
    def profiles(self) -> list[Profile]:  # type: ignore[override]
        """The ranks that loaded (waits for the parse)."""
        return self._loaded().profiles

    @property
    def failed(self) -> dict[Any, str]:  # type: ignore[override]
        """``{rank or path: error}`` of the ranks that could not be read (waits)."""
        return self._loaded().failed

    def _loaded(self) -> Cluster:
        loaded = self.loading.result()
        assert isinstance(loaded, Cluster)
        return loaded

    def __repr__(self) -> str:
        return self._describe("Cluster")


_WAIT_DOC = """    wait : bool, default True
        False: return at once (after finding the ranks, milliseconds) a Profile or Cluster
        whose parse runs on a background thread, as ``wait=True`` parses (same tables,
        same errors, the cache written the same way). ``steps`` is served before the parse
        ends when small files give the parse's own table (Ascend ``step_trace_time.csv``,
        msprof-analyze's ``cluster_step_trace_time.csv``); every other table, ``meta`` and
        a Cluster's ranks wait for it. What is found before parsing (no such path, several
        runs, ``run`` or ``ranks`` not found) is raised here; an error of the parse is
        raised by the first access that waits. ``done``, ``wait(timeout)`` and
        ``loading`` (progress, the error) ask without blocking. No terminal progress bar
        unless ``progress=True``. Local engine only. See :mod:`perfkit.io.engines.loading` and
        docs/loading.md.
"""


@boundary(ProfileError, path_arg="path", what="a profile")
def load(path: str | os.PathLike[str], ranks: Iterable[int] | None = None, cache: bool = True,
         engine: str | None = None, client: Any = None, *, run: Any = None,
         workers: int | None = None, progress: bool | None = None,
         wait: bool = True) -> Profile | Cluster:
    # the docstring is detect.load's with ``wait`` added (below): one text for both
    if wait:
        return detect.load(path, ranks, cache, engine, client, run=run, workers=workers,
                           progress=progress)
    detect.checked_path(path)
    wanted = detect.checked_ranks(ranks)
    path = detect.absolute_path(resolve_sample(path))
    if detect.checked_engine(engine) != "local":
        given = "" if engine is not None else " ($PERFKIT_ENGINE=dask: pass engine='local')"
        raise InvalidArgumentError(
            "engine", "wait=False parses with the local engine only; engine='dask' "
            f"returns a Cluster of lazy frames already{given}", engine or "dask")
    root = Path(path).expanduser()
    kind, found = detect.find_runs(path)
    cluster = True
    if kind != "cluster_analysis_output":
        if len(found) > 1 and run is None:
            raise RunsFound(root, found)
        chosen = found[0] if run is None else pick_run(found, run, root,
                                                       RunNotFoundError.among(found))
        sources = detect.select_ranks(
            root, [s for s in chosen.sources if s.fmt != "not_a_trace"], wanted)
        cluster = not (kind == "profile" and len(sources) == 1)
    loading = Loading(str(path), cluster)
    loading.start(str(path), run, wanted, {"cache": cache, "engine": "local",
                                           "workers": workers, "progress": bool(progress)})
    return LoadingCluster(loading) if cluster else LoadingProfile(loading)


def _with_wait(doc: str) -> str:
    """``detect.load``'s docstring with the ``wait`` parameter after the others."""
    at = doc.index("\n    Returns\n    -------")
    return doc[:at] + "\n" + _WAIT_DOC.rstrip("\n") + doc[at:]


load.__doc__ = _with_wait(detect.load.__doc__ or "")
