"""Read a Parquet table file, and where to read the row ids of its text columns.

Parquet stores a text column of few distinct values (operator names, types, shapes) as a
dictionary and one index per row. :func:`read_frame` reads the table as pandas does and,
for each such column, tells :func:`perfkit._text_codes.remember_lazily` how to read those
indices and the dictionary (:class:`_FileIds`): the first analysis that codes one of the
file's text columns reads that column's (with the other operator columns of
:data:`READ_TOGETHER`, in one parallel read), in milliseconds per million rows, instead
of hashing a million strings, and every later one reuses them (``pk.advise``).
A profile whose columns no analysis codes reads nothing more than before.
"""

from __future__ import annotations

import json
import os
import threading
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..._text_codes import id_dtype, remember_lazily
from ..._text_dtype import table_to_frame

__all__ = ["read_frame"]

_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3
_PYARROW_19 = int(pa.__version__.split(".")[0]) >= 19


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


#: The text columns the operator analyses code (names, types, categories, the pricing
#: keys): the first of them asked for reads all of them present, in one read that decodes
#: the columns in parallel, outside the interpreter lock (about 30 ms warm for eight
#: columns of a million rows, 40-75 ms in a fresh process, where eight reads one by one
#: took 10-18 ms each on advise's second thread).
READ_TOGETHER = ("name", "type", "category", "input_shapes", "input_dtypes",
                 "output_shapes", "output_dtypes", "output_formats")


class _FileIds:
    """The dictionary indices and texts of a file's text columns, read the first time one
    is asked for (checked against the file's inode, size and modification time at the
    table's read). A column of :data:`READ_TOGETHER` is read with the others of the group
    present in ``names``, each handed out once; any other column is read alone, and a
    column no analysis codes is never read."""

    def __init__(self, f: Path, stamp: tuple[int, int, int], names: list[str]) -> None:
        self.f, self.stamp = f, stamp
        self.together = [n for n in READ_TOGETHER if n in names]
        self.read_ahead: dict[str, tuple[np.ndarray, pa.Array] | None] = {}
        self.lock = threading.Lock()

    def column(self, name: str, dtype: Any) -> tuple[np.ndarray, Any] | None:
        """(row ids, the text of each id, the last one missing) of column ``name``."""
        if _stamp(self.f) != self.stamp:
            return None
        hit = self._take(name)
        if hit is None:
            return None
        # the few distinct texts through Python objects: the same on every pandas version
        return hit[0], pd.array(hit[1].to_numpy(zero_copy_only=False), dtype=dtype)

    def _take(self, name: str) -> tuple[np.ndarray, pa.Array] | None:
        """Column ``name``'s ids and texts, read now (with its group) or handed out once
        from the group's read."""
        if name not in self.together:
            return self._read([name])[name]
        with self.lock:
            if name not in self.read_ahead:
                self.read_ahead.update(self._read(self.together))
            return self.read_ahead.pop(name, None)

    def _read(self, names: list[str]) -> dict[str, tuple[np.ndarray, pa.Array] | None]:
        # the pages' checksums were verified when the table was read from these bytes (the
        # same inode, size and modification time, checked above): not again, which would
        # double the read
        table = pq.ParquetFile(self.f, read_dictionary=names).read(columns=names)
        out: dict[str, tuple[np.ndarray, pa.Array] | None] = {}
        for name in names:
            coded = table.column(name)
            if not pa.types.is_dictionary(coded.type):
                out[name] = None
                continue
            coded = coded.unify_dictionaries()
            value_type = coded.type.value_type
            chunks = coded.chunks
            dictionary = chunks[0].dictionary if chunks else pa.array([], value_type)
            out[name] = (_row_ids(chunks, len(dictionary)),
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

    The frame is the one ``pandas.read_parquet`` gives, read with one Arrow chunk per row
    group (:func:`_read_table`). Every column keeps its own block (``split_blocks``): no
    copy of the numbers into one 2-D array, which for a wide table (48 columns of an
    Ascend rank) halves the read.
    """
    with pq.ParquetFile(f, page_checksum_verification=True) as pf:
        frame = _read_table(f, pf)
        try:
            stamp = _stamp(f)
            names = _dictionary_text_columns(pf)
        except (OSError, pa.ArrowException):
            return frame
    coded = [n for n in names if getattr(frame[n].array, "_pa_array", None) is not None]
    if coded:
        ids = _FileIds(f, stamp, coded)
        for name in coded:
            column = frame[name].array
            remember_lazily(column._pa_array, partial(ids.column, name, column.dtype))
    return frame


def _read_table(f: Path, pf: pq.ParquetFile) -> pd.DataFrame:
    """What ``pandas.read_parquet(f)`` gives, each column one Arrow chunk per row group.

    ``pandas.read_parquet`` reads through pyarrow's dataset scanner, which cuts every
    column into chunks of 128 Ki rows; a text column of a million rows comes in 8 chunks,
    and pyarrow's ``take`` (pandas' row selection by position) first joins a chunked
    text column into one array: 7 ms and 40 MB of fresh memory per take of a million
    names, whatever the rows taken. Read row group by row group, the column is one array.
    The conversion is pyarrow's, as pandas calls it (pandas 3 with pyarrow 19 or later
    maps no type itself; with older pyarrow pandas' own read is kept), with the frame's
    ``attrs`` that pandas stores beside the table; text columns come back as
    :data:`~perfkit._text_dtype.TEXT` on pandas 2 too (:func:`~perfkit._text_dtype.table_to_frame`).
    """
    if _PANDAS_3 and not _PYARROW_19:
        return pd.read_parquet(f, page_checksum_verification=True,
                               to_pandas_kwargs={"split_blocks": True, "self_destruct": True})
    table = pf.read(use_pandas_metadata=True)
    attrs = (table.schema.metadata or {}).get(b"PANDAS_ATTRS")
    frame = table_to_frame(table, split_blocks=True, self_destruct=True)
    if attrs is not None:
        frame.attrs = json.loads(attrs)
    return frame
