"""Opening a journal file: the checks that it is a perfkit journal (and not a folder,
another program's database, a damaged or a newer journal), creating it, and the
connections, transactions and snapshots every read and write goes through.

:class:`_JournalFile` is the base of :class:`~perfkit.journal.store.Journal`; the
:class:`JournalError` it raises names the file. The file's format is
:mod:`~perfkit.journal.schema`; the SQLite plumbing shared with the lab's answer store is
:mod:`perfkit._sqlite`.
"""

from __future__ import annotations

import html
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import _sqlite
from ..errors import PerfkitError
from ..format import counted
from .locations import (
    DEFAULT_JOURNAL_NAME,
)
from .record import perfkit_version
from .run import JournalError
from .schema import _SCHEMA, _TABLES, APPLICATION_ID, SCHEMA_VERSION

__all__ = ["DEFAULT_TIMEOUT_S"]

#: Seconds a write waits for another process's transaction to end.
DEFAULT_TIMEOUT_S = 60.0


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _JournalFile:
    """The journal file, opened and checked: connections, transactions, schema facts."""

    path: Path
    readonly: bool
    timeout_s: float
    _immutable: bool
    #: True for :meth:`~perfkit.journal.store.Journal.temporary`'s journal (removed when
    #: Python exits).
    _temporary: bool = False

    def _open(self, create: bool) -> None:
        path = self.path
        if path.is_dir():
            raise JournalError(path, "is a folder; a journal is one file (e.g. "
                                     f"{path / DEFAULT_JOURNAL_NAME})")
        #: whether this object made the file: an add that fails then removes it again
        self._made = create and not self.readonly and not path.exists()
        if not path.exists():
            if not create:
                raise JournalError(path, "no journal here (perfkit journal add PROFILE "
                                         "creates one)")
            if not path.parent.is_dir():
                raise JournalError(path, f"cannot create the journal: the folder "
                                         f"{path.parent} does not exist")
        else:
            self._check_header()
        with self._guard("cannot be opened as a journal"), self._connect(write=create) as c:
            state = self._state(c)
            if state == "empty":
                if not create or self.readonly:
                    raise JournalError(path, "is an empty file, not a journal yet")
                self._initialise(c)

    def _remove_if_unused(self) -> None:
        """Remove the journal file (and SQLite's side files) when this object made it and
        it holds no run: a first ``add`` that failed leaves nothing behind. The next write
        makes it afresh."""
        if not getattr(self, "_made", False) or not self.path.is_file():
            return
        try:
            with self._connect() as conn:
                if conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]:
                    return
        except sqlite3.Error:
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _check_header(self) -> None:
        try:
            head = _sqlite.file_head(self.path)
        except OSError as exc:
            raise JournalError(self.path, f"cannot be read: {exc.strerror or exc}") from None
        if head is not None:
            raise JournalError(self.path, "is not a perfkit journal: not an SQLite database "
                                          f"({_start(head)})")

    def _state(self, conn: sqlite3.Connection) -> str:
        app, version, tables = _sqlite.format_of(conn)  # one snapshot: see format_of
        if app == 0 and not tables:
            return "empty"
        if app != APPLICATION_ID:
            shown = ", ".join(sorted(tables)[:5]) or "none"
            raise JournalError(self.path, "is an SQLite database but not a perfkit journal "
                                          f"(application_id {app:#x}, tables: {shown})")
        if version > SCHEMA_VERSION:
            raise JournalError(self.path, f"was written by a newer perfkit (journal schema "
                                          f"{version}); this perfkit ({perfkit_version()}) reads "
                                          f"schema {SCHEMA_VERSION}: upgrade perfkit")
        if version < 1 or not set(_TABLES) <= tables:
            if version == 0 and not set(_TABLES) & tables:
                return "empty"  # a creator was killed before its first commit
            raise JournalError(self.path, f"is a damaged perfkit journal (schema {version}, "
                                          f"tables missing: "
                                          f"{', '.join(sorted(set(_TABLES) - tables))})")
        return "ok"

    def _initialise(self, conn: sqlite3.Connection) -> None:
        _sqlite.create(conn, _SCHEMA, APPLICATION_ID, SCHEMA_VERSION, [
            ("format", "perfkit tuning journal (docs/journal.md)"),
            ("schema_version", str(SCHEMA_VERSION)),
            ("created_utc", _now()), ("created_by", f"perfkit {perfkit_version()}")],
            is_empty=lambda c: self._state(c) == "empty")  # another process may have won

    def _connect(self, write: bool = False) -> Any:
        return _sqlite.connect(self.path, write and not self.readonly, self.timeout_s,
                               immutable=self._immutable, foreign_keys=True)

    def _guard(self, doing: str) -> Any:
        """Turn every sqlite3 / OS error into a :class:`JournalError` naming the file."""
        return _sqlite.guard(lambda problem: JournalError(self.path, problem), doing)

    @contextmanager
    def _transaction(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): all of it is written, or nothing."""
        if self.readonly:
            raise JournalError(self.path, "is open read-only (a bundled journal: "
                                          "journal.copy_to(PATH) gives a copy you can add to)")
        with self._guard(doing), self._connect(write=True) as conn, \
                _sqlite.transaction(conn):
            yield conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._guard("cannot be read"), self._connect() as conn, \
                _sqlite.snapshot(conn):  # a record's tables from one commit
            yield conn

    # ---- facts ------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        """The schema version written in the file (``PRAGMA user_version``)."""
        with self._reading() as c:
            return int(c.execute("PRAGMA user_version").fetchone()[0])

    def info(self) -> dict[str, str]:
        """The ``meta`` table: format, schema version, when and by which perfkit the
        journal was created."""
        with self._reading() as c:
            return dict(c.execute("SELECT key, value FROM meta ORDER BY key"))

    def __len__(self) -> int:
        with self._reading() as c:
            return int(c.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def __repr__(self) -> str:
        try:
            n = counted(len(self), "run")
        except PerfkitError:
            n = "unreadable"
        ro = ", read-only" if self.readonly else ""
        return f"Journal({str(self.path)!r}, {n}{ro})"

    # ---- display ----------------------------------------------------------------------
    def sentences(self, max_labels: int = 6) -> list[str]:
        """The journal as a reader sees it in a notebook: where it is, its runs by label,
        and whether it can be written.

        Parameters
        ----------
        max_labels : int
            Labels named at most; the rest are counted ("and 4 more").

        Returns
        -------
        list of str
            ``"The tuning journal /tmp/x/perfkit-journal.sqlite."``, then ``"It has 3 runs:
            'baseline', 'pipelined', 'tuned'."`` (or "It has no runs yet." or why it
            cannot be read), then where it is read-only, bundled or temporary, a sentence
            saying so.
        """
        lines = [f"The tuning journal {self.path}."]
        try:
            with self._reading() as c:
                labels = [str(r[0]) for r in c.execute("SELECT label FROM runs ORDER BY id")]
        except PerfkitError as exc:
            lines.append(f"It cannot be read: {exc}")
            labels = None
        if labels is not None:
            named = ", ".join(repr(x) for x in labels[:max_labels])
            rest = len(labels) - max_labels
            more = f" and {counted(rest, 'more run')}" if rest > 0 else ""
            lines.append(f"It has {counted(len(labels), 'run')}: {named}{more}." if labels
                         else "It has no runs yet: add one with journal.add(PROFILE).")
        if self._immutable:
            lines.append("It ships with perfkit and is read-only: journal.copy_to(PATH) gives a "
                         "writable copy.")
        elif self.readonly:
            lines.append("It is open read-only: add and the other writes refuse.")
        if self._temporary:
            lines.append("It is temporary: its folder is removed when Python exits "
                         "(give pk.Journal a path to keep one).")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.sentences())

    def _repr_html_(self) -> str:
        return "<div class='pk-journal'>" + "".join(
            f"<p style='margin:2px 0'>{html.escape(line)}</p>" for line in self.sentences()
        ) + "</div>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def _start(head: bytes) -> str:
    """How a file that is not SQLite begins, for its error: its first words where it is
    text (a JSON or YAML file given by mistake), else its first bytes in hexadecimal."""
    text = head[:16].decode("utf-8", "replace")
    if text.strip() and all(c.isprintable() or c in "\n\r\t" for c in text):
        return f"it starts with the text {' '.join(text.split())!r}"
    return f"it starts with the bytes {head[:8].hex(' ')}"
