"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


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
