"""A folder whose ranks do not all load says so where the ranks are counted: the progress
line, the head of ``perfkit info`` and the notes of ``perfkit compare`` (not only among the
loader's notes)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from perfkit import cli
from perfkit.io._common.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "data" / "kineto-tiny-llama"


@pytest.fixture()
def half_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """rank 0 whole, rank 1 cut after 200 kB (a truncated JSON); a fresh cache."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "rank0.pt.trace.json.gz").write_bytes(
        (TINY / "rank0.pt.trace.json.gz").read_bytes())
    text = gzip.decompress((TINY / "rank1.pt.trace.json.gz").read_bytes())
    (folder / "rank1.pt.trace.json").write_bytes(text[:200_000])
    return folder


def test_info_heads_its_text_with_the_ranks_not_loaded(
        half_loaded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.read_bytes() for p in half_loaded.iterdir()}
    assert cli.main(["info", str(half_loaded), "--findings", "0"]) == 0
    captured = capsys.readouterr()
    head = captured.out.splitlines()[:10]
    assert head[1] == ("  warning: 1 of 2 ranks could not be loaded (rank 1): every figure "
                       "below is of the 1 rank loaded")
    assert any(line.split() == ["ranks", "1", "(0);", "1", "more", "not", "loaded", "(rank",
                                "1:", "see", "the", "notes)"] for line in head)
    # the progress line does not read as if both were loaded
    assert "2/2" in captured.err and "1 not loaded (see the notes)" in captured.err
    assert {p.name: p.read_bytes() for p in half_loaded.iterdir()} == before


def test_compare_notes_the_side_with_a_rank_missing(
        half_loaded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(half_loaded), str(TINY)]) in (0, 1)
    out = capsys.readouterr().out
    assert "run: 1 of 2 ranks could not be loaded (rank 1)" in out


def test_progress_summary_ends_with_its_note() -> None:
    stream = io.StringIO()
    bar = Progress(2, "perfkit: loading 2 ranks", stream=stream)
    bar.update(1)
    bar.update(1)
    bar.close("1 not loaded (see the notes)")
    assert stream.getvalue().startswith("perfkit: loading 2 ranks: 2/2 in ")
    assert stream.getvalue().endswith("s; 1 not loaded (see the notes)\n")
    quiet = io.StringIO()
    with Progress(1, "perfkit: loading 1 rank", stream=quiet) as one:
        one.update(1)
    assert quiet.getvalue().endswith("s\n") and ";" not in quiet.getvalue()
