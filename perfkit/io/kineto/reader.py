"""The Kineto trace's contract with perfkit (:mod:`perfkit.io.readers`): read one rank.

Detection is the built-in one of :mod:`perfkit.io.detect.paths` (a ``.json`` or
``.json.gz`` file no other format claims), early steps
:func:`perfkit.io.preview.kineto.kineto_rank_steps`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...profile import ProfileMeta
from ..detect.sources import RankSource

__all__ = ["read_rank"]


def read_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One rank's trace: :func:`perfkit.io.kineto.parse`."""
    from . import parse

    return parse(Path(source.path))
