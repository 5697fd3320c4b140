"""``perfkit journal add|list|compare``: where the journal lives, what is printed, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import cli
from perfkit.journal import JOURNAL_ENV, Journal

MODEL = pk.ModelSpec(num_layers=2, hidden_size=512, num_attention_heads=8, seq_length=512,
                     vocab_size=4000, ffn_hidden_size=1408, mlp="gated")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    hw = pk.Hardware.preset("ascend-910b")
    out = tmp_path_factory.mktemp("profiles")
    return {name: pk.simulate(MODEL, parallel, hw, steps=1, seed=0, out=out / name,
                              aic_metrics=None, trace_kernels=False)
            for name, parallel in (("dp2", pk.ParallelConfig(dp=2, num_micro_batches=2)),
                                   ("pp2", pk.ParallelConfig(pp=2, num_micro_batches=4)))}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_add_list_compare(profiles: dict, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    j = str(tmp_path / "runs.sqlite")
    code, out, _ = _run(capsys, "journal", "add", str(profiles["dp2"]), "--label", "base",
                        "--note", "dp 2", "--journal", j)
    assert code == 0
    assert f"created the journal {j}" in out and "added run 1 'base'" in out
    code, out, _ = _run(capsys, "journal", "add", str(profiles["pp2"]), "--journal", j)
    assert code == 0 and "added run 2 'pp2'" in out
    assert re.search(r"since 'base': pipeline 1→2, data parallel 2→1", out)
    journal = Journal(j)
    runs = journal.runs()
    assert list(runs["label"]) == ["base", "pp2"] and runs["note"].iloc[0] == "dp 2"

    code, out, _ = _run(capsys, "journal", "list", "--journal", j)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["id", "label", "added"]
    for r in runs.itertuples(index=False):  # one line per run with its numbers
        line = next(x for x in lines if x.split()[:2] == [str(r.id), r.label])
        assert f"{r.tokens_per_s_per_device:,.0f}" in line and r.mfu_text in line
    assert "run 1: dp 2" in out

    page = tmp_path / "cmp.html"
    code, out, _ = _run(capsys, "journal", "compare", "base", "2", "--journal", j,
                        "--html", str(page))
    assert code == 0
    cmp = journal.compare("base", "pp2")
    assert out.splitlines()[0] == f"base → pp2: {cmp.sentence()}"
    for section in ("The job (what changed):", "Metrics:", "Step breakdown",
                    "Operators that moved most", "Findings (advisor):"):
        assert section in out
    assert re.search(r"^\s+pp\s+1\s+2\s+profile / profile$", out, re.M)
    text = page.read_text(encoding="utf-8")
    assert cmp.sentence() in text.replace("&gt;", ">")
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert f"wrote {page}" in out


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_default_journal_is_env_then_working_folder(profiles: dict, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(JOURNAL_ENV, raising=False)
    assert _run(capsys, "journal", "add", str(profiles["dp2"]))[0] == 0
    assert (tmp_path / "perfkit-journal.sqlite").is_file()
    env = tmp_path / "elsewhere.sqlite"
    monkeypatch.setenv(JOURNAL_ENV, str(env))
    assert _run(capsys, "journal", "add", str(profiles["pp2"]))[0] == 0
    assert len(Journal(env)) == 1 and len(Journal(tmp_path / "perfkit-journal.sqlite")) == 1


@pytest.mark.parametrize("argv, words", [
    (["journal", "list"], "no journal here"),
    (["journal", "compare", "a", "b"], "no journal here"),
    (["journal", "add", "/no/such/profile"], "/no/such/profile"),
    (["journal", "add", "{dp2}", "--config", "/no/config.yaml"], "config not found"),
])
def test_errors_are_one_line_with_status_2(argv: list[str], words: str, profiles: dict,
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(JOURNAL_ENV, raising=False)
    code, out, err = _run(capsys, *[a.format(dp2=profiles["dp2"]) for a in argv])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("perfkit: error: ") and words in err
    assert not (tmp_path / "perfkit-journal.sqlite").exists()  # a failed add creates none


def test_duplicates_unknown_runs_and_bad_files(profiles: dict, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    j = str(tmp_path / "j.sqlite")
    assert _run(capsys, "journal", "add", str(profiles["dp2"]), "--journal", j)[0] == 0
    code, _, err = _run(capsys, "journal", "add", str(profiles["dp2"]), "--journal", j)
    assert code == 2 and "already in the journal as run 1 'dp2'" in err and j in err
    code, out, _ = _run(capsys, "journal", "add", str(profiles["dp2"]), "--journal", j,
                        "--if-exists", "return")
    assert code == 0 and out.startswith("already recorded: run 1 'dp2'")
    code, _, err = _run(capsys, "journal", "compare", "dp2", "nope", "--journal", j)
    assert code == 2 and "no run 'nope'; the runs are: 1 'dp2'" in err
    bad = tmp_path / "notes.txt"
    bad.write_text("my notes, not a journal\n")
    code, _, err = _run(capsys, "journal", "list", "--journal", str(bad))
    assert code == 2 and str(bad) in err and "not an SQLite database" in err
    code, _, err = _run(capsys, "journal", "compare", "1", "1", "--journal", j,
                        "--html", str(tmp_path / "no" / "x.html"))
    assert code == 2 and "--html" in err


def test_journal_without_action_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "journal")
    assert code == 2 and "add" in out and "compare" in out and JOURNAL_ENV in out


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_add_says_which_rank_did_not_load_and_keeps_it_with_the_run(
        profiles: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    folder = tmp_path / "dp2"
    shutil.copytree(profiles["dp2"], folder)
    (comm,) = sorted(folder.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json"))[1:]
    comm.write_bytes(comm.read_bytes()[: comm.stat().st_size // 2])  # cut in half
    j = str(tmp_path / "runs.sqlite")
    code, out, err = _run(capsys, "journal", "add", str(folder), "--label", "cut",
                          "--journal", j)
    assert code == 0 and "added run 1 'cut'" in out
    (line,) = [x for x in err.splitlines() if x.startswith("warning: rank ")]
    assert "not loaded" in line and str(comm) in line and "truncated" in line
    problems = Journal(j).record(1).job_problems
    assert any(p.startswith("rank 1 not loaded: ") and str(comm) in p for p in problems)


@pytest.mark.slow  # about 2 s or more on a busy 2-core machine
def test_compare_refuses_a_run_with_itself(profiles: dict, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    j = str(tmp_path / "runs.sqlite")
    assert _run(capsys, "journal", "add", str(profiles["dp2"]), "--label", "base",
                "--journal", j)[0] == 0
    code, out, err = _run(capsys, "journal", "compare", "base", "1", "--journal", j)
    assert code == 2 and not out
    assert "'base' and '1' are the same run (#1 'base'): name two different runs" in err


def test_only_the_ranks_that_did_not_load_are_warned_of() -> None:
    """``journal add`` warns of the ranks that did not load; the job's own problems are
    stored in the same column and may say "not loaded" of something else."""
    from perfkit.journal.record.measure import ranks_not_loaded

    problems = ("rank 3 not loaded: trace.json: JSON is truncated",
                "the config was not loaded: x.yaml is not YAML",
                "world size not known")
    assert ranks_not_loaded(problems) == [problems[0]]


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*")}


@pytest.mark.slow  # four loads: about 2 s
def test_nothing_is_written_into_a_profile_folder(profiles: dict, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A walk: ``journal add P --journal P/j.sqlite``, ``journal compare --html P/x.html``
    and ``compare A B --html A/x.html`` wrote into the profile folder, which
    ``perfkit report -o`` refuses. Each is refused now, before any work, and the folder is
    left as it was."""
    folder = profiles["dp2"]
    before = _files(folder)
    code, _, err = _run(capsys, "journal", "add", str(folder), "--journal",
                        str(folder / "j.sqlite"))
    assert code == 2 and "--journal:" in err and "does not write into profile folders" in err
    j = str(tmp_path / "runs.sqlite")
    for name in ("dp2", "pp2"):
        assert _run(capsys, "journal", "add", str(profiles[name]), "--journal", j)[0] == 0
    code, _, err = _run(capsys, "journal", "compare", "dp2", "pp2", "--journal", j,
                        "--html", str(folder / "x.html"))
    assert code == 2 and "--html:" in err and str(folder) in err
    code, _, err = _run(capsys, "compare", str(profiles["pp2"]), str(folder), "--html",
                        str(folder / "x.html"))
    assert code == 2 and "--html:" in err and "does not write into profile folders" in err
    assert _files(folder) == before
    # beside the profiles, it is written
    code, out, _ = _run(capsys, "compare", str(profiles["pp2"]), str(folder), "--html",
                        str(tmp_path / "x.html"))
    assert code == 0 and (tmp_path / "x.html").is_file()
