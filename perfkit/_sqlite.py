"""The SQLite conventions of perfkit's own files (the tuning journal, lab answers).

Each file is one ordinary SQLite database in rollback-journal mode (a copy of its folder
is complete), carries its format in ``PRAGMA application_id`` and its schema version in
``PRAGMA user_version``, and is written one ``BEGIN IMMEDIATE`` transaction at a time
(SQLite's file locks let two processes write, one after the other). The owners
(:mod:`perfkit.journal.store`, :mod:`perfkit.lab.answers`) keep their schemas and their
error types; this module holds what they do alike.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import PerfkitError

__all__ = ["SQLITE_MAGIC", "connect", "create", "file_head", "format_of", "guard", "reason",
           "snapshot", "transaction"]

#: The first bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"


def reason(exc: BaseException) -> str:
    """An error's message on one line (its type's name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def file_head(path: Path) -> bytes | None:
    """The first bytes of ``path`` when they are not SQLite's header, else None (an empty
    file, which SQLite initialises, is fine). Raises OSError when it cannot be read."""
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    return head if head and head != SQLITE_MAGIC else None


@contextmanager
def connect(path: Path, write: bool, timeout_s: float, immutable: bool = False,
            foreign_keys: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode (transactions are explicit), closed on exit.

    ``write`` opens read-write and creates the file (``mode=rwc``), else read-only;
    ``immutable`` tells SQLite the file cannot change (a file inside the installed
    package, which may be on a read-only medium).
    """
    uri = f"{path.as_uri()}?mode={'rwc' if write else 'ro'}"
    if immutable:
        uri += "&immutable=1"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
    try:
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
        yield conn
    finally:
        conn.close()


@contextmanager
def guard(fail: Callable[[str], PerfkitError], doing: str) -> Iterator[None]:
    """Turn every sqlite3 / OS error into ``fail(f"{doing}: {reason}")``; perfkit's own
    errors pass through. A damaged or foreign file says so."""
    try:
        yield
    except PerfkitError:
        raise
    except sqlite3.DatabaseError as exc:
        text = reason(exc)
        if "not a database" in text or "malformed" in text:
            text += " (the file is damaged or not one of perfkit's)"
        raise fail(f"{doing}: {text}") from None
    except (sqlite3.Error, OSError) as exc:
        raise fail(f"{doing}: {reason(exc)}") from None


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: all of it is written, or nothing."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every statement inside sees the file as one commit left it
    (outside ``BEGIN``, each statement is its own, and a writer can commit in between)."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        if conn.in_transaction:  # it wrote nothing: COMMIT ends the read either way
            conn.execute("COMMIT")


def format_of(conn: sqlite3.Connection) -> tuple[int, int, set[str]]:
    """The file's ``application_id``, ``user_version`` and table names, read in one
    statement, so from one snapshot of the file.

    Read one ``PRAGMA`` at a time (each its own read transaction outside ``BEGIN``), they
    can straddle another process's creating commit: ``application_id`` 0 from before it,
    the tables from after, which looks like a foreign database.
    """
    app, version, names = conn.execute(
        "SELECT (SELECT application_id FROM pragma_application_id),"
        " (SELECT user_version FROM pragma_user_version),"
        " (SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')"
    ).fetchone()
    return int(app), int(version), set(names.split("\x1f")) if names else set()


def create(conn: sqlite3.Connection, schema: str, application_id: int, user_version: int,
           meta: list[tuple[str, str]], is_empty: Callable[[sqlite3.Connection], bool]
           ) -> None:
    """Write ``schema`` (statements separated by ``;``), the format's two pragmas and the
    ``meta`` rows, in one transaction, unless another process did first (``is_empty``
    is asked again once the write lock is held)."""
    conn.execute("PRAGMA journal_mode = DELETE")
    with transaction(conn):
        if is_empty(conn):
            for statement in schema.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {application_id}")
            conn.execute(f"PRAGMA user_version = {user_version}")
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
