"""Lab packs made once for every test of tests/lab.

Every test module here marks itself ``xdist_group("lab")``, so under ``--dist loadgroup``
one worker runs them all and makes the packs once.

``intro_pack``: six students at level intro, made by two worker processes (the path a
class takes); ``advanced_pack``: two students at level advanced, made in this process.
The packs are shared: tests that answer questions copy a student folder first, or use
their own pack.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import perfkit as pk

INTRO_SEED, INTRO_STUDENTS = 11, 6
ADVANCED_SEED, ADVANCED_STUDENTS = 5, 2


@pytest.fixture(scope="session")
def intro_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack of six intro students (seed 11), made with two worker processes."""
    return pk.lab.make(tmp_path_factory.mktemp("lab") / "intro", students=INTRO_STUDENTS,
                       seed=INTRO_SEED, workers=2, progress=False)


@pytest.fixture(scope="session")
def advanced_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack of two advanced students (seed 5), made in this process."""
    return pk.lab.make(tmp_path_factory.mktemp("lab") / "advanced",
                       students=ADVANCED_STUDENTS, seed=ADVANCED_SEED, level="advanced",
                       workers=1, progress=False)
