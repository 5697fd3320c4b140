"""``perfkit lab grade``: the class's answers against the instructor's key.

:func:`grade` reads every student folder's ``answers.sqlite`` (read-only: the folders
may sit on a shared disk, and students may still be answering) and checks each student's
latest answer to each question against ``instructor/key.json`` — never against the
verdicts stored with the answers, nor against the students' own check data.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

import pandas as pd

from .answers import AnswerBook
from .key import KEY_FILE, LabError, is_right, read_key

__all__ = ["grade", "summary", "progress_chart", "GRADE_COLUMNS", "SUMMARY_COLUMNS",
           "GRADES_FILE", "PROGRESS_FILE"]

#: Columns of :func:`grade`.
GRADE_COLUMNS = ("student", "question", "title", "stage", "kind", "status", "correct",
                 "answer", "expected", "attempts", "ever_right", "first_right_utc",
                 "last_utc")
#: Columns of :func:`summary`.
SUMMARY_COLUMNS = ("student", "questions", "right", "wrong", "unanswered", "score_pct",
                   "wrong_questions")
#: Files :func:`grade` writes into the instructor's folder.
GRADES_FILE = "grades.csv"
PROGRESS_FILE = "progress.html"


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def grade(dir: str | os.PathLike[str], *, write: bool = True) -> pd.DataFrame:  # noqa: A002
    """Grade a class: every student's latest answer to every question, checked.

    Parameters
    ----------
    dir : path
        The pack (the folder ``perfkit lab make`` wrote).
    write : bool
        Also write ``instructor/grades.csv`` and ``instructor/progress.html`` (the
        class's progress chart, rendered offline, and the summary per student).

    Returns
    -------
    pandas.DataFrame
        One row per student and question, students in order: ``student``, ``question``,
        ``title``, ``stage``, ``kind``, ``status`` (``"right"``, ``"wrong"``,
        ``"unanswered"``), ``correct`` (bool), ``answer`` (the latest answer, as text),
        ``expected`` (the key's answer, as text), ``attempts``, ``ever_right`` (any attempt
        right), ``first_right_utc``, ``last_utc``. ``attrs["summary"]`` is
        :func:`summary` of it.

    Raises
    ------
    LabError
        No key in ``dir`` (not a pack), or an answers file that cannot be read.
    """
    pack = Path(dir).expanduser()
    key = read_key(pack)
    rows = []
    for student, entry in key["entries"].items():
        folder = pack / student
        attempts = AnswerBook(folder, readonly=True).attempts() if folder.is_dir() \
            else pd.DataFrame(columns=["question", "value", "at_utc"])
        for qid, expected in entry["answers"].items():
            mine = attempts[attempts["question"] == qid]
            checks = [is_right(expected, v) for v in mine["value"]]
            right_at = [t for t, ok in zip(mine["at_utc"], checks, strict=True) if ok]
            last = mine.iloc[-1] if len(mine) else None
            correct = bool(checks[-1]) if checks else False
            rows.append({
                "student": student, "question": qid, "title": expected["title"],
                "stage": expected["stage"], "kind": expected["kind"],
                "status": "unanswered" if last is None else "right" if correct else "wrong",
                "correct": correct, "answer": None if last is None else _shown(last["value"]),
                "expected": _shown(expected["answer"]), "attempts": len(mine),
                "ever_right": bool(right_at),
                "first_right_utc": right_at[0] if right_at else None,
                "last_utc": None if last is None else last["at_utc"]})
    frame = pd.DataFrame(rows, columns=list(GRADE_COLUMNS))
    frame["attempts"] = frame["attempts"].astype(int)
    frame.attrs["summary"] = summary(frame)
    if write:
        _write(pack, frame)
    return frame


def summary(grades: pd.DataFrame) -> pd.DataFrame:
    """Per student: questions, right, wrong, unanswered, score (% right) and the ids of
    the questions answered wrong (latest answer)."""
    out = []
    for student, g in grades.groupby("student", sort=False):
        wrong = g.loc[g["status"] == "wrong", "question"].tolist()
        right = int((g["status"] == "right").sum())
        out.append({"student": student, "questions": len(g), "right": right,
                    "wrong": len(wrong), "unanswered": int((g["status"] == "unanswered").sum()),
                    "score_pct": 100.0 * right / len(g) if len(g) else 0.0,
                    "wrong_questions": wrong})
    return pd.DataFrame(out, columns=list(SUMMARY_COLUMNS))


def score_text(score_pct: float) -> str:
    """A score as the grade's page and ``perfkit lab grade`` write it: whole percent
    (``"0 %"``, ``"87 %"``, ``"100 %"``), one form for every student."""
    return f"{float(score_pct):.0f} %"


def progress_chart(grades: pd.DataFrame) -> Any:
    """The class's progress (:func:`perfkit.charts.lab.class_progress_chart`) of a grade."""
    from ..charts.lab import class_progress_chart

    return class_progress_chart(grades)


def _write(pack: Path, grades: pd.DataFrame) -> None:
    from ..charts import chart_to_svg

    folder = (pack / KEY_FILE).parent
    try:
        grades.to_csv(folder / GRADES_FILE, index=False)
        svg = chart_to_svg(progress_chart(grades))
        table = summary(grades).assign(
            wrong_questions=lambda s: s["wrong_questions"].map(", ".join),
            score_pct=lambda s: s["score_pct"].map(score_text))
        table = table.rename(columns={"score_pct": "score"})
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>Lab progress"
                "</title><style>body{font-family:sans-serif;margin:20px}table{border-"
                "collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
                "</style></head><body><h1>Lab progress</h1>" + svg
                + "<h2>Per student</h2>" + table.to_html(index=False, escape=True)
                + f"<p>{html.escape(str(len(table)))} students; the key is "
                f"{html.escape(KEY_FILE)}.</p></body></html>")
        (folder / PROGRESS_FILE).write_text(page, encoding="utf-8")
    except OSError as exc:
        raise LabError(f"{folder}: cannot write the grades ({exc})") from None
