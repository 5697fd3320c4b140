"""Teaching packs: a folder per student of their own simulated data and questions.

``pk.lab.make(dir, students=N, seed=0, level="intro")`` writes the pack (each student's
profiles, IR dump, notebook of questions; the instructor's answer key);
``pk.lab.answer(student_dir, question_id, value)`` checks and records one answer (the
notebook's Check button does the same); ``pk.lab.grade(dir)`` gathers the class's
answers into a table, with a chart of the class's progress. See docs/teaching.md.
"""

from .answers import AnswerBook, Verdict, answer
from .grade import grade, progress_chart, summary
from .key import LabError, read_key
from .make import make
from .questions import QUESTIONS, questions_for

__all__ = ["make", "answer", "grade", "summary", "progress_chart", "AnswerBook", "Verdict",
           "LabError", "QUESTIONS", "questions_for", "read_key"]
