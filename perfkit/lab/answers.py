"""A student's answers: one small SQLite file in their folder, and :func:`answer`.

The store uses the journal's engine and conventions (:mod:`perfkit.journal.store`): the
standard library's SQLite, one ordinary file (``answers.sqlite``) in rollback-journal
mode so that a copy of the folder is complete, every write one ``BEGIN IMMEDIATE``
transaction (SQLite's file locks let the notebook and a script write at once, one after
the other), and the format carried by the file itself (``PRAGMA application_id`` =
:data:`APPLICATION_ID`, ``PRAGMA user_version`` = :data:`SCHEMA_VERSION`). Every attempt
is kept: the question, the value given (JSON), the verdict at the time, when, and from
where (``notebook`` for the Check button, ``api`` for :func:`answer` from code).

The notebook's Check button calls :func:`answer`, so both record the same way.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .. import _sqlite
from .._version import __version__
from .key import LabError, is_right, normalise, parse_number, read_check

__all__ = ["AnswerBook", "Verdict", "answer", "ANSWERS_FILE", "APPLICATION_ID",
           "SCHEMA_VERSION", "ATTEMPT_COLUMNS"]

#: The answers file, relative to a student's folder.
ANSWERS_FILE = "answers.sqlite"
#: ``PRAGMA application_id`` of a perfkit lab answers file ("PKL1" in ASCII).
APPLICATION_ID = 0x504B4C31
#: Version of the tables.
SCHEMA_VERSION = 1
#: Columns of :meth:`AnswerBook.attempts`.
ATTEMPT_COLUMNS = ("id", "question", "value", "correct", "at_utc", "source")
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    question TEXT NOT NULL,
    value TEXT NOT NULL,
    correct INTEGER,
    at_utc TEXT NOT NULL,
    source TEXT NOT NULL
);
CREATE INDEX attempts_question ON attempts (question);
"""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AnswerBook:
    """The answers file of one student folder.

    Parameters
    ----------
    student_dir : path
        The student's folder; the file is ``student_dir / answers.sqlite``.
    readonly : bool
        Read only (grading): a missing file reads as no answers, nothing is created.
    timeout_s : float
        Seconds a write waits while another process writes.
    """

    def __init__(self, student_dir: str | os.PathLike[str], *, readonly: bool = False,
                 timeout_s: float = 30.0) -> None:
        self.path = Path(os.path.abspath(Path(student_dir) / ANSWERS_FILE))
        self.readonly = readonly
        self.timeout_s = timeout_s
        if self.path.exists():
            self._check_header()
            with self._guard("cannot be opened"), self._connect(write=False) as conn:
                initialised = self._check_format(conn)
            if not initialised and not readonly:
                self._create()  # another process's creation not committed yet, or killed
        elif not readonly:
            if not self.path.parent.is_dir():
                raise LabError(f"{self.path.parent}: no such student folder")
            self._create()

    @property
    def exists(self) -> bool:
        """Whether the file exists (a student who never answered has none)."""
        return self.path.exists()

    def _check_header(self) -> None:
        with self._guard("cannot be read"):
            head = _sqlite.file_head(self.path)
        if head is not None:
            raise LabError(f"{self.path}: not a perfkit lab answers file (not SQLite)")

    def _check_format(self, conn: sqlite3.Connection) -> bool:
        """Whether the file is an initialised answers file (False: still empty); raises
        :class:`LabError` for any other SQLite file, or one of a newer schema."""
        app, version, tables = _sqlite.format_of(conn)  # one snapshot: see format_of
        if app == 0 and version == 0 and not tables:
            return False  # created, not yet initialised
        if app != APPLICATION_ID:
            raise LabError(f"{self.path}: an SQLite file, but not a perfkit lab answers file")
        if version > SCHEMA_VERSION:
            raise LabError(f"{self.path}: written by a newer perfkit (schema {version})")
        return True

    def _connect(self, write: bool) -> Any:
        return _sqlite.connect(self.path, write, self.timeout_s)

    def _guard(self, doing: str) -> Any:
        return _sqlite.guard(lambda problem: LabError(f"{self.path}: {problem}"), doing)

    def _create(self) -> None:
        with self._guard("cannot be created"), self._connect(write=True) as conn:
            _sqlite.create(conn, _SCHEMA, APPLICATION_ID, SCHEMA_VERSION, [
                ("format", "perfkit lab answers (docs/teaching.md)"),
                ("created_utc", _now()), ("created_by", f"perfkit {__version__}")],
                is_empty=lambda c: not self._check_format(c))  # another may have won

    def record(self, question: str, value: Any, correct: bool | None,
               source: str = "api") -> int:
        """Add one attempt; returns its number for that question (1 for the first)."""
        if self.readonly:
            raise LabError(f"{self.path}: opened read-only")
        text = json.dumps(value, ensure_ascii=False)
        with self._guard("cannot record the answer"), self._connect(write=True) as conn, \
                _sqlite.transaction(conn):
            conn.execute("INSERT INTO attempts (question, value, correct, at_utc, source) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (question, text, None if correct is None else int(correct),
                          _now(), source))
            n = conn.execute("SELECT COUNT(*) FROM attempts WHERE question = ?",
                             (question,)).fetchone()[0]
        return int(n)

    def attempts(self) -> pd.DataFrame:
        """Every attempt, oldest first (columns :data:`ATTEMPT_COLUMNS`; ``value`` decoded)."""
        rows: list[tuple[Any, ...]] = []
        if self.exists:
            with self._guard("cannot be read"), self._connect(write=False) as conn:
                if self._check_format(conn):  # else created, nothing written yet
                    rows = conn.execute("SELECT id, question, value, correct, at_utc, "
                                        "source FROM attempts ORDER BY id").fetchall()
        if not rows:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in ATTEMPT_COLUMNS})
        frame = pd.DataFrame(rows, columns=list(ATTEMPT_COLUMNS))
        frame["value"] = [json.loads(v) for v in frame["value"]]
        frame["correct"] = frame["correct"].map(lambda c: None if c is None else bool(c))
        return frame


@dataclass(frozen=True)
class Verdict:
    """What :func:`answer` says about one attempt.

    Attributes
    ----------
    question : str
    value : object
        The answer as recorded.
    correct : bool
    attempt : int
        Its number for that question (1 for the first).
    message : str
        The explanation after a right answer, the hint after a wrong one.
    counted : bool
        False for text that is not a number given to a numeric question, or a choice that
        is not one of the question's options: it is refused, not recorded, and costs no
        attempt (``attempt`` is then the number of attempts made so far).
    """

    question: str
    value: Any
    correct: bool
    attempt: int
    message: str
    counted: bool = True

    def __str__(self) -> str:
        if not self.counted:
            return f"{self.question} (not counted as an attempt): {self.message}"
        verdict = "right" if self.correct else "not yet"
        return f"{self.question} (attempt {self.attempt}): {verdict}. {self.message}"


def _clean(entry: dict[str, Any], value: Any) -> Any:
    """The value as it is stored: a number, a choice, or a sorted list of choices."""
    kind = entry["kind"]
    if kind == "number":
        number = parse_number(value)
        return number if number is not None else str(value)
    if kind == "choices":
        items = [value] if isinstance(value, str) else list(value or [])
        return sorted(str(v) for v in items)
    return None if value is None else str(value)


def answer(student_dir: str | os.PathLike[str], question_id: str, value: Any, *,
           source: str = "api") -> Verdict:
    """Check one answer of a student and record it in their folder.

    Parameters
    ----------
    student_dir : path
        The student's folder of a pack (``DIR/student-3``).
    question_id : str
        A question of their sheet (``"throughput"``, ``"fault"`` ...; see ``lab.json``).
    value : number, str or list of str
        A number (or text that reads as one), one choice, or the choices of a question
        that takes several.
    source : str
        Where the answer came from (``"api"``; the notebook's Check button says
        ``"notebook"``).

    Returns
    -------
    Verdict
        Right or not, the attempt's number, and the explanation (right) or the hint
        (wrong).

    Raises
    ------
    LabError
        Not a student folder, or no such question (the message lists them).
    """
    checks = read_check(student_dir)
    if question_id not in checks:
        raise LabError(f"{student_dir}: no question {question_id!r}; the questions are "
                       f"{', '.join(checks)}")
    entry = checks[question_id]
    if entry["kind"] not in ("number", "choices") and isinstance(value, (list, tuple)):
        # the words of one choice given apart (unquoted on a command line: does not fit)
        value = " ".join(str(v) for v in value)
    if entry["kind"] == "number" and parse_number(value) is None:
        # a slip of the keyboard ("abc"): refused, not recorded, no attempt spent
        return _refused(student_dir, question_id,
                        f"{value!r} is not a number: type a number (such as 12.5)")
    stored = _clean(entry, value)
    options = entry.get("options")
    if options and entry["kind"] != "number":
        known = {normalise(o) for o in options}
        unknown = [v for v in (stored if isinstance(stored, list) else [stored])
                   if normalise(v) not in known]
        if unknown:  # not one of the choices offered: refused as a slip, not a wrong answer
            return _refused(student_dir, question_id,
                            f"{', '.join(repr(v) for v in unknown)} is not one of the "
                            f"options ({'; '.join(str(o) for o in options)}): choose among "
                            "them (on a command line, quote a choice of several words)")
    correct = is_right(entry, stored)
    message = entry.get("explanation", "") if correct else entry.get("hint", "")
    n = AnswerBook(student_dir).record(question_id, stored, correct, source)
    return Verdict(question_id, stored, correct, n, message)


def _refused(student_dir: str | os.PathLike[str], question_id: str, why: str) -> Verdict:
    """An answer that is not one at all (text for a number, a choice not offered): not
    recorded and no attempt spent; ``attempt`` is the number of attempts made so far."""
    made = int((AnswerBook(student_dir).attempts()["question"] == question_id).sum())
    return Verdict(question_id, None, False, made,
                   f"{why}; this did not count as an attempt.", counted=False)
