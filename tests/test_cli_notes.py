"""``perfkit info`` and ``perfkit report`` show what was repaired or left out while reading.

A copy of the bundled 4-rank ``slow-rank`` profile is damaged in two ways the loader
records in ``meta.notes``: a negative kernel duration in rank 0 (set to NA) and an
unreadable ``profiler_info`` in rank 1 (the rank is not loaded). Both notes must reach the
text of ``perfkit info`` and the page of ``perfkit report``, whatever notebook runs.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import nbformat
import pytest

import perfkit as pk
from perfkit import cli

ROOT = Path(__file__).resolve().parents[1]
SLOW_RANK = ROOT / "data" / "simulated" / "slow-rank"


@pytest.fixture
def damaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "slow-rank"
    shutil.copytree(SLOW_RANK, d)
    ranks = sorted(p for p in d.iterdir() if p.is_dir())
    f = ranks[0] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    rows = list(csv.reader(io.StringIO(f.read_text(encoding="utf-8"))))
    rows[3][rows[0].index("Duration(us)")] = "-5.5"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    f.write_text(buf.getvalue(), encoding="utf-8")
    (next(ranks[1].glob("profiler_info*.json"))).write_text("[]", encoding="utf-8")
    return d


def _expected(path: Path) -> list[str]:
    """The two notes the damage gives, as the API records them."""
    loaded = pk.load(path, progress=False)
    assert sorted(loaded.failed) == [1]
    notes = [n for n in loaded.meta.notes
             if n.startswith("rank 1 not loaded") or "negative dur_us" in n]
    assert len(notes) == 2, loaded.meta.notes
    return notes


def test_info_prints_the_notes(damaged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = _expected(damaged)
    assert cli.main(["info", str(damaged), "--findings", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # notes are wrapped over lines
    for note in expected:
        assert f"note: {' '.join(note.split())}" in out, note
    assert "ranks 3 (0, 2-3)" in out


@pytest.mark.timeout(120)
def test_report_lists_the_notes_whatever_the_notebook(damaged: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("PROFILE = None")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_markdown_cell("# A notebook that shows no notes"),
                nbformat.v4.new_code_cell("print('steps only')")]
    plain = tmp_path / "plain.ipynb"
    nbformat.write(nb, plain)
    out = tmp_path / "report.html"
    assert cli.main(["report", str(damaged), "-o", str(out), "--notebook", str(plain),
                     "--no-progress"]) == 0
    capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    import html

    listed = page[page.index('<section class="reading">'):page.index("</section>")]
    from perfkit.widgets.load_notes import plain_note

    for note in _expected(damaged):  # in the dashboard's words, as its Overview says them
        assert f"<li>{html.escape(plain_note(note))}</li>" in listed, note
    assert listed.count("<li>") == len(pk.load(damaged, progress=False).meta.notes)
    assert page.index("Read with notes") < page.index("steps only")
