"""Importing perfkit makes Arrow allocate with the system allocator, unless the user chose.

Each case runs in a fresh interpreter: the pool is chosen once, at import.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = ("import pyarrow as pa; before = pa.default_memory_pool().backend_name; "
          "import perfkit; print(before, pa.default_memory_pool().backend_name)")


def _pools(**env: str) -> tuple[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("ARROW_DEFAULT_MEMORY_POOL", "PERFKIT_ARROW_POOL")}
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env},
                         capture_output=True, text=True, check=True, timeout=120)
    before, after = out.stdout.split()
    return before, after


def test_perfkit_allocates_with_the_system_allocator_by_default() -> None:
    assert _pools()[1] == "system"


@pytest.mark.parametrize("backend", ["mimalloc", "jemalloc"])
def test_a_pool_the_user_chose_is_kept(backend: str) -> None:
    before, after = _pools(ARROW_DEFAULT_MEMORY_POOL=backend)
    assert after == before  # whatever pyarrow made of the user's choice, perfkit keeps it


def test_perfkit_leaves_pyarrow_alone_when_asked() -> None:
    before, after = _pools(PERFKIT_ARROW_POOL="keep")
    assert after == before
