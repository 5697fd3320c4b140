"""``perfkit report PATH --run ID``: one of a folder's separate runs, as ``info``,
``check``, ``plan`` and ``compare`` read one (the notebooks' ``RUN`` parameter).

The folder holds two runs written here: two ranks of a 2-rank job, and a lone trace of
another job an hour later (as in ``test_run_picker.py``). Which trace is which is known
from how they were written, so the page's rank counts are checked against that.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest
from kineto_files import write_trace

from perfkit.cli import main
from perfkit.report import NOTEBOOK_DIR, takes_parameter

#: The guided notebooks that read one profile (``PROFILE``) and so take ``RUN``; the
#: journal notebook takes two profiles and no run.
ONE_PROFILE = ["00_start_here", "01_metrics", "02_parallel_strategy", "03_operators",
               "04_communication", "05_memory", "06_recompute", "07_cluster",
               "08_case_llama2_13b", "09_exercises"]


@pytest.fixture()
def two_runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    t0 = 1.7e15  # µs since the epoch
    write_trace(folder / "a_rank0.json", 0, 2, t0)
    write_trace(folder / "a_rank1.json", 1, 2, t0 + 50)
    write_trace(folder / "c_rank0.json", 0, 2, t0 + 3600e6)  # an hour later: another run
    return folder


def _text(page: str) -> str:
    """The page's words, tags dropped and spaces squeezed."""
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_without_run_the_runs_are_listed_and_the_option_named(
        two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "page.html"
    assert main(["report", str(two_runs), "-o", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "2 separate runs found, not merged" in err
    assert "perfkit report PATH --run ID" in err
    assert not out.exists()


def test_a_notebook_without_run_is_refused_before_any_kernel(
        two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "page.html"
    assert main(["report", str(two_runs), "-o", str(out), "--run", "1",
                 "--notebook", "10_tuning_journal", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "10_tuning_journal.ipynb has no RUN parameter" in err
    assert not out.exists()


@pytest.mark.parametrize("name", ONE_PROFILE)
def test_each_one_profile_notebook_takes_run_and_loads_with_it(name: str) -> None:
    """The parameter is defined (None: one run) and every ``pk.load(PROFILE`` reads it."""
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    assert takes_parameter(nb, "RUN") and takes_parameter(nb, "PROFILE")
    code = "\n".join(c.source for c in nb.cells[1:] if c.cell_type == "code")
    assert "pk.load(PROFILE)" not in code and "dashboard(PROFILE)" not in code
    assert "pk.load(PROFILE, run=RUN)" in code


def test_takes_parameter_reads_assignments_only() -> None:
    cell = nbformat.v4.new_code_cell("# RUN = 3 is a comment\nPP, MB = 4, 8\nX: int = 1\n"
                                     "print(RUN_ID)")
    cell.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[cell])
    assert [takes_parameter(nb, n) for n in ("RUN", "PP", "MB", "X", "RUN_ID")] == [
        False, True, True, True, False]
    assert not takes_parameter(nbformat.v4.new_notebook(), "PP")  # no parameters cell


@pytest.mark.slow  # runs a notebook kernel (about 8 s)
def test_the_run_asked_for_is_the_one_the_notebook_reads(
        two_runs: Path, tmp_path: Path) -> None:
    """By name: the lone trace an hour later, one rank; its page says so, in the notes
    perfkit reads before the kernel and in the notebook's own outputs."""
    out = tmp_path / "page.html"
    assert main(["report", str(two_runs), "-o", str(out), "--run", "20231114-231320",
                 "--no-progress"]) == 0
    page = out.read_text(encoding="utf-8")
    assert f"<title>perfkit report: {two_runs} (run 20231114-231320)</title>" in page
    text = _text(page)
    assert f"on {two_runs}, run 20231114-231320." in text
    assert "run 1: kineto pytorch, rank 0, world size 2, started 2023-11-14 23:13:20" in text
    assert "a PyTorch (Kineto) trace, 1 rank." in text  # the dashboard cell's header
    assert "ranks [0, 1]" not in text and "Ranks 0 and 1" not in text  # run 0's notes
    assert sorted(p.name for p in two_runs.iterdir()) == [
        "a_rank0.json", "a_rank1.json", "c_rank0.json"]  # nothing written beside them


@pytest.mark.slow  # two notebooks run on a real trace: about 15 s
@pytest.mark.shared_samples
@pytest.mark.timeout(300)
def test_gpu_pages_show_no_ascend_columns_and_the_collectives_bandwidth(tmp_path) -> None:
    """A walk of the GPU traces: notebook 03 showed an "AI CPU" column (Ascend's cores)
    on a B200 trace, and 04 no bandwidth at all, though the trace's all-gather records
    its bytes (393 KiB in 22.0 µs: 18.3 GB/s of algorithm bandwidth, by hand from the
    raw kernel's args)."""
    from shared_samples import KINETO_TRACES, sample

    from perfkit.report import write_report

    trace = sample(KINETO_TRACES["tl_b200_eager"])
    pages = {}
    for nb in ("03_operators", "04_communication"):
        out = write_report(trace.parent, tmp_path / f"{nb}.html", notebook=nb, progress=False)
        text = re.sub(r"<[^>]+>", " ", re.sub(r"<style.*?</style>", " ", out.read_text(),
                                              flags=re.S))
        pages[nb] = " ".join(html.unescape(text).split())
    header = pages["03_operators"].split("1. ")[1][:2000]
    assert "AI CPU" not in header.split("2. Compute-bound")[0]
    assert "a GPU or CPU trace records no PMU pipe ratios" in pages["03_operators"]
    bandwidth = pages["04_communication"].split("The collectives' own bandwidth")[1]
    assert re.search(r"allgather \S+ 0 8 1 393 22\.0 18\.3 16\.0", bandwidth), bandwidth[:400]
