"""The dtype of every text column perfkit makes: pandas' string dtype, stored in Arrow.

pandas spells it ``"string"``, but what that alias stores depends on the version: pandas 3
stores the text in Arrow; pandas 2.x (2.2 and 2.3, the only pandas for Python 3.10) stores
one Python object per row unless the user sets ``mode.string_storage``. On Python objects
every selection, missing-value check and coding of a million operator names costs several
times as much: ``pk.advise`` on the benchmark's 1 M-task rank took 4.5-5.7 s on pandas
2.2.0 against 0.44-0.48 s on pandas 3.1 (``benchmarks/_advise_one.py``, 2026-11-28), and
the row ids that the Parquet cache hands the analyses (:mod:`perfkit._text_codes`) exist
only beside Arrow data. Naming the storage puts every supported pandas on the one path;
on pandas 3, ``TEXT`` is the very dtype ``"string"`` already means. perfkit does not change
``mode.string_storage`` itself: that option is the user's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

__all__ = ["TEXT", "arrow_text_mapper", "text_series", "table_to_frame"]

#: pandas' string dtype with Arrow storage and ``pd.NA`` for missing text.
TEXT = pd.StringDtype("pyarrow")


def arrow_text_mapper() -> Callable[[Any], Any]:
    """A ``types_mapper`` for pyarrow's ``to_pandas``: Arrow text becomes :data:`TEXT`
    straight from its Arrow buffers, with no Python string per row on any pandas."""
    import pyarrow as pa

    return {pa.string(): TEXT, pa.large_string(): TEXT}.get


def text_series(arrow: Any) -> pd.Series:
    """A pyarrow (chunked) array of text as a Series of :data:`TEXT`."""
    return pd.Series(arrow.to_pandas(types_mapper=arrow_text_mapper()), dtype=TEXT)


def table_to_frame(table: Any, **to_pandas: Any) -> pd.DataFrame:
    """``table.to_pandas(**to_pandas)`` (a pyarrow Table that pandas wrote), its
    ``"string"`` columns read back as :data:`TEXT` on every pandas.

    pandas 3 does so by itself (unless the user chose Python storage); pandas 2.x would
    build a Python string per row. There every Arrow text column is read as TEXT, and
    those that pandas wrote from an ``object`` column go back into one.
    """
    if pd.StringDtype() == TEXT:
        return table.to_pandas(**to_pandas)
    import pyarrow as pa

    schema = table.schema
    objects = [c["name"] for c in (schema.pandas_metadata or {}).get("columns", [])
               if c.get("numpy_type") == "object" and c.get("name") in schema.names
               and (pa.types.is_string(schema.field(c["name"]).type)
                    or pa.types.is_large_string(schema.field(c["name"]).type))]
    frame = table.to_pandas(types_mapper=arrow_text_mapper(), **to_pandas)
    for name in objects:
        frame[name] = frame[name].astype(object)
    return frame
