"""The ``lab-grade`` answer: a class's grades (:func:`perfkit.lab.grade`), per student
and per question."""

from __future__ import annotations

from typing import Any

from .common import envelope, number, plain

__all__ = ["lab_grade_answer"]


def lab_grade_answer(grades: Any, pack: str = "") -> dict[str, Any]:
    """The ``lab-grade`` answer of :func:`perfkit.lab.grade`'s table.

    Returns
    -------
    dict
        ``pack``; ``students``: per student (:func:`perfkit.lab.summary`) ``student``,
        ``questions``, ``right``, ``wrong``, ``unanswered``, ``score_pct`` (100 · right /
        questions), ``wrong_questions``; ``mean_score_pct`` (None for an empty class);
        ``answers``: one row per student and question (``student``, ``question``,
        ``status``, ``correct``, ``answer``, ``expected``, ``attempts``).
    """
    from ..lab import summary

    s = summary(grades)
    students = [{"student": str(r["student"]), "questions": int(r["questions"]),
                 "right": int(r["right"]), "wrong": int(r["wrong"]),
                 "unanswered": int(r["unanswered"]), "score_pct": number(r["score_pct"]),
                 "wrong_questions": [str(q) for q in r["wrong_questions"]]}
                for r in s.to_dict("records")]
    answers = [{"student": str(r["student"]), "question": str(r["question"]),
                "status": str(r["status"]), "correct": bool(r["correct"]),
                "answer": plain(r["answer"]), "expected": plain(r["expected"]),
                "attempts": int(r["attempts"])}
               for r in grades.to_dict("records")]
    mean = number(s["score_pct"].mean()) if len(s) else None
    return envelope("lab-grade", pack=str(pack), students=students, mean_score_pct=mean,
                    answers=answers)
