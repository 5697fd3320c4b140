"""``perfkit notebooks DIR``: copies the guided notebooks, never loses the user's edits,
and a copied notebook runs from its new folder on the bundled sample it names."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest

from perfkit import cli, report

ROOT = Path(__file__).resolve().parents[1]
GUIDED = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")
                if p.name != "dashboard.ipynb")


def test_copies_every_guided_notebook_and_prints_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "work" / "nbs"  # parents are created
    assert cli.main(["notebooks", str(target)]) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in target.iterdir()) == GUIDED
    for name in GUIDED:
        assert (target / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    assert f"copied: {', '.join(GUIDED)}" in out
    assert f"jupyter lab {target}" in out.splitlines()[-1]


def test_default_folder_is_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["notebooks"]) == 0
    assert sorted(p.name for p in (tmp_path / "perfkit-notebooks").iterdir()) == GUIDED


def test_edited_copies_are_kept_unless_force(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["notebooks", str(tmp_path)]) == 0
    edited = tmp_path / "01_metrics.ipynb"
    edited.write_text(edited.read_text() + "\n", encoding="utf-8")
    mine = edited.read_bytes()
    (tmp_path / "03_operators.ipynb").unlink()
    (tmp_path / "my_notes.txt").write_text("mine")
    capsys.readouterr()

    assert cli.main(["notebooks", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert edited.read_bytes() == mine
    assert "copied: 03_operators.ipynb\n" in out
    assert "kept (" in out and "01_metrics.ipynb" in out.split("kept (")[1]
    assert "already up to date: 00_start_here.ipynb" in out
    assert (tmp_path / "my_notes.txt").read_text() == "mine"

    assert cli.main(["notebooks", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    assert "replaced (--force): 01_metrics.ipynb" in out
    assert edited.read_bytes() == (ROOT / "notebooks" / "01_metrics.ipynb").read_bytes()
    assert (tmp_path / "my_notes.txt").read_text() == "mine"


def test_bad_folders_are_one_line_errors(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert cli.main(["notebooks", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file" in err
    assert cli.main(["notebooks", str(ROOT / "notebooks")]) == 2
    assert "perfkit's own notebook folder" in capsys.readouterr().err
    # a folder under a file cannot be made: the system's reason, not a traceback
    assert cli.main(["notebooks", str(a_file / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be made a folder (Not a directory)" in err
    assert str(a_file / "sub") in err and "unexpected" not in err
    assert a_file.read_text() == "x"


def test_parameters_name_bundled_samples_not_paths() -> None:
    for name in GUIDED:
        first = nbformat.read(ROOT / "notebooks" / name, as_version=4).cells[0].source
        assert 'PROFILE = "sample:' in first, name
        assert "data/" not in first and "bundled_profile(" not in first, name


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.timeout(300)
def test_a_copied_notebook_runs_in_its_new_folder(tmp_path: Path) -> None:
    target = tmp_path / "nbs"
    assert cli.main(["notebooks", str(target)]) == 0
    nb = nbformat.read(target / "07_cluster.ipynb", as_version=4)
    client = report.notebook_client(nb, cwd=target, timeout=240, transport="ipc")
    start = time.perf_counter()
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == [], errors
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("display_data", "execute_result")]
    assert len(shown) >= 3, f"only {len(shown)} outputs in {time.perf_counter() - start:.0f} s"
    # the working folder holds the notebooks and nothing the kernel wrote
    assert sorted(p.name for p in target.iterdir()) == GUIDED
