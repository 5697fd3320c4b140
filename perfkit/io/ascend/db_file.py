"""Opening an Ascend profiler SQLite database and querying it (:mod:`perfkit.io.ascend.db`).

The file is read as it is on disk (``immutable``: nothing written beside it, nor locked),
or, with a write-ahead log beside it, from a private copy of both; every failure is a
:class:`~perfkit.errors.ProfileError` naming the file; a column the reader needs is
refused by name when this export lacks it (:func:`required_columns`), and start and end
times that are not whole numbers leave their rows out with a note (:func:`whole_ns`).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pandas as pd

from ...errors import ProfileError, file_boundary
from .._common import check_file, note

__all__ = ["database", "table_names", "query", "select", "required_columns", "whole_ns"]


def _connect(path: Path, private: Path | None = None) -> sqlite3.Connection:
    """A read-only connection to ``path`` as it is on disk (``immutable``: nothing is
    written beside it, nor locked), or, with ``private`` (a folder of this process), to a
    copy of it and its write-ahead log there, which SQLite reads the log into."""
    magic = check_file(path, "an Ascend profiler SQLite database", text=False)[:16]
    if magic != b"SQLite format 3\x00":
        raise ProfileError(path, "not an SQLite database (bad header); expected the Ascend "
                           "DB export (ascend_pytorch_profiler_{rank}.db / analysis.db)")
    if private is None:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    copy = private / path.name
    shutil.copyfile(path, copy)
    shutil.copyfile(_wal(path), private / f"{path.name}-wal")
    return sqlite3.connect(copy)


def _wal(path: Path) -> Path:
    """The write-ahead log SQLite keeps beside ``path`` in WAL mode."""
    return path.with_name(f"{path.name}-wal")


def _has_wal(path: Path) -> int:
    """Bytes of ``path``'s write-ahead log (0 when there is none): transactions a writer
    committed but had not yet copied into the database (a profiler that did not close it,
    a folder copied while it ran). Reading the file alone, as ``immutable`` does, misses
    them: with rows of ``TASK`` in its log, a rank read 83 of its 191 kernels."""
    try:
        return _wal(path).stat().st_size
    except OSError:
        return 0


@contextmanager
def database(path: Path, notes: list[str] | None = None) -> Iterator[sqlite3.Connection]:
    """An open database whose every failure is a ProfileError naming it (closed after).

    A database with a write-ahead log beside it (:func:`_has_wal`) is read from a private
    copy of both, so that the log's transactions are in, and a note says so; the user's
    folder is not written to either way."""
    with file_boundary(path, "an Ascend profiler SQLite database"), ExitStack() as stack:
        wal = _has_wal(path)
        private = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="perfkit-db-"))) if wal else None
        con = _connect(path, private)
        if wal and notes is not None:
            notes.append(f"{path.name}: read with its write-ahead log {_wal(path).name} "
                         f"({wal:,} bytes of transactions not yet in the database), from a "
                         "private copy")
        try:
            yield con
        except sqlite3.Error as exc:
            raise ProfileError(path, f"SQLite database is damaged or unreadable ({exc}); "
                               "expected the Ascend DB export") from None
        finally:
            con.close()


def table_names(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}


def query(con: sqlite3.Connection, path: Path, sql: str) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, con)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise ProfileError(path, f"query failed ({exc}); expected the Ascend DB schema",
                           field=sql.split("from")[-1].split()[0] if "from" in sql else None
                           ) from None


def select(con: sqlite3.Connection, table: str, alias: str, wanted: list[str]) -> str:
    """Select list of ``wanted`` columns, ``NULL AS x`` for those this DB version lacks."""
    have = {r[1] for r in con.execute(f'pragma table_info("{table}")')}
    return ", ".join(f"{alias}.{c}" if c in have else f"NULL AS {c}" for c in wanted)


def required_columns(con: sqlite3.Connection, path: Path, table: str,
                     columns: list[str]) -> None:
    """Refuse ``table`` without one of ``columns``: its rows cannot be read without them
    (a ``TASK`` without ``startNs`` gave "unexpected TypeError: int() argument ... not
    'NoneType'")."""
    have = {r[1] for r in con.execute(f'pragma table_info("{table}")')}
    lacking = [c for c in columns if c not in have]
    if lacking:
        raise ProfileError(path, f"table {table} has no column {', '.join(lacking)} "
                           f"(it has {', '.join(sorted(have)[:12])}): a damaged export, or "
                           "one this perfkit does not read; expected the Ascend DB export",
                           field=f"{table}.{lacking[0]}")


def whole_ns(frame: pd.DataFrame, columns: list[str], label: str) -> pd.DataFrame:
    """``frame`` with ``columns`` as int64 nanoseconds, rows where one is not a whole
    number (text, empty) left out with a note under ``label`` (``"x.db TASK"``): a
    ``startNs`` of ``'soon'`` in a tenth of the rows refused the whole rank, where the text
    export's reader leaves such a cell NA and says so."""
    if frame.empty:
        return frame
    values = {c: pd.to_numeric(frame[c], errors="coerce") for c in columns}
    bad = pd.Series(False, index=frame.index)
    for v in values.values():
        bad |= v.isna() | (v != v.round())
    if bad.any():
        note(f"{label}: {int(bad.sum())} of {len(frame):,} rows with a "
             f"{'/'.join(columns)} that is not a whole number of nanoseconds: left out")
    out = frame.loc[~bad].copy()
    for c, v in values.items():
        out[c] = v.loc[~bad].astype("int64")
    return out.reset_index(drop=True)
