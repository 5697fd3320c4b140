"""``perfkit lab make|answer|grade`` and ``perfkit serve --lab``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from perfkit import cli
from perfkit.lab.key import LAB_ENV

pytestmark = pytest.mark.xdist_group("lab")


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_make_answer_grade(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pack = tmp_path / "class"
    assert cli.main(["lab", "make", str(pack), "--students", "2", "--seed", "9",
                     "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "wrote a pack for 2 students" in out and f"perfkit serve --lab {pack}" in out
    key = json.loads((pack / "instructor" / "key.json").read_text())
    right = key["entries"]["student-1"]["answers"]["bubble"]["answer"]
    assert cli.main(["lab", "answer", str(pack / "student-1"), "bubble", f"{right:.4g}"]) == 0
    assert "bubble (attempt 1): right." in capsys.readouterr().out
    assert cli.main(["lab", "answer", str(pack / "student-2"), "bubble", "99999"]) == 1
    assert "not yet" in capsys.readouterr().out
    choices = key["entries"]["student-1"]["answers"]["recompute_effective"]["answer"]
    assert cli.main(["lab", "answer", str(pack / "student-1"), "recompute_effective",
                     *choices]) == 0
    capsys.readouterr()
    assert cli.main(["lab", "grade", str(pack), "--csv", str(tmp_path / "g.csv")]) == 0
    text = capsys.readouterr().out
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("student-")}
    assert "bubble" in lines["student-2"] and " 13 %" in lines["student-1"]
    assert (tmp_path / "g.csv").is_file()
    assert cli.main(["lab", "make", str(pack), "--students", "1"]) == 2
    assert "already holds a lab pack" in capsys.readouterr().err
    assert cli.main(["lab", "grade", str(tmp_path)]) == 2
    assert "no answer key" in capsys.readouterr().err


def test_serve_lab(intro_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake_serve(profile: Any, **kwargs: Any) -> int:
        import os

        seen.update(kwargs, profile=profile, env=os.environ.get(LAB_ENV))
        return 0

    monkeypatch.setattr(cli.launcher, "serve", fake_serve)
    monkeypatch.setenv(LAB_ENV, "")  # restored (unset) after the test: serve sets it
    student = tmp_path / "student-3"
    shutil.copytree(intro_pack / "student-3", student)
    assert cli.main(["serve", "--lab", str(student), "--no-browser", "--port", "8999"]) == 0
    assert seen["notebook"] == (student / "lab.ipynb").resolve()
    assert seen["env"] == str(student.resolve()) and seen["profile"] is None
    assert seen["port"] == 8999 and seen["open_browser"] is False
    assert cli.main(["serve", "sample:slow-rank", "--lab", str(student)]) == 2
    assert "not both" in capsys.readouterr().err
    assert cli.main(["serve", "--lab", str(tmp_path)]) == 2
    assert "no lab sheet here" in capsys.readouterr().err
    (student / "lab.ipynb").unlink()
    assert cli.main(["serve", "--lab", str(student)]) == 2
    assert "notebook is missing" in capsys.readouterr().err
