"""Read a Parquet table file, and where to read the row ids of its text columns.

Parquet stores a text column of few distinct values (operator names, types, shapes) as a
dictionary and one index per row. :func:`read_frame` reads the table as pandas does and,
for each such column, tells :func:`perfkit._text_codes.remember_lazily` how to read those
indices and the dictionary (:class:`_FileIds`): the first analysis that codes one of the
file's text columns reads them all at once, in a few tens of milliseconds, instead of
hashing a million strings per column, and every later one reuses them (``pk.advise``).
A profile whose columns no analysis codes reads nothing more than before.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._text_codes import id_dtype, remember_lazily

__all__ = ["read_frame"]

_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def _dictionary_text_columns(pf: pq.ParquetFile) -> list[str]:
    """Top-level text columns stored with a dictionary page in every row group."""
    meta = pf.metadata
    leaf_of = {pf.schema.column(i).path: i for i in range(meta.num_columns)}
    names = []
    for field in pf.schema_arrow:
        if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            continue
        j = leaf_of.get(field.name)
        if j is not None and meta.num_row_groups and all(
                meta.row_group(g).column(j).has_dictionary_page
                for g in range(meta.num_row_groups)):
            names.append(field.name)
    return names


def _stamp(f: Path) -> tuple[int, int, int]:
    st = os.stat(f)
    return st.st_ino, st.st_size, st.st_mtime_ns


class _FileIds:
    """The dictionary indices and texts of a file's text columns, read all at once the first
    time one of them is asked for (one read of those columns, checked against the file's
    inode, size and modification time at the table's read)."""

    def __init__(self, f: Path, stamp: tuple[int, int, int], names: list[str]) -> None:
        self.f, self.stamp, self.names = f, stamp, names
        self.got: dict[str, tuple[np.ndarray, pa.Array]] | None = None

    def column(self, name: str, dtype: Any) -> tuple[np.ndarray, Any] | None:
        """(row ids, the text of each id, the last one missing) of column ``name``."""
        if self.got is None:
            self.got = self._read() if _stamp(self.f) == self.stamp else {}
        hit = self.got.get(name)
        if hit is None:
            return None
        # the few distinct texts through Python objects: the same on every pandas version
        return hit[0], pd.array(hit[1].to_numpy(zero_copy_only=False), dtype=dtype)

    def _read(self) -> dict[str, tuple[np.ndarray, pa.Array]]:
        table = pq.ParquetFile(self.f, page_checksum_verification=True,
                               read_dictionary=self.names).read(columns=self.names)
        out = {}
        for name in self.names:
            coded = table.column(name)
            if not pa.types.is_dictionary(coded.type):
                continue
            coded = coded.unify_dictionaries()
            value_type = coded.type.value_type
            chunks = coded.chunks
            dictionary = chunks[0].dictionary if chunks else pa.array([], value_type)
            n_values = len(dictionary)
            out[name] = (_row_ids(chunks, n_values),
                         pa.concat_arrays([dictionary.cast(value_type),
                                           pa.nulls(1, value_type)]))
        return out


def _row_ids(chunks: list[pa.DictionaryArray], n_values: int) -> np.ndarray:
    """The chunks' indices as one array of the smallest unsigned type (missing as
    ``n_values``), written chunk by chunk into it: no copy of the indices in between."""
    out = np.empty(sum(len(c) for c in chunks), dtype=id_dtype(n_values))
    at = 0
    for c in chunks:
        indices = c.indices
        part = np.asarray(indices.fill_null(n_values) if indices.null_count else indices)
        out[at:at + len(c)] = part
        at += len(c)
    return out


def read_frame(f: Path) -> pd.DataFrame:
    """``f`` as a DataFrame (page checksums verified), and where its text columns' row ids
    are, for the analyses that code those columns.

    Every column keeps its own block (``split_blocks``): no copy of the numbers into one
    2-D array, which for a wide table (48 columns of an Ascend rank) halves the read.
    """
    if _PANDAS_3:
        frame = pd.read_parquet(f, page_checksum_verification=True,
                                to_pandas_kwargs={"split_blocks": True,
                                                  "self_destruct": True})
    else:  # pandas 2 has no to_pandas_kwargs: the same read through pyarrow (the pandas
        # metadata stored in the file gives the same dtypes)
        frame = pq.read_table(f, page_checksum_verification=True).to_pandas(
            split_blocks=True, self_destruct=True)
    try:
        stamp = _stamp(f)
        names = _dictionary_text_columns(pq.ParquetFile(f))
    except (OSError, pa.ArrowException):
        return frame
    coded = [n for n in names if getattr(frame[n].array, "_pa_array", None) is not None]
    if coded:
        ids = _FileIds(f, stamp, coded)
        for name in coded:
            column = frame[name].array
            remember_lazily(column._pa_array, partial(ids.column, name, column.dtype))
    return frame
