"""Read a Parquet table file, keeping the row ids its text columns are stored with.

Parquet stores a text column of few distinct values (operator names, types, shapes) as a
dictionary and one index per row. :func:`read_frame` reads such columns as dictionaries,
decodes each into the text column pandas would have read, and hands the indices to
:func:`perfkit._text_codes.remember`, so that the analyses code those columns from small
integers instead of hashing a million strings each time (``pk.advise``). The frame is the
one ``pandas.read_parquet`` gives (``tests/io/test_cache.py`` compares them on every
table of the bundled samples).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._text_codes import remember, smallest_ids

__all__ = ["read_frame"]


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


def read_frame(f: Path) -> pd.DataFrame:
    """``f`` as a DataFrame (page checksums verified), its text columns' row ids kept.

    Every column keeps its own block (``split_blocks``) and the Arrow table is released
    while pandas takes it over (``self_destruct``).
    """
    text = _dictionary_text_columns(pq.ParquetFile(f))
    table = pq.ParquetFile(f, page_checksum_verification=True,
                           read_dictionary=text or None).read(use_pandas_metadata=True)
    ids: dict[str, tuple[np.ndarray, pa.Array]] = {}
    for name in text:
        i = table.schema.get_field_index(name)
        coded = table.column(i)
        if not pa.types.is_dictionary(coded.type):
            continue
        coded = coded.unify_dictionaries()
        value_type = coded.type.value_type
        chunks = coded.chunks
        n_values = len(chunks[0].dictionary) if chunks else 0
        row_ids = smallest_ids(
            np.concatenate([np.asarray(c.indices.fill_null(n_values)) for c in chunks])
            if chunks else np.zeros(0, dtype=np.int64), n_values)
        dictionary = chunks[0].dictionary if chunks else pa.array([], value_type)
        ids[name] = (row_ids, pa.concat_arrays([dictionary.cast(value_type),
                                                pa.nulls(1, value_type)]))
        plain = pa.chunked_array([c.dictionary.take(c.indices) for c in chunks], value_type)
        table = table.set_column(i, name, plain)
    frame = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    for name, (row_ids, text) in ids.items():
        column = frame[name].array
        data = getattr(column, "_pa_array", None)
        if data is not None and len(data) == len(row_ids):
            # the text of each id (the last one missing), in the column's own dtype
            remember(data, row_ids, type(column)._from_sequence(text, dtype=column.dtype))
    return frame
