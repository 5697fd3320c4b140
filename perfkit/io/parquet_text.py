"""Read a Parquet table file, and where to read the row ids of its text columns.

Parquet stores a text column of few distinct values (operator names, types, shapes) as a
dictionary and one index per row. :func:`read_frame` reads the table as pandas does and,
for each such column, tells :func:`perfkit._text_codes.remember_lazily` how to read those
indices and the dictionary (:func:`_column_ids`): the first analysis that codes the column
reads them, in a few milliseconds, instead of hashing a million strings, and every later
one reuses them (``pk.advise``). A profile whose columns no analysis codes reads nothing
more than before.
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

from .._text_codes import remember_lazily, smallest_ids

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


def _column_ids(f: Path, name: str, stamp: tuple[int, int, int], dtype: Any
                ) -> tuple[np.ndarray, Any] | None:
    """The dictionary indices of column ``name`` of ``f`` (missing as the dictionary's
    length) and the text of each index, the last one missing; None when the file is no
    longer the one read (another inode, size or modification time)."""
    if _stamp(f) != stamp:
        return None
    coded = pq.ParquetFile(f, page_checksum_verification=True, read_dictionary=[name]) \
        .read(columns=[name]).column(0)
    if not pa.types.is_dictionary(coded.type):
        return None
    coded = coded.unify_dictionaries()
    value_type = coded.type.value_type
    chunks = coded.chunks
    dictionary = chunks[0].dictionary if chunks else pa.array([], value_type)
    n_values = len(dictionary)
    ids = np.concatenate([np.asarray(c.indices.fill_null(n_values)) for c in chunks]) \
        if chunks else np.zeros(0, dtype=np.int64)
    text = pa.concat_arrays([dictionary.cast(value_type), pa.nulls(1, value_type)])
    # the few distinct texts through Python objects: the same on every pandas version
    return smallest_ids(ids, n_values), pd.array(text.to_numpy(zero_copy_only=False),
                                                 dtype=dtype)


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
    for name in names:
        column = frame[name].array
        data = getattr(column, "_pa_array", None)
        if data is not None:
            remember_lazily(data, partial(_column_ids, f, name, stamp, column.dtype))
    return frame
