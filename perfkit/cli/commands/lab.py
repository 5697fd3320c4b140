"""``perfkit lab make|grade|answer``: teaching packs on the command line.

``perfkit lab make DIR --students N [--seed S] [--level intro|advanced] [--overwrite]``
    Write a pack (:func:`perfkit.lab.make`): one folder per student with their own
    simulated profiles, IR dump and notebook of questions, and ``instructor/`` with the
    answer key. Prints where everything is and how long it took.
``perfkit lab grade DIR [--csv FILE] [--json]``
    Check every student's latest answers against the key (:func:`perfkit.lab.grade`):
    one line per student (score, the questions answered wrong), and the class's progress
    chart in ``instructor/progress.html``.
``perfkit lab answer STUDENT_DIR QUESTION VALUE...``
    Check and record one answer (:func:`perfkit.lab.answer`), as the notebook's Check
    button does; several VALUEs answer a question that takes several choices.

A student's app: ``perfkit serve --lab DIR/student-3``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ...errors import PerfkitError
from ...format import counted
from ..args import paragraph

__all__ = ["add_parser", "run", "EPILOG", "grade_text"]

#: The end of ``perfkit lab --help``: examples.
EPILOG = """\
examples:
  perfkit lab make class-2024 --students 30 --seed 7
  perfkit serve --lab class-2024/student-3        # one student's app
  perfkit lab answer class-2024/student-3 bubble 12.5
  perfkit lab grade class-2024

See docs/teaching.md for a two-hour session built on a pack.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``lab`` command (with ``make``, ``grade``, ``answer``) to the subparsers of
    ``perfkit``."""
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "lab", help="teaching packs: a folder of own data and questions per student",
        formatter_class=raw, epilog=EPILOG,
        description=paragraph(
            "Make a lab pack for a class (each student gets their own simulated profiles, "
            "IR dump and questions across the tuning cycle; the instructor gets the answer "
            "key), record answers, and grade the class."))
    p.set_defaults(lab_parser=p)
    lsub = p.add_subparsers(dest="lab_command", metavar="ACTION")
    mk = lsub.add_parser("make", help="write a pack for a class", formatter_class=raw,
                         epilog=EPILOG,
                         description="Write a lab pack into DIR (new or empty): "
                                     "student-1 ... student-N and instructor/.")
    mk.add_argument("dir", metavar="DIR", help="the pack's folder (new or empty)")
    mk.add_argument("--students", type=int, required=True, metavar="N",
                    help="number of students")
    mk.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the draws (default 0): the same seed gives the same pack")
    mk.add_argument("--level", choices=("intro", "advanced"), default="intro",
                    help="intro (default) or advanced (more questions, harder layouts)")
    mk.add_argument("--overwrite", action="store_true",
                    help="replace a pack made before in DIR (its answers are lost)")
    mk.add_argument("--workers", type=int, default=None, metavar="N",
                    help="processes making students at once (default: one per core)")
    gr = lsub.add_parser("grade", help="check the class's answers against the key",
                         formatter_class=raw, epilog=EPILOG,
                         description="Check every student's latest answers against "
                                     "DIR/instructor/key.json; write grades.csv and "
                                     "progress.html there.")
    gr.add_argument("dir", metavar="DIR", help="the pack's folder")
    gr.add_argument("--csv", default=None, metavar="FILE",
                    help="also write the table (one row per student and question) here")
    gr.add_argument("--json", action="store_true",
                    help="print the grades as JSON (the \"lab-grade\" answer, "
                         "docs/json.md) instead of the table")
    an = lsub.add_parser("answer", help="check and record one answer of a student",
                         formatter_class=raw, epilog=EPILOG,
                         description="Check one answer against the student's key and record "
                                     "it in their answers.sqlite, as the notebook's Check "
                                     "button does.")
    an.add_argument("student_dir", metavar="STUDENT_DIR", help="the student's folder")
    an.add_argument("question", metavar="QUESTION", help="the question's id (see lab.json)")
    an.add_argument("values", nargs="+", metavar="VALUE",
                    help="the answer; several for a question that takes several choices")
    return p


def grade_text(grades: Any) -> str:
    """One line per student: score, right / questions, and the questions answered wrong."""
    from ...lab import summary
    from ...lab.grade import score_text

    s = summary(grades)
    width = max([len(str(x)) for x in s["student"]] + [7])
    lines = [f"{'student':<{width}}  score  right  wrong  unanswered  answered wrong"]
    for _, r in s.iterrows():
        wrong = ", ".join(r["wrong_questions"]) or "-"
        lines.append(f"{r['student']:<{width}}  {score_text(r['score_pct']):>5}  "
                     f"{r['right']:>2}/{r['questions']:<2}  {r['wrong']:>5}  "
                     f"{r['unanswered']:>10}  {wrong}")
    total = float(s["score_pct"].mean()) if len(s) else 0.0
    lines.append(f"class: {len(s)} students, mean score {score_text(total)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit lab ...``; returns the exit status."""
    action = getattr(args, "lab_command", None)
    if action is None:
        args.lab_parser.print_help()
        return 2
    from ... import lab

    if action == "make":
        start = time.perf_counter()
        pack = lab.make(args.dir, students=args.students, seed=args.seed, level=args.level,
                        overwrite=args.overwrite, workers=args.workers)
        took = time.perf_counter() - start
        print(f"wrote a pack for {counted(args.students, 'student')} ({args.level}, "
              f"seed {args.seed}) "
              f"in {took:.1f} s:\n  {pack}/student-1 ... student-{args.students}\n"
              f"  {pack}/instructor/key.json (the answer key; keep it from the students)\n"
              f"a student's app: perfkit serve --lab {pack}/student-1\n"
              f"grade the class: perfkit lab grade {pack}")
        return 0
    if action == "grade":
        grades = lab.grade(args.dir)
        as_json = getattr(args, "json", False)
        if as_json:
            from ...answers import dumps, lab_grade_answer

            print(dumps(lab_grade_answer(grades, pack=str(Path(args.dir).expanduser()))))
        else:
            print(grade_text(grades))
            folder = Path(args.dir).expanduser() / "instructor"
            print(f"wrote {folder / 'grades.csv'} and {folder / 'progress.html'}")
        if args.csv:
            target = Path(args.csv).expanduser()
            try:
                grades.to_csv(target, index=False)
            except OSError as exc:
                raise PerfkitError(f"--csv: cannot write {target}: "
                                   f"{exc.strerror or exc}") from None
            if not as_json:  # stdout holds the JSON alone
                print(f"wrote {target}")
        return 0
    if action == "answer":
        value: Any = args.values[0] if len(args.values) == 1 else list(args.values)
        verdict = lab.answer(args.student_dir, args.question, value, source="cli")
        print(verdict)
        return 0 if verdict.correct else 1
    return 2
