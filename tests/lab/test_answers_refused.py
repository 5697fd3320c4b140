"""A non-numeric answer to a numeric question costs no attempt, and the instructor's
progress page shows scores in the formatting module's digits (``6.67 %``, not
``6.666667``)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import perfkit as pk

pytestmark = pytest.mark.xdist_group("lab")


def _copy(pack: Path, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the pack the test may answer in, and its answer key."""
    shutil.copytree(pack, tmp_path / "class")
    return tmp_path / "class", json.loads((tmp_path / "class" / "instructor" /
                                           "key.json").read_text())


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_text_for_a_number_is_refused_without_an_attempt(
        intro_pack: Path, tmp_path: Path) -> None:
    pack, key = _copy(intro_pack, tmp_path)
    answers = key["entries"]["student-1"]["answers"]
    numeric = [q for q, e in answers.items() if e["kind"] == "number"]
    assert numeric
    q = numeric[0]
    student = pack / "student-1"

    refused = pk.lab.answer(student, q, "abc")
    assert not refused.counted and not refused.correct and refused.attempt == 0
    assert "did not count as an attempt" in refused.message
    assert pk.lab.AnswerBook(student, readonly=True).attempts().empty  # nothing recorded
    # the first real answer is attempt 1
    wrong = pk.lab.answer(student, q, str(answers[q]["answer"] * 1.5 + 10))
    assert wrong.counted and wrong.attempt == 1

    # one right answer of n questions: the score is 100/n %, in whole percent as the CLI
    # writes it, and so is every other student's (the page had "0 %" beside "6.67 %")
    others = [s for s in key["entries"] if s != "student-1"]
    first = next(iter(key["entries"][others[0]]["answers"]))
    right = key["entries"][others[0]]["answers"][first]
    value = right["answer"]
    typed = f"{float(format(value, '.4g')):g}" if right["kind"] == "number" else value
    assert pk.lab.answer(pack / others[0], first, typed).correct
    pk.lab.grade(pack)
    page = (pack / "instructor" / "progress.html").read_text(encoding="utf-8")
    n = len(key["entries"][others[0]]["answers"])
    assert f"<td>{round(100 / n)} %</td>" in page
    scores = re.findall(r"<td>(\d+(?:\.\d+)? %)</td>", page)
    assert len(scores) == len(key["entries"]) and "0 %" in scores
    assert all(re.fullmatch(r"\d+ %", c) for c in scores), scores
    cells = re.findall(r"<td>([^<]*)</td>", page)
    assert not [c for c in cells if re.fullmatch(r"-?\d+\.\d{4,}", c)], cells


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_served_app_shows_no_python(intro_pack: Path, monkeypatch) -> None:
    from perfkit.lab.app import LAB_ENV, Sheet

    student = intro_pack / "student-1"
    monkeypatch.delenv(LAB_ENV, raising=False)
    notebook = Sheet(student)._brief()
    assert "perfkit.plan.search(" in notebook  # the notebook, which shows its code anyway
    monkeypatch.setenv(LAB_ENV, str(student))  # what `perfkit serve --lab` sets
    app = Sheet(student)._brief()
    assert "perfkit.plan.search(" not in app and "in Python" not in app
    assert not re.search(r"\w+\.\w+\([^)]*=", app)  # no call with keyword arguments


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_a_step_table_titled_ms_shows_every_time_in_ms(intro_pack: Path) -> None:
    from perfkit.lab.app import Sheet

    sheet = Sheet(intro_pack / "student-1")
    steps = sheet.evidence.job_steps()
    times = [c for c in steps.columns if c.endswith("_ms")]
    assert len(times) >= 4
    html = sheet._job_steps()
    assert "(ms)" in html
    # every header of a time column says ms; no s or µs column under the "(ms)" caption
    headers = re.findall(r"<th[^>]*>(.*?)</th>", html, flags=re.S)
    units = [re.search(r"\((µs|ms|s)\b", h) for h in headers]
    assert [u.group(1) for u in units if u] and all(u.group(1) == "ms" for u in units if u)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_a_choice_not_offered_is_refused_and_unquoted_words_are_one_choice(
        intro_pack: Path, tmp_path: Path) -> None:
    pack, key = _copy(intro_pack, tmp_path)
    student, entries = next((s, e["answers"]) for s, e in key["entries"].items()
                            if "memory_fit" in e["answers"])
    folder = pack / student
    right = entries["memory_fit"]["answer"]  # "fits" or "does not fit"
    wrong = "fits" if right == "does not fit" else "does not fit"
    for slip in ("maybe", "1", ["does", "not", "fit", "at", "all"]):
        refused = pk.lab.answer(folder, "memory_fit", slip)
        assert not refused.counted and refused.attempt == 0, slip
        assert "is not one of the options (fits; does not fit)" in refused.message
    assert pk.lab.AnswerBook(folder, readonly=True).attempts().empty  # nothing recorded
    # the words of one choice given apart, as a shell splits `lab answer ... does not fit`
    first = pk.lab.answer(folder, "memory_fit", wrong.split())
    assert first.counted and first.attempt == 1 and first.value == wrong and not first.correct
    second = pk.lab.answer(folder, "memory_fit", right.split())
    assert second.counted and second.attempt == 2 and second.correct
