"""What :func:`perfkit.io.ascend.text.parse` knows of an Ascend rank before its tables, and
the copies of what it read that the tables handed over early are assembled from
(:mod:`perfkit.io.preview.tables_first`): kept apart so that the rank's assembly stays one
module of one job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

__all__: list[str] = []  # private to perfkit.io.ascend.text


@dataclass(frozen=True)
class _RankFacts:
    """What :func:`parse` reads of a rank before its tables: its folders and side files."""

    out: Path
    rank_dir: Path
    infos: list[Path]
    info: dict[str, Any]
    metadata: dict[str, Any]
    framework: str | None
    rank: int | None
    groups: dict[str, Any]
    level: str | None


def _copies(raw: dict[str, Any], mem_parts: dict[str, pd.DataFrame], ns: dict[str, pa.Array],
            files: dict[str, list[str]], notes: list[str]) -> tuple[Any, ...]:
    """What :func:`_assemble` changes, copied: the frames shallowly (it adds and
    drops columns, never writes into one), the rest one level deep."""
    return ({k: v.copy(deep=False) for k, v in raw.items()},
            {k: v.copy(deep=False) for k, v in mem_parts.items()}, dict(ns),
            {k: list(v) for k, v in files.items()}, list(notes))
