"""``pk.lab.make``: what a pack holds, that it is reproducible, and what it refuses."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

import perfkit as pk
from perfkit.errors import InvalidArgumentError
from perfkit.lab.key import LabError, read_check, read_sheet
from perfkit.lab.questions import QUESTIONS, questions_for

from .conftest import INTRO_SEED

pytestmark = pytest.mark.xdist_group("lab")
make_module = importlib.import_module("perfkit.lab.make")  # the module, not pk.lab.make

INTRO = ["throughput", "mfu", "bubble", "top_operator", "operator_bound", "exposed_comm",
         "step_bubble", "wait_or_transit", "slow_component", "fault", "memory_need",
         "memory_fit", "recompute_effective", "recompute_mul", "planner_layout",
         "planner_step"]
ADVANCED_ONLY = {"hfu", "operator_intensity", "wait_share"}


def _asked(ids: list[str], settings: dict[str, Any]) -> list[str]:
    """The level's questions a student of that job is asked: the bubble in the step on a
    pipeline, exposed communication where the job has data or tensor parallelism."""
    p = settings["job"]["parallel"]
    skip = set()
    if p["pp"] == 1:
        skip.add("step_bubble")
    if p["dp"] * p["tp"] * p["cp"] == 1:
        skip.add("exposed_comm")
    return [q for q in ids if q not in skip]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_pack_holds_a_folder_per_student_and_the_key(intro_pack: Path) -> None:
    assert sorted(p.name for p in intro_pack.iterdir()) == [
        ".perfkit-lab", "instructor", *[f"student-{i}" for i in range(1, 7)]]
    assert {p.name for p in (intro_pack / "instructor").iterdir()} >= {
        "key.json", "README.md", "answers.md"}
    key = pk.lab.read_key(intro_pack)
    assert (key["seed"], key["level"], key["students"]) == (INTRO_SEED, "intro", 6)
    assert [q["id"] for q in key["questions"]] == INTRO
    student = intro_pack / "student-3"
    for rel in ("profiles/job", "profiles/cluster", "ir/recompute_validate.ir.gz",
                "ir/recompute.yaml", "lab.ipynb", "lab.json", "README.md", ".lab/check"):
        assert (student / rel).exists(), rel
    assert not (student / "answers.sqlite").exists()  # created at the first answer
    job = pk.load(student / "profiles" / "job", cache=False, progress=False)
    assert len(job.ranks) == 2
    cluster = pk.load(student / "profiles" / "cluster", cache=False, progress=False)
    assert len(cluster.ranks) == 4
    readme = (intro_pack / "instructor" / "README.md").read_text()
    assert all(f"`{q}`" in readme for q in INTRO)


def test_levels_ask_what_they_say(advanced_pack: Path) -> None:
    assert [q.id for q in questions_for("intro")] == INTRO
    advanced = [q.id for q in questions_for("advanced")]
    assert set(advanced) == set(INTRO) | ADVANCED_ONLY and len(advanced) == 19
    sheet = read_sheet(advanced_pack / "student-1")
    settings = pk.lab.read_key(advanced_pack)["entries"]["student-1"]["settings"]
    assert [q["id"] for q in sheet["questions"]] == _asked(advanced, settings)
    assert len(sheet["questions"]) == 18
    with pytest.raises(InvalidArgumentError, match="level"):
        questions_for("expert")


def test_the_notebook_asks_exactly_the_pack_questions(intro_pack: Path,
                                                      advanced_pack: Path) -> None:
    template = json.loads(make_module.template_path().read_text())
    asked = [c["metadata"].get("lab", {}).get("question") for c in template["cells"]]
    assert [q for q in asked if q] == list(QUESTIONS)  # every question, in order
    first = template["cells"][0]
    assert first["metadata"]["tags"] == ["parameters"]
    assert all(not c.get("outputs") for c in template["cells"] if c["cell_type"] == "code")
    asked_somewhere = set()
    for pack, ids in ((intro_pack, INTRO), (advanced_pack, list(QUESTIONS))):
        key = pk.lab.read_key(pack)
        for student, entry in key["entries"].items():
            nb = json.loads((pack / student / "lab.ipynb").read_text())
            cells = [c["metadata"].get("lab", {}).get("question") for c in nb["cells"]]
            mine = _asked(ids, entry["settings"])
            assert [q for q in cells if q] == mine == list(entry["answers"]), student
            assert [q["id"] for q in read_sheet(pack / student)["questions"]] == mine
            asked_somewhere |= set(mine)
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "def " not in code and "for " not in code  # wiring only
    assert asked_somewhere == set(QUESTIONS)  # both kinds of job among the students


def test_the_student_sees_no_answer(intro_pack: Path) -> None:
    key = pk.lab.read_key(intro_pack)
    for student, entry in key["entries"].items():
        folder = intro_pack / student
        public = (folder / "lab.json").read_text() + (folder / "README.md").read_text() \
            + (folder / "lab.ipynb").read_text()
        for fault in entry["settings"]["job"]["faults"] + entry["settings"]["cluster"]["faults"]:
            assert fault["fault"] not in public
        assert "truth" not in public and "derivation" not in public
        hidden = (folder / ".lab" / "check").read_bytes()
        assert b"throughput" not in hidden and str(entry["answers"]["fault"]["answer"]) \
            .encode() not in hidden
        # ... yet it holds the student's own key, for the Check button
        check = read_check(folder)
        assert {q: c["answer"] for q, c in check.items()} == {
            q: a["answer"] for q, a in entry["answers"].items()}


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_same_seed_same_student(intro_pack: Path, tmp_path: Path) -> None:
    entry = make_module.make_student(tmp_path, 4, seed=INTRO_SEED)
    key = pk.lab.read_key(intro_pack)
    assert json.loads(json.dumps(entry)) == key["entries"]["student-4"]
    assert _files(tmp_path / "student-4") == _files(intro_pack / "student-4")


def test_make_refuses_what_it_should(intro_pack: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me")
    with pytest.raises(LabError, match="not empty"):
        pk.lab.make(mine, students=1, workers=1, progress=False)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    with pytest.raises(LabError, match="already holds a lab pack"):
        pk.lab.make(intro_pack, students=1, workers=1, progress=False)
    for bad in ({"students": 0}, {"students": True}, {"students": 2, "seed": -1},
                {"students": 2, "level": "expert"}):
        with pytest.raises(InvalidArgumentError):
            pk.lab.make(tmp_path / "x", **bad)


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_overwrite_replaces_a_pack(tmp_path: Path) -> None:
    pack = pk.lab.make(tmp_path / "p", students=1, seed=3, workers=1, progress=False)
    pk.lab.answer(pack / "student-1", "bubble", 1.0)
    again = pk.lab.make(pack, students=1, seed=4, workers=1, progress=False, overwrite=True)
    assert not (again / "student-1" / "answers.sqlite").exists()
    assert pk.lab.read_key(again)["seed"] == 4
