"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_samples import samples_dir, shared_root


def _cache_of_this_run(config: pytest.Config) -> None:
    """perfkit's parse cache in a folder of this run (shared by its xdist workers, which
    inherit the variable), not the user's ``~/.cache/perfkit``: what a test reads is parsed
    by the code under test, never served from an earlier run's entries."""
    if hasattr(config, "workerinput"):
        return
    folder = tempfile.mkdtemp(prefix="perfkit-test-cache-")
    os.environ["PERFKIT_CACHE_DIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.fixture(scope="module")
def dask_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An in-process Dask client (2 workers) with perfkit's cache in a temporary folder.

    The client is current while the module's tests run; tests that need Dask are skipped
    where it is not installed.
    """
    pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    mp = pytest.MonkeyPatch()
    mp.setenv("PERFKIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.delenv("PERFKIT_CACHE", raising=False)
    mp.setenv("PERFKIT_DASK_PANDAS_MB", "0")  # the small test jobs keep lazy tables
    from dask_settings import quiet_cluster  # no stack sampler and monitors (see there)

    lc = quiet_cluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address=":0")
    client = distributed.Client(lc, set_as_default=False)
    try:
        with client.as_current():
            yield client
    finally:
        client.close()
        lc.close()
        mp.undo()


@pytest.fixture(scope="module", autouse=True)
def _raw_traces_of_the_module() -> Iterator[None]:
    """The traces that ``tests/raw_kineto.py`` parsed for a module's tests are shared by
    them, then dropped (:func:`raw_kineto.forget`): hundreds of MB for the shared samples,
    which the worker's next files should not carry."""
    yield
    kept = sys.modules.get("raw_kineto")
    if kept is not None:
        kept.forget()


@pytest.fixture(scope="session")
def shared_samples() -> Path:
    """The folder of other projects' real profiles (``shared/samples`` beside the checkout,
    or ``$PERFKIT_SHARED_SAMPLES``); see ``tests/shared_samples.py``.

    Skips the test with the reason when the folder is absent (a lone clone), fails it under
    CI (``$CI`` set), where the folder must be there.
    """
    return shared_root()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``shared_samples`` reads other projects' profiles from
    ``shared/samples``: before its fixtures, skip it (under CI: fail it) when they are absent.
    """
    if item.get_closest_marker("shared_samples"):
        shared_root()


#: Tests spread one by one over the xdist workers (they share no fixture): the notebook
#: executions, each in its own kernel.
SPREAD = ("tests/test_notebooks.py::",)
#: Folders (or file-name prefixes) whose test files share session fixtures, so one worker
#: runs them all (tests/lab: the packs of tests/lab/conftest.py; its modules say so with
#: ``xdist_group("lab")`` too; the two tests/browser/test_dashboard_* files: the served
#: default dashboard of tests/browser/conftest.py, started once for both).
SHARED_FOLDERS = {"tests/lab/": "lab",
                  "tests/browser/test_dashboard_": "tests/browser/test_dashboard_*"}
#: Folders whose files take longest (a served dashboard and a browser each): started first.
FIRST = ("tests/browser/",)


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to under ``--dist loadgroup``: its file, its folder
    (:data:`SHARED_FOLDERS`), its own (:data:`SPREAD`), or the ``xdist_group`` that
    pytest-xdist wrote into the node id (``…@name``) where it still can."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    if nodeid.startswith(SPREAD):
        return nodeid
    path = nodeid.split("::", 1)[0]
    return next((g for folder, g in SHARED_FOLDERS.items() if path.startswith(folder)), path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup`` (the README's test command), one worker runs each test
    file, so the file's module-scoped fixtures (a loaded cluster, a Dask client, a served
    dashboard and its browser) are made once; the notebook executions, which share
    nothing, spread over the workers and fill the end, so both workers finish together.

    pytest-xdist groups by the ``xdist_group`` marks it writes into the node ids on the
    workers, which pytest 9.2 no longer lets it do (pytest-xdist issue 1386): the groups
    are read from the node ids here instead (:func:`xdist_scope`). Work starts with the
    browser files, then the files with most tests, and ends with the spread tests. Without
    ``-n``, or with another ``--dist``, this changes nothing.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    def priority(unit: tuple[str, dict[str, bool]]) -> tuple[int, int]:
        scope, tests = unit
        return (0 if scope.startswith(FIRST) else 2 if scope.startswith(SPREAD) else 1,
                -len(tests))

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not getattr(self, "ordered", False):  # the first assignment: the whole queue
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=priority))
                self.ordered = True
            super()._assign_work_unit(node)

    return FileScheduling(config, log)


#: Plural nouns that a count of one must not take ("1 devices").
_PLURALS = ("devices|ranks|steps|calls|layers|runs|chains|kernels|operators|links|stages|"
            "micro-batches|heads|sequences|tokens|findings|groups|events|rows|files|nodes|"
            "samples|tasks|values|lines|columns|servers|shapes|components|patterns|"
            "occurrences|copies|lookups|up-projections|blocks|rects|GPUs|NPUs|folders|"
            "references|collectives|transfers|threads|streams|kernel launches|entries|"
            "seconds|minutes|hours|sizes")
#: (rule, pattern) of what generated text must never contain.
GRAMMAR_RULES: tuple[tuple[str, Any], ...] = tuple((name, __import__("re").compile(rx)) for
                                                   name, rx in (
    ("a count of one with a plural noun", rf"(?<![\w.,−-])1 (?:{_PLURALS})\b"),
    ("a plural written as (s)", r"\w\((?:s|es)\)"),
    ("a size in a unit too large (below 1 of it)", r"(?<![\w.,])0\.\d+\s?(?:KiB|MiB|GiB|TiB)\b"),
    ("a missing value written as nan, inf or <NA>",
     r"(?<![\w.])(?:nan|NaN|inf|<NA>|NaT)(?![\w])"),
    ("a doubled word", r"(?i)\b([a-z]{2,})\s+\1\b"),
    ("two articles in a row", r"(?i)\b(?:a|an|the)\s+(?:a|an|the)\b"),
    ("an adjective before an article", r"\b(?:complete|whole|full)\s+(?:a|an)\b"),
))


def grammar_problems(text: str) -> list[str]:
    """What in ``text`` breaks a rule of :data:`GRAMMAR_RULES`, one line per hit."""
    out = []
    for name, pattern in GRAMMAR_RULES:
        for m in pattern.finditer(text):
            a, b = max(0, m.start() - 50), min(len(text), m.end() + 50)
            out.append(f"{name}: {m.group(0)!r} in …{text[a:b]}…")
    return out


@pytest.fixture(scope="session")
def grammar() -> Any:
    """:func:`grammar_problems`, for tests that check generated text."""
    return grammar_problems


#: What SQLite leaves beside a database opened for writing, or opened read-only without
#: ``immutable=1`` while it is in WAL mode (``ascend_pytorch_profiler_*.db`` is).
_SQLITE_SIDE = ("-wal", "-shm", "-journal")
_side_files_before: set[Path] = set()


def _sqlite_side_files() -> set[Path]:
    root = samples_dir()
    if root is None:
        return set()
    return {p for p in root.rglob("*") if p.name.endswith(_SQLITE_SIDE)}


def pytest_configure(config: pytest.Config) -> None:
    """perfkit's parse cache in a folder of this run (:func:`_cache_of_this_run`); and
    compile perfkit's modules once, before the workers start, where Python will not.

    With ``PYTHONDONTWRITEBYTECODE`` set (as on some build machines, CI's among them), no
    process writes ``__pycache__``, and perfkit is installed editable from this checkout:
    every process the suite starts — each xdist worker, notebook kernel, Voila kernel and
    ``perfkit`` subprocess, over a hundred in all — would compile the ~330 modules it
    imports from source again (about 0.5-0.8 s of CPU each; installed packages were
    compiled by pip). :func:`compileall.compile_dir` writes the bytecode that Python then
    only reads (``__pycache__`` is git-ignored; the wheel takes ``.py`` files only). Done
    once, by the controlling process; nothing is written for an installed perfkit.
    """
    _cache_of_this_run(config)
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode:
        return
    import compileall

    import perfkit
    package = Path(perfkit.__file__).resolve().parent
    if package.parent == Path(__file__).resolve().parents[1]:  # this checkout's own perfkit
        compileall.compile_dir(package, quiet=1)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note the SQLite side files already beside the shared samples (none, normally)."""
    if not hasattr(session.config, "workerinput"):
        _side_files_before.update(_sqlite_side_files())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test left SQLite side files beside the shared samples: the
    samples are other projects' files, which no test may change; a raw reading of a
    database opens it ``file:...?mode=ro&immutable=1`` (as the loader does)."""
    if hasattr(session.config, "workerinput"):
        return
    new = sorted(_sqlite_side_files() - _side_files_before)
    if new:
        print("\nA test wrote beside the shared samples (open databases with "
              "?mode=ro&immutable=1): " + ", ".join(map(str, new)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
