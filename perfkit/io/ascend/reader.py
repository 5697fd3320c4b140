"""The Ascend exports' contract with perfkit (:mod:`perfkit.io.readers`): read one rank.

Three formats: a rank's text export (:mod:`.text`), its DB export (:mod:`.db`) and a
standalone ``trace_view.json``. Their detection is the built-in one of
:mod:`perfkit.io.detect.paths` (the layouts of the Ascend profilers' folders), their early
steps :func:`perfkit.io.preview.ranks.ascend_text_steps`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...profile import ProfileMeta
from ..detect.sources import RankSource

__all__ = ["read_text_rank", "read_db_rank", "read_trace_view_rank"]


def read_text_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One rank of a text export (``*_ascend_pt`` / ``*_ascend_ms``): :func:`.text.parse`."""
    from .text import parse

    return parse(Path(source.path))


def read_db_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One rank of a DB export: :func:`.db.parse`."""
    from .db import parse

    return parse(Path(source.path))


def read_trace_view_rank(source: RankSource) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """A standalone ``trace_view.json``: :func:`.text.parse_trace_view`."""
    from .text import parse_trace_view

    return parse_trace_view(Path(source.path))
