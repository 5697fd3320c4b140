"""pandas' own read of a Parquet file, with its text as perfkit keeps it on every pandas.

perfkit reads a ``string`` column as Arrow data (perfkit._text_dtype); pandas 2 reads it as
Python objects, pandas 3 as Arrow. The tests that check perfkit's read against pandas'
compare with this: pandas' read, its string columns converted by pandas itself.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["ARROW_TEXT", "read_parquet"]

ARROW_TEXT = pd.StringDtype("pyarrow")


def read_parquet(f: Path) -> pd.DataFrame:
    """``pd.read_parquet(f)``, its Python-stored ``string`` columns (pandas 2's) stored in
    Arrow; pandas 3's ``str`` columns as pandas reads them."""
    frame = pd.read_parquet(f)
    text = {c: ARROW_TEXT for c, d in frame.dtypes.items()
            if isinstance(d, pd.StringDtype) and d.storage == "python"}
    return frame.astype(text) if text else frame
