"""``perfkit lab grade DIR --json``: the ``lab-grade`` answer, valid against the shipped
schema, its counts those of the answers recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from answer_schema import no_nan, validate

from perfkit import cli

pytestmark = pytest.mark.xdist_group("lab")


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_grade_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = tmp_path / "class"
    assert cli.main(["lab", "make", str(pack), "--students", "2", "--seed", "3",
                     "--workers", "1"]) == 0
    key = json.loads((pack / "instructor" / "key.json").read_text())
    right = key["entries"]["student-1"]["answers"]["bubble"]["answer"]
    assert cli.main(["lab", "answer", str(pack / "student-1"), "bubble", f"{right:.4g}"]) == 0
    assert cli.main(["lab", "answer", str(pack / "student-2"), "bubble", "99999"]) == 1
    capsys.readouterr()
    assert cli.main(["lab", "grade", str(pack), "--json"]) == 0
    answer = no_nan(capsys.readouterr().out)  # stdout holds the JSON alone
    validate(answer, "lab-grade")
    n_questions = len(key["entries"]["student-1"]["answers"])
    students = {s["student"]: s for s in answer["students"]}
    assert set(students) == {"student-1", "student-2"}
    one, two = students["student-1"], students["student-2"]
    assert (one["right"], one["wrong"], one["unanswered"]) == (1, 0, n_questions - 1)
    assert (two["right"], two["wrong"], two["wrong_questions"]) == (0, 1, ["bubble"])
    assert one["score_pct"] == pytest.approx(100 / n_questions)
    assert answer["mean_score_pct"] == pytest.approx(50 / n_questions)
    rows = {(a["student"], a["question"]): a for a in answer["answers"]}
    assert len(rows) == 2 * n_questions
    assert rows[("student-2", "bubble")]["status"] == "wrong"
    assert rows[("student-2", "bubble")]["answer"] == "99999"
