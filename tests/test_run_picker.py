"""One of a folder's separate runs: ``perfkit info PATH --run ID`` and the dashboard's run
picker (issue 33 pt 5).

The folder holds two runs written here: two ranks of a 2-rank job, and a lone trace of
another job an hour later. Which trace is which is known from how they were written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_files import write_trace

from perfkit.cli import main


@pytest.fixture()
def two_runs(tmp_path: Path) -> Path:
    t0 = 1.7e15  # µs since the epoch
    write_trace(tmp_path / "a_rank0.json", 0, 2, t0)
    write_trace(tmp_path / "a_rank1.json", 1, 2, t0 + 50)
    write_trace(tmp_path / "c_rank0.json", 0, 2, t0 + 3600e6)  # an hour later: another run
    return tmp_path


def test_info_without_run_lists_the_runs(two_runs: Path, capsys: pytest.CaptureFixture
                                         ) -> None:
    assert main(["info", str(two_runs), "--findings", "0"]) != 0
    err = capsys.readouterr().err
    assert "2 separate runs found, not merged" in err
    assert "run 0: kineto pytorch, 2 ranks (0, 1), world size 2, started 2023-11-14 22:13" in err
    assert "run 1: kineto pytorch, rank 0, world size 2, started 2023-11-14 23:13" in err
    assert "perfkit info PATH --run ID" in err


@pytest.mark.parametrize(("run", "ranks", "start"), [
    ("0", "2 (0-1)", "22:13:20"), ("1", "1 (0)", "23:13:20"), ("20231114-231320", "1 (0)",
                                                              "23:13:20")])
def test_info_reads_the_run_asked_for(two_runs: Path, capsys: pytest.CaptureFixture,
                                      run: str, ranks: str, start: str) -> None:
    """By id or by name; the 2-rank run started first (t0), the lone trace an hour later."""
    assert main(["info", str(two_runs), "--run", run, "--findings", "0"]) == 0
    out = capsys.readouterr().out
    ranks_line = next(line for line in out.splitlines() if line.strip().startswith("ranks"))
    assert ranks in ranks_line
    notes = " ".join(out.split())  # notes wrap
    assert f"started 2023-11-14 {start} UTC (of 2 runs found" in notes


def test_info_refuses_an_unknown_run(two_runs: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["info", str(two_runs), "--run", "7", "--findings", "0"]) != 0
    assert "not among the runs found" in capsys.readouterr().err


@pytest.mark.slow  # over about 5 s on a busy 2-core machine
def test_the_dashboard_offers_the_runs_and_opens_the_one_chosen(two_runs: Path) -> None:
    from perfkit.widgets import dashboard

    board = dashboard()
    assert board.runs.layout.display == "none"
    assert board.load_profile(str(two_runs)) is False
    assert "holds 2 separate runs, not merged" in board.status.value
    assert board.runs.layout.display == "flex"
    labels = [label for label, _ in board.runs.options[1:]]  # after the prompt
    assert [run_id for _, run_id in board.runs.options[1:]] == [0, 1]
    assert "2 ranks (0, 1)" in labels[0] and "rank 0," in labels[1]
    board.runs.value = 1  # the lone trace, an hour later
    assert board.error is None and board.profile.ranks == [0]
    assert "(run 1)" in board.status.value
    assert board.runs.layout.display == "flex"  # still there, to switch
    board.runs.value = 0
    assert board.profile.ranks == [0, 1]
    board.load_profile("sample:slow-rank")  # a folder of one run: no picker
    assert board.runs.layout.display == "none" and board.error is None


def test_the_run_picker_says_to_choose_a_run_and_every_tab_points_to_it(two_runs: Path
                                                                        ) -> None:
    """Opened first (``perfkit serve PATH``), a folder of two runs leaves nothing on show:
    the picker reads as a prompt, never blank, and the tabs say where to choose."""
    from perfkit.widgets import TAB_TITLES, dashboard

    board = dashboard(str(two_runs))
    assert board.profile is None and board.runs.layout.display == "flex"
    assert board.runs.index == 0 and board.runs.label  # something is written in it
    assert "choose one of the 2 runs" in board.runs.label
    assert [run_id for _, run_id in board.runs.options[1:]] == [0, 1]
    for title in TAB_TITLES:
        message = board.select(title).message.value
        assert "Open a profile above" not in message
        assert "Choose one of the 2 runs in the run picker above" in message
    board.runs.value = 1
    assert board.error is None and board.profile.ranks == [0]
    assert board.runs.label.startswith("run 1: kineto pytorch, rank 0")
