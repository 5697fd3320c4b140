"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_samples import shared_root


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
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0")
    client = distributed.Client(lc, set_as_default=False)
    try:
        with client.as_current():
            yield client
    finally:
        client.close()
        lc.close()
        mp.undo()


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each test file on one pytest-xdist worker, except the notebook executions.

    Under ``--dist loadgroup`` (the README's test command) tests with one ``xdist_group`` run
    on one worker. Many files share an expensive module-scoped fixture (a loaded cluster, a
    Dask client, a served dashboard), so a file's tests stay together; the notebook
    executions (marker ``notebooks``) each start their own kernel and share nothing, so
    they are spread over the workers. Without ``-n`` this changes nothing.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") or item.get_closest_marker("notebooks"):
            continue
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
