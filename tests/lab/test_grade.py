"""Answering and grading: a class fills its notebooks, the grade is right.

One student answers in their notebook, executed with a Jupyter kernel (the Check
buttons, as a student presses them); the others answer through ``pk.lab.answer``. Every
answer given as right is the key's answer put the way a student would type it (numbers
rounded to 4 significant digits, within every tolerance); every wrong one is off by far
more than its tolerance or another choice. The grade must give 100 % to the students who
answered everything right and name exactly the questions answered wrong.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import nbformat
import pytest

import perfkit as pk
from perfkit import report
from perfkit.lab.key import LabError

pytestmark = pytest.mark.xdist_group("lab")


def _typed(entry: dict[str, Any]) -> Any:
    """The key's answer as a student types it."""
    if entry["kind"] == "number":
        rounded = float(f"{entry['answer']:.4g}")  # four significant digits
        return f"{rounded:g}"
    return entry["answer"]


def _wrong(entry: dict[str, Any]) -> Any:
    """An answer that is wrong for sure."""
    if entry["kind"] == "number":
        return entry["answer"] * 1.5 + 10
    if entry["kind"] == "choices":
        options = [o for o in entry["options"] if o not in entry["answer"]]
        return options[:1] + list(entry["answer"]) if options else []
    return next(o for o in entry["options"] if o != entry["answer"])


@pytest.fixture(scope="module")
def graded(intro_pack: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pack = tmp_path_factory.mktemp("graded") / "class"
    shutil.copytree(intro_pack, pack)
    key = json.loads((pack / "instructor" / "key.json").read_text())
    answers = {s: e["answers"] for s, e in key["entries"].items()}
    qids = list(answers["student-1"])  # a student's own questions (a pipeline job's differ)
    wrong: dict[str, set[str]] = {s: set() for s in answers}
    unanswered: dict[str, set[str]] = {s: set() for s in answers}

    # student-1: every answer through the notebook's Check buttons (a kernel)
    nb = nbformat.read(pack / "student-1" / "lab.ipynb", as_version=4)
    values = {q: _typed(a) for q, a in answers["student-1"].items()}
    nb.cells.append(nbformat.v4.new_code_cell(
        "import json\n"
        f"values = json.loads({json.dumps(json.dumps(values))})\n"
        "verdicts = {}\n"
        "for qid, value in values.items():\n"
        "    box = sheet.ask(qid)\n"
        "    box.value = value\n"
        "    box.button.click()\n"
        "    verdicts[qid] = (box.verdict.correct, 'Right.' in box.feedback.value)\n"
        "print(json.dumps(verdicts))"))
    with pytest.MonkeyPatch.context() as mp:  # the kernel finds the folder as a student's
        mp.delenv("PERFKIT_LAB", raising=False)
        report.notebook_client(nb, cwd=pack / "student-1", timeout=600,
                               transport="ipc").execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors, errors
    printed = [o["text"] for o in nb.cells[-1]["outputs"] if o.output_type == "stream"]
    notebook_verdicts = json.loads(printed[-1])

    # student-2: everything right through pk.lab.answer
    for q in answers["student-2"]:
        assert pk.lab.answer(pack / "student-2", q, _typed(answers["student-2"][q])).correct
    # student-3: three wrong, the rest right
    for i, q in enumerate(answers["student-3"]):
        bad = i in (0, 5, 11)
        verdict = pk.lab.answer(pack / "student-3", q,
                                _wrong(answers["student-3"][q]) if bad
                                else _typed(answers["student-3"][q]))
        assert verdict.correct is not bad
        if bad:
            wrong["student-3"].add(q)
    # student-4: half unanswered
    for i, q in enumerate(answers["student-4"]):
        if i % 2:
            unanswered["student-4"].add(q)
        else:
            pk.lab.answer(pack / "student-4", q, _typed(answers["student-4"][q]))
    # student-5: wrong first, then right (the latest counts)
    for q in answers["student-5"]:
        pk.lab.answer(pack / "student-5", q, _wrong(answers["student-5"][q]))
        pk.lab.answer(pack / "student-5", q, _typed(answers["student-5"][q]))
    # student-6: right first, then changed to a wrong one for two questions
    for i, q in enumerate(answers["student-6"]):
        pk.lab.answer(pack / "student-6", q, _typed(answers["student-6"][q]))
        if i in (2, 8):
            pk.lab.answer(pack / "student-6", q, _wrong(answers["student-6"][q]))
            wrong["student-6"].add(q)
    return {"pack": pack, "grades": pk.lab.grade(pack), "wrong": wrong,
            "unanswered": unanswered, "notebook": notebook_verdicts, "qids": qids}


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_notebook_check_buttons_record_answers(graded: dict[str, Any]) -> None:
    verdicts = graded["notebook"]
    assert set(verdicts) == set(graded["qids"])
    assert all(correct and shown for correct, shown in verdicts.values()), verdicts
    book = pk.lab.AnswerBook(graded["pack"] / "student-1", readonly=True).attempts()
    assert set(book["source"]) == {"notebook"}
    assert len(book) == len(graded["qids"])


def test_grade_gives_full_marks_and_names_every_wrong_answer(graded: dict[str, Any]) -> None:
    grades, n = graded["grades"], len(graded["qids"])
    assert len(grades) == 6 * n
    summary = grades.attrs["summary"].set_index("student")
    for student in ("student-1", "student-2", "student-5"):
        assert summary.loc[student, "score_pct"] == 100.0
        assert summary.loc[student, "wrong_questions"] == []
    for student in ("student-3", "student-6"):
        assert set(summary.loc[student, "wrong_questions"]) == graded["wrong"][student]
        assert summary.loc[student, "score_pct"] == pytest.approx(
            100 * (n - len(graded["wrong"][student])) / n)
    named = grades[grades["status"] == "wrong"]
    assert {(r.student, r.question) for r in named.itertuples()} == {
        (s, q) for s, qs in graded["wrong"].items() for q in qs}
    s4 = grades[grades["student"] == "student-4"]
    assert set(s4.loc[s4["status"] == "unanswered", "question"]) == graded["unanswered"][
        "student-4"]
    assert summary.loc["student-4", "wrong"] == 0
    # attempts and the first right answer are kept
    s5 = grades[grades["student"] == "student-5"]
    assert (s5["attempts"] == 2).all() and s5["ever_right"].all()


def test_grade_checks_against_the_key_not_the_stored_verdicts(graded: dict[str, Any],
                                                              tmp_path: Path) -> None:
    pack = tmp_path / "class"
    shutil.copytree(graded["pack"], pack)
    # a student who edits their answers file to mark a wrong answer right gains nothing
    with sqlite3.connect(pack / "student-3" / "answers.sqlite") as conn:
        conn.execute("UPDATE attempts SET correct = 1")
    grades = pk.lab.grade(pack, write=False)
    s3 = grades[grades["student"] == "student-3"]
    assert set(s3.loc[s3["status"] == "wrong", "question"]) == graded["wrong"]["student-3"]


def test_grade_writes_the_table_and_an_offline_chart(graded: dict[str, Any]) -> None:
    folder = graded["pack"] / "instructor"
    table = (folder / "grades.csv").read_text()
    assert table.splitlines()[0].startswith("student,question,title")
    page = (folder / "progress.html").read_text()
    assert "<svg" in page and "student-6" in page
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "<script"):
        assert cdn not in page


def test_the_progress_grid_keeps_the_order_the_questions_are_asked(
        graded: dict[str, Any]) -> None:
    """Students of a pipeline job are asked the bubble in their step where the others are
    asked exposed communication: the grid's columns follow the key's order of questions,
    not the order in which the first student happens to meet them (the bubble came last,
    after the planner, when student-1 had a data-parallel job)."""
    key = json.loads((graded["pack"] / "instructor" / "key.json").read_text())
    grades = graded["grades"]
    asked = set(grades["question"])
    assert {"exposed_comm", "step_bubble"} <= asked  # both kinds of job in the class
    spec = pk.lab.progress_chart(grades).to_dict()
    grid = spec["vconcat"][0]
    assert grid["encoding"]["x"]["sort"] == [q["id"] for q in key["questions"]
                                             if q["id"] in asked]


def test_answer_rejects_unknown_questions_and_foreign_folders(intro_pack: Path,
                                                             tmp_path: Path) -> None:
    student = tmp_path / "s"
    shutil.copytree(intro_pack / "student-1", student)
    with pytest.raises(LabError, match="no question 'nope'.*throughput"):
        pk.lab.answer(student, "nope", 1)
    with pytest.raises(LabError, match="not a student folder"):
        pk.lab.answer(tmp_path, "throughput", 1)
    verdict = pk.lab.answer(student, "throughput", "not a number")
    assert not verdict.correct and "not a number" in verdict.message
    verdict = pk.lab.answer(student, "fault", "a made-up problem")
    assert not verdict.correct and not verdict.counted
    assert "'a made-up problem' is not one of the options" in verdict.message
    (student / "answers.sqlite").write_bytes(b"hello, not a database")
    with pytest.raises(LabError, match="not a perfkit lab answers file"):
        pk.lab.answer(student, "throughput", 1)
    with pytest.raises(LabError, match="no answer key"):
        pk.lab.grade(tmp_path)


def test_the_progress_bars_count_whole_students() -> None:
    """Two students: the count axis read 0.0, 0.5, 1.0, 1.5, 2.0 (half a student)."""
    import re

    import pandas as pd
    import vl_convert as vlc

    from perfkit.charts.lab import class_progress_chart

    frame = pd.DataFrame({"student": ["s1", "s1", "s2", "s2"], "question": ["a", "b"] * 2,
                          "status": ["right", "wrong", "right", "unanswered"]})
    svg = vlc.vegalite_to_svg(class_progress_chart(frame).to_dict())
    ticks = set(re.findall(r">([0-9.]+)</text>", svg))
    assert ticks == {"0", "1", "2"}, ticks
