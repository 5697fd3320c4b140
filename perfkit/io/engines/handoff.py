"""How a worker process hands a parsed rank's tables to the process that asked for them.

With the cache on, the worker writes the rank's cache entry (Parquet, checksummed) and the
parent reads it from there. With the cache off the tables still have to cross the process
boundary: pickling millions of rows is slow, so the worker writes each canonical table as
an uncompressed Arrow IPC file (Feather v2) in a temporary folder outside the user's
folders, and the parent maps the files and builds the same DataFrames (the pandas metadata
travels with them), then removes the folder. No encoding, compression or checksum is
needed for a file that lives a few seconds on the same machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.feather as feather

from ..._text_dtype import table_to_frame
from ...profile import Profile, ProfileMeta
from ..canonical.schema import TABLE_NAMES, conform

__all__ = ["write_tables", "read_tables"]


def write_tables(folder: Path, meta: ProfileMeta, tables: dict[str, pd.DataFrame]) -> None:
    """Write the canonical tables of one rank (conformed, as the cache stores them)."""
    for name in TABLE_NAMES:
        frame = conform(tables.get(name), name, meta.rank)
        feather.write_feather(frame, folder / f"{name}.arrow", compression="uncompressed")


def read_tables(folder: Path, meta: ProfileMeta) -> Profile | None:
    """The rank written by :func:`write_tables` (None when a file is missing); the folder
    is removed."""
    try:
        tables = {}
        for name in TABLE_NAMES:
            f = folder / f"{name}.arrow"
            if not f.is_file():
                return None
            # mapped, not copied in (POSIX: the folder can go while the map lives on)
            tables[name] = table_to_frame(feather.read_table(f, memory_map=os.name == "posix"),
                                          split_blocks=True, self_destruct=True)
        return Profile(meta, tables)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
