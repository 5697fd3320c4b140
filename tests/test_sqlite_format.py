"""perfkit's own SQLite files (journal, lab answers) opened while another process creates them.

A CI run failed once with "is an SQLite database but not a perfkit journal (application_id
0x0, tables: ...)": three processes opened one new journal together, and one read
``PRAGMA application_id`` before another's creating commit and the table names after it.
These tests put that commit exactly between the opener's first and second statements
(SQLite's trace callback runs before each statement), so they fail on any reading of the
file's format that takes more than one statement, every time, not once in a while.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from perfkit import _sqlite
from perfkit.journal import Journal
from perfkit.journal.schema import APPLICATION_ID as JOURNAL_ID
from perfkit.lab.answers import ANSWERS_FILE, AnswerBook, LabError


def _commit_before_second_statement(monkeypatch: pytest.MonkeyPatch,
                                    create: Callable[[], None]) -> dict[str, int]:
    """Run ``create`` (another writer's whole creation) just before the second statement
    perfkit runs on the connections it opens next; returns a counter of what was seen."""
    real = _sqlite.connect
    seen = {"statements": 0, "created": 0}

    @contextmanager
    def connect(*args, **kwargs) -> Iterator[sqlite3.Connection]:
        with real(*args, **kwargs) as conn:
            if not seen["created"]:
                def trace(sql: str) -> None:
                    if sql.startswith("-- "):
                        return  # a statement run inside the one traced before
                    seen["statements"] += 1
                    if seen["statements"] == 2 and not seen["created"]:
                        seen["created"] = 1
                        create()  # on its own connection: `real`, not this wrapper
                conn.set_trace_callback(trace)
            yield conn

    monkeypatch.setattr(_sqlite, "connect", connect)
    return seen


def _create_journal_elsewhere(path: Path) -> Callable[[], None]:
    def create() -> None:
        journal = Journal.__new__(Journal)
        journal.path, journal.readonly, journal.timeout_s = path, False, 5.0
        journal._immutable = False
        conn = sqlite3.connect(path, isolation_level=None)  # its own connection
        try:
            journal._initialise(conn)
        finally:
            conn.close()
    return create


def test_format_is_one_statement() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert _sqlite.format_of(conn) == (0, 0, set())
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    conn.execute("CREATE TABLE a (x)")
    conn.execute("CREATE TABLE b (y)")
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("PRAGMA user_version = 7")
    statements.clear()
    assert _sqlite.format_of(conn) == (1234, 7, {"a", "b"})
    assert len([s for s in statements if not s.startswith("-- ")]) == 1  # "--": nested


def test_journal_opened_while_another_process_creates_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "shared.sqlite"
    seen = _commit_before_second_statement(monkeypatch, _create_journal_elsewhere(path))
    journal = Journal(path)  # its first statement saw an empty file; the other won the race
    assert seen["created"] == 1
    monkeypatch.undo()
    assert len(journal) == 0
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == JOURNAL_ID
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'created_by'"
                            ).fetchone()[0] == 1  # created once, not twice


def test_answers_opened_while_another_process_creates_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ANSWERS_FILE).touch()  # the creator has connected, not yet committed
    creator = AnswerBook.__new__(AnswerBook)
    creator.path, creator.readonly, creator.timeout_s = tmp_path / ANSWERS_FILE, False, 5.0
    seen = _commit_before_second_statement(monkeypatch, creator._create)
    book = AnswerBook(tmp_path)
    assert seen["created"] == 1
    monkeypatch.undo()
    assert book.record("q1", 3, True) == 1  # the file is a complete answers file
    assert list(book.attempts()["question"]) == ["q1"]


def test_answers_file_left_empty_is_initialised(tmp_path: Path) -> None:
    """A creator killed after connecting leaves a 0-byte file: the next writer finishes it
    (it used to open "fine" and fail on the first answer: no such table)."""
    (tmp_path / ANSWERS_FILE).touch()
    assert AnswerBook(tmp_path, readonly=True).attempts().empty
    assert (tmp_path / ANSWERS_FILE).stat().st_size == 0  # read-only: nothing written
    book = AnswerBook(tmp_path)
    assert book.record("q1", "x", None) == 1


def test_answers_foreign_sqlite_with_tables_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / ANSWERS_FILE) as conn:
        conn.execute("CREATE TABLE other (x)")
    with pytest.raises(LabError, match="not a perfkit lab answers file"):
        AnswerBook(tmp_path)


def test_snapshot_keeps_writers_out_until_it_ends(tmp_path: Path) -> None:
    """Statements inside ``snapshot`` see one commit: a writer's commit waits for its end
    (the journal reads a record's tables inside one)."""
    path = tmp_path / "f.sqlite"
    with sqlite3.connect(path, isolation_level=None) as setup:
        setup.execute("CREATE TABLE t (x)")
        setup.execute("INSERT INTO t VALUES (1)")
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        with _sqlite.snapshot(reader):
            assert reader.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                writer.execute("INSERT INTO t VALUES (2)")
            assert reader.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
        writer.execute("INSERT INTO t VALUES (2)")
        assert reader.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 2
    finally:
        reader.close()
        writer.close()
