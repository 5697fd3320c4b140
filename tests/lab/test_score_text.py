"""Scores are written one way: whole percent, on the grade page and in ``perfkit lab grade``.

The page wrote "0 %" beside "20.0 %" (three significant digits) and the command "20%":
three forms of one figure. Both now write :func:`perfkit.lab.grade.score_text`.
"""

from __future__ import annotations

import pandas as pd

from perfkit.cli.commands.lab import grade_text
from perfkit.lab.grade import score_text


def _grades(rights: dict[str, int], questions: int = 5) -> pd.DataFrame:
    rows = []
    for student, right in rights.items():
        for i in range(questions):
            status = "right" if i < right else "wrong"
            rows.append({"student": student, "question": f"q{i}", "status": status})
    return pd.DataFrame(rows)


def test_every_score_is_whole_percent_with_a_space() -> None:
    assert [score_text(v) for v in (0.0, 20.0, 100.0 / 3, 100.0)] == \
        ["0 %", "20 %", "33 %", "100 %"]
    lines = grade_text(_grades({"ann": 0, "bob": 1, "cy": 5})).splitlines()
    assert lines[1].split()[1:3] == ["0", "%"]  # 0 of 5
    assert lines[2].split()[1:3] == ["20", "%"]  # 1 of 5
    assert lines[3].split()[1:3] == ["100", "%"]
    assert lines[-1] == "class: 3 students, mean score 40 %"  # (0 + 20 + 100) / 3
    assert len({line.index("%") for line in lines[1:4]}) == 1  # one column
