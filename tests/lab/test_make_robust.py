"""``perfkit lab make`` from a folder holding a ``perfkit/`` checkout, and after a failure
(issue 64, point 2).

Run in the parent of a ``git clone`` (a ``perfkit/`` folder in the current directory),
the worker processes imported that folder instead of the installed package: two worker
tracebacks ("cannot import name '__version__' from 'perfkit' (unknown location)") and
``BrokenProcessPool``. The half pack it left then blocked the retry ("already holds a lab
pack").
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import perfkit as pk
from perfkit.lab.key import KEY_FILE

pytestmark = pytest.mark.xdist_group("lab")
make_module = importlib.import_module("perfkit.lab.make")
ROOT = Path(__file__).resolve().parents[2]


def _perfkit_script() -> str | None:
    """The ``perfkit`` command of this environment: it does not put the current folder on
    ``sys.path``, as users run it."""
    here = Path(sys.executable).parent / ("perfkit.exe" if os.name == "nt" else "perfkit")
    return str(here) if here.is_file() else shutil.which("perfkit")


@pytest.mark.slow
def test_workers_never_import_a_perfkit_folder_of_the_current_directory(
        tmp_path: Path) -> None:
    script = _perfkit_script()
    if script is None:
        pytest.skip("no perfkit command installed in this environment")
    fake = tmp_path / "perfkit"
    fake.mkdir()
    (fake / "__init__.py").write_text("# a checkout's stand-in: no __version__\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(  # this checkout's perfkit, as the tests import it
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run([script, "lab", "make", "pack", "--students", "2", "--workers",
                           "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "BrokenProcessPool" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "pack").iterdir()
                  if p.name.startswith("student")) == ["student-1", "student-2"]
    assert (tmp_path / "pack" / KEY_FILE).is_file()


def _fails_on_second(real):  # noqa: ANN001, ANN202
    def make_student(pack, i, seed, level):  # noqa: ANN001, ANN202
        if i == 2:
            raise RuntimeError("injected failure while making student-2")
        return real(pack, i, seed, level)
    return make_student


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_a_failed_make_removes_what_it_wrote_and_the_retry_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = make_module.make_student
    pack = tmp_path / "new" / "pack"
    monkeypatch.setattr(make_module, "make_student", _fails_on_second(real))
    with pytest.raises(RuntimeError, match="injected failure"):
        pk.lab.make(pack, students=2, workers=1, progress=False)
    assert not pack.exists()  # student-1 and the marker were written, then removed
    monkeypatch.setattr(make_module, "make_student", real)
    assert pk.lab.make(pack, students=1, workers=1, progress=False) == pack
    assert (pack / "student-1").is_dir() and (pack / KEY_FILE).is_file()


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_a_failed_make_into_an_empty_folder_leaves_it_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = tmp_path / "given"
    pack.mkdir()
    monkeypatch.setattr(make_module, "make_student",
                        _fails_on_second(make_module.make_student))
    with pytest.raises(RuntimeError, match="injected failure"):
        pk.lab.make(pack, students=2, workers=1, progress=False)
    assert pack.is_dir() and list(pack.iterdir()) == []  # the user's folder stays
