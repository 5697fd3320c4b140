"""``perfkit lab make``: write a teaching pack, one folder per student and the key.

A pack::

    DIR/
      student-1/ ... student-N/      one per student (see perfkit.lab.brief.student_readme)
        profiles/job/, profiles/cluster/   their simulated profiles
        ir/recompute_validate.ir.gz, ir/recompute.yaml
        lab.ipynb, lab.json, README.md, .lab/check
      instructor/
        key.json, answers.md, README.md

Each student's setup is drawn from the seed (:func:`perfkit.lab.scenario.draw`), their
files are written, and every answer is computed from those files
(:mod:`perfkit.lab.questions`). A student is asked the level's questions that make sense
of their layout (``Question.asks``: exposed communication where the job has collectives,
the bubble in the step where it is a pipeline); key.json's ``questions`` lists every
question the level may ask. A draw whose symptom does not give the answer the
simulator's inputs decide is drawn again (up to :data:`MAX_ATTEMPTS` times). Students are
made in parallel processes (one per core by default); the same arguments give the same
pack.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import InvalidArgumentError, check_choice
from ..io._common.progress import Progress
from ..resources import NOTEBOOK_PACKAGE, resource_dir
from .brief import brief, config_yaml, instructor_readme, student_readme
from .data import StudentData
from .ir import CONFIG_FILE, IR_FILE, write_variant
from .key import (
    CHECK_FILE,
    KEY_FILE,
    KEY_FORMAT,
    KEY_VERSION,
    NOTEBOOK_FILE,
    SHEET_FILE,
    LabError,
    normalise,
    write_check,
    write_json,
)
from .questions import Question, questions_for
from .scenario import LEVELS, Setup, draw, student_name

__all__ = ["make", "make_student", "MAX_ATTEMPTS", "NOTEBOOK_NAME", "TEMPLATE",
           "template_path", "MAX_STUDENTS"]

#: Draws tried per student before giving up.
MAX_ATTEMPTS = 5
#: The student's notebook, in their folder.
NOTEBOOK_NAME = NOTEBOOK_FILE
#: The template shipped with perfkit's notebooks (``notebooks/lab/student.ipynb``).
TEMPLATE = "lab/student.ipynb"
#: Largest class one call makes.
MAX_STUDENTS = 1000
_MARKER = ".perfkit-lab"


def template_path() -> Path:
    """The student notebook's template, found with importlib.resources."""
    return resource_dir(NOTEBOOK_PACKAGE) / TEMPLATE


def _notebook(questions: list[Question]) -> dict[str, Any]:
    """The template with the cells of questions the pack does not ask removed."""
    path = template_path()
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LabError(f"{path}: the lab notebook template cannot be read ({exc}); "
                       "reinstall perfkit") from None
    asked = {q.id for q in questions}
    nb = copy.deepcopy(nb)
    nb["cells"] = [c for c in nb["cells"]
                   if c.get("metadata", {}).get("lab", {}).get("question", None) in
                   (None, *asked)]
    return nb


def _key_entry(q: Question, sol: Any, setup: Setup, settings: dict[str, Any]) -> dict[str, Any]:
    entry = {"title": q.title, "stage": q.stage, "kind": q.kind, "prompt": sol.prompt,
             "answer": sol.answer, "unit": q.unit, "options": sol.options,
             "derivation": sol.derivation,
             "settings": {name: settings[name] for name in sol.settings},
             "facts": sol.facts}
    if q.kind == "number":
        entry.update(sol.tolerance(q))
    truth = q.truth(setup)
    if truth is not None:
        entry["truth"] = truth
    return entry


def _disagreements(questions: list[Question], solutions: dict[str, Any],
                   setup: Setup) -> list[str]:
    out = []
    for q in questions:
        truth = q.truth(setup)
        if truth is not None and normalise(solutions[q.id].answer) != normalise(truth):
            out.append(f"{q.id}: the data say {solutions[q.id].answer!r}, the inputs "
                       f"{truth!r}")
        if q.kind != "number" and (not solutions[q.id].options
                                   or len(solutions[q.id].options) < 2):
            out.append(f"{q.id}: fewer than two choices")
    return out


def make_student(pack: str | os.PathLike[str], index: int, seed: int = 0,
                 level: str = "intro") -> dict[str, Any]:
    """Write one student's folder; return their entry of key.json.

    Parameters
    ----------
    pack : path
        The pack's folder (the student's folder is created in it, replaced if present).
    index : int
        The student's number (1-based).
    seed, level
        As for :func:`make`.
    """
    pack = Path(pack)
    folder = pack / student_name(index)
    problems: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        setup = draw(index, seed, level, attempt)
        questions = questions_for(level, setup)  # those this student's layout makes sense of
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        setup.job.run(folder)
        setup.cluster.run(folder)
        write_variant(setup.recompute.base, setup.recompute.naming, folder / IR_FILE)
        (folder / CONFIG_FILE).write_text(config_yaml(setup), encoding="utf-8")
        data = StudentData(folder, setup)
        solutions = {q.id: q.solve(data) for q in questions}
        problems = _disagreements(questions, solutions, setup)
        if not problems:
            break
    else:
        raise LabError(f"{folder}: no draw in {MAX_ATTEMPTS} gave clear symptoms "
                       f"({'; '.join(problems)}); try another seed")
    settings = setup.to_dict()
    answers = {q.id: _key_entry(q, solutions[q.id], setup, settings) for q in questions}
    sheet = {"format": KEY_FORMAT, "version": KEY_VERSION, "kind": "student sheet",
             "student": setup.student, "level": level, "perfkit": __version__,
             "brief": brief(setup),
             "questions": [{**q.meta(), "prompt": solutions[q.id].prompt,
                            "options": solutions[q.id].options,
                            **solutions[q.id].tolerance(q)} for q in questions]}
    write_json(folder / SHEET_FILE, sheet)
    write_check(folder, {q.id: {"kind": q.kind, "answer": solutions[q.id].answer,
                                **solutions[q.id].tolerance(q),
                                "options": solutions[q.id].options, "hint": q.hint,
                                "explanation": solutions[q.id].explanation}
                         for q in questions})
    write_json(folder / NOTEBOOK_NAME, _notebook(questions))
    (folder / "README.md").write_text(student_readme(setup, questions), encoding="utf-8")
    return {"settings": settings, "attempts": attempt + 1, "answers": answers}


def _answers_md(entries: dict[str, Any]) -> str:
    lines = ["# Answers, per student", "",
             "Generated with the pack; `key.json` holds the same, machine-readable.", ""]
    for student, entry in entries.items():
        job = entry["settings"]["job"]
        cluster = entry["settings"]["cluster"]
        faults = ", ".join(f["fault"] for f in job["faults"] + cluster["faults"])
        lines += [f"## {student}", "", f"Job: {job['model']['name']}, planted: {faults}.", "",
                  "| question | answer | derivation |", "|---|---|---|"]
        for qid, a in entry["answers"].items():
            ans = a["answer"]
            shown = (f"{ans:.4g} {a['unit']}".strip() if isinstance(ans, float)
                     else ", ".join(ans) if isinstance(ans, list) else str(ans))
            lines.append(f"| `{qid}` | {shown.replace('|', '/')} | "
                         f"{a['derivation'].replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


def _prepare(pack: Path, overwrite: bool) -> None:
    if pack.exists() and not pack.is_dir():
        raise LabError(f"{pack}: exists and is not a folder")
    if pack.is_dir() and any(pack.iterdir()):
        if not (pack / _MARKER).is_file():
            raise LabError(f"{pack}: exists and is not empty; give a new folder (perfkit "
                           "lab make never writes into a folder it did not make)")
        if not overwrite:
            raise LabError(f"{pack}: already holds a lab pack; pass overwrite=True "
                           "(--overwrite) to replace it, answers included")
        for child in pack.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    pack.mkdir(parents=True, exist_ok=True)
    (pack / _MARKER).write_text("made by perfkit lab make\n", encoding="utf-8")


def _pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes started with ``spawn``: each imports perfkit from this process's
    ``sys.path``, so from where this process imported it.

    Not ``forkserver``: its server is started with ``python -c``, whose ``sys.path`` begins
    with the current folder (Python 3.11 does not apply the parent's path there), so run
    from a folder holding a ``perfkit/`` checkout (the parent of a ``git clone``) every
    worker imported that folder instead of the installed package and failed ("cannot
    import name '__version__' from 'perfkit' (unknown location)", then BrokenProcessPool).
    ``spawn`` replaces the child's ``sys.path`` with the parent's before it imports
    anything of perfkit (:func:`multiprocessing.spawn.prepare`). Not ``fork``: unsafe in a
    process with threads (a Jupyter kernel).
    """
    return ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"))


def _remove_half_pack(pack: Path, created: bool) -> None:
    """Undo a ``make`` that failed: remove the folder it made, or empty the one it was
    given (empty, or a pack it was allowed to replace): no marker is left to block the
    retry, nothing the user had is touched (:func:`_prepare` refused other folders)."""
    if created:
        shutil.rmtree(pack, ignore_errors=True)
        return
    for child in pack.iterdir() if pack.is_dir() else ():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def make(dir: str | os.PathLike[str], students: int, seed: int = 0,  # noqa: A002
         level: str = "intro", *, overwrite: bool = False, workers: int | None = None,
         progress: bool | None = None) -> Path:
    """Write a lab pack for a class: one folder per student and the instructor's key.

    Parameters
    ----------
    dir : path
        The pack's folder: new, empty, or (with ``overwrite=True``) a pack made before.
    students : int
        How many students (folders ``student-1`` ... ``student-N``).
    seed : int
        Seed of the draws: the same seed, level and class size give the same pack.
    level : {"intro", "advanced"}
        ``"advanced"`` adds questions (HFU, arithmetic intensity, share of wait) and
        harder set-ups (interleaved pipelines, sequence parallelism, sharded optimizers).
    overwrite : bool
        Replace a pack made before in ``dir`` (its answers are lost).
    workers : int, optional
        Processes making students at once (default: one per core, at most one per
        student); 1 makes them in this process.
    progress : bool, optional
        Show progress (default: on).

    Returns
    -------
    Path
        ``dir``.

    Raises
    ------
    LabError
        ``dir`` is not empty and not a pack, or a student's draws never gave a clear
        symptom.
    """
    check_choice("level", level, LEVELS)
    if isinstance(students, bool) or not isinstance(students, int) \
            or not 1 <= students <= MAX_STUDENTS:
        raise InvalidArgumentError("students", f"must be a whole number in 1..{MAX_STUDENTS}",
                                   students)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgumentError("seed", "must be a whole number >= 0", seed)
    pack = Path(dir).expanduser()
    created = not pack.exists()
    _prepare(pack, overwrite)
    try:
        _make_pack(pack, students, seed, level, workers, progress)
    except BaseException:  # an error or Ctrl-C: no half pack, no marker blocking a retry
        _remove_half_pack(pack, created)
        raise
    return pack


def _make_pack(pack: Path, students: int, seed: int, level: str, workers: int | None,
               progress: bool | None) -> None:
    """Write the students and the key into ``pack``, prepared by :func:`_prepare`."""
    questions = questions_for(level)
    n_workers = min(workers or os.cpu_count() or 1, students)
    entries: dict[str, Any] = {}
    with Progress(students, "perfkit: lab pack", enabled=progress is not False) as bar:
        if n_workers <= 1:
            for i in range(1, students + 1):
                entries[student_name(i)] = make_student(pack, i, seed, level)
                bar.update(1)
        else:
            with _pool(n_workers) as pool:
                futures = {i: pool.submit(make_student, pack, i, seed, level)
                           for i in range(1, students + 1)}
                for i, fut in futures.items():
                    entries[student_name(i)] = fut.result()
                    bar.update(1)
    key = {"format": KEY_FORMAT, "version": KEY_VERSION, "kind": "answer key",
           "perfkit": __version__, "seed": seed, "level": level, "students": students,
           "files": {"sheet": SHEET_FILE, "check": CHECK_FILE, "notebook": NOTEBOOK_NAME,
                     "answers": "answers.sqlite"},
           "questions": [q.meta() for q in questions], "entries": entries}
    write_json(pack / KEY_FILE, key)
    instructor = pack / KEY_FILE
    (instructor.parent / "README.md").write_text(
        instructor_readme(level, seed, students, questions), encoding="utf-8")
    (instructor.parent / "answers.md").write_text(_answers_md(entries), encoding="utf-8")
