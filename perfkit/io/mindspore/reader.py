"""The legacy MindSpore profiler's contract with perfkit (:mod:`perfkit.io.readers`).

Detection is the built-in one of :mod:`perfkit.io.detect.paths` (the ``*_{rank}`` file names
of a flat ``profiler/`` folder). MindSpore's CPU runs are written in the Ascend text layout
and read with it (:mod:`perfkit.io.ascend.text` calls :mod:`.cpu`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...profile import ProfileMeta
from ..detect.sources import RankSource

__all__ = ["read_legacy_rank"]


def read_legacy_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One rank of a legacy profiler folder: :func:`.legacy.parse`."""
    from .legacy import parse

    return parse(Path(source.path), source.rank)
