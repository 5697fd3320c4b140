"""A profile opened by a relative path is known by its absolute path everywhere (issue 64,
point 3): ``meta.path``, the loader's cache, ``perfkit info`` from another folder, the
journal (absolute, or relative to the journal's own folder, never to the current one);
and an add that fails leaves no empty journal file.

Before, the cache kept the path as first given ("mine/..."): opened again from another
folder (a cache hit), the profile said "mine/...", which named nothing there, and the
History tab's "Add the profile on show" failed with "not found", leaving an empty journal.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import perfkit as pk
from perfkit import cli
from perfkit.journal import Journal

MODEL = pk.ModelSpec(num_layers=2, hidden_size=512, num_attention_heads=8, seq_length=512,
                     vocab_size=4000, ffn_hidden_size=1408, mlp="gated")


@pytest.fixture()
def two_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """``a/mine`` (a 2-rank simulated profile) and an empty ``b``, with a cache of their
    own; the current folder is ``a``."""
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir(parents=True)
    pk.simulate(MODEL, pk.ParallelConfig(dp=2), pk.Hardware.preset("ascend-910b"), steps=1,
                seed=0, out=a / "mine", aic_metrics=None, trace_kernels=False)
    monkeypatch.chdir(a)
    return a, b


def test_a_relative_path_is_stored_absolute_and_shown_so_from_another_folder(
        two_folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_folders
    first = pk.load("mine", progress=False)  # parsed, written to the cache
    assert first.meta.path == str(a / "mine")
    assert all(Path(p.meta.path).is_absolute() and Path(p.meta.path).parent == a / "mine"
               for p in first.profiles)
    monkeypatch.chdir(b)
    again = pk.load(os.path.join("..", "a", "mine"), progress=False)  # the cache's copy
    assert again.meta.path == str(a / "mine")
    assert [p.meta.path for p in again.profiles] == [p.meta.path for p in first.profiles]
    assert cli.main(["info", os.path.join("..", "a", "mine")]) == 0
    path_line = next(ln for ln in capsys.readouterr().out.splitlines()
                     if ln.strip().startswith("path "))
    assert path_line.split(None, 1)[1] == str(a / "mine")


@pytest.mark.slow  # over about 2 s on a busy 2-core machine
def test_the_journal_keeps_the_absolute_path_and_adds_from_another_folder(
        two_folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = two_folders
    profile = pk.load("mine", progress=False)
    monkeypatch.chdir(b)  # the dashboard's kernel may run anywhere
    journal = Journal(b / "journal.sqlite")
    run = journal.add(profile, label="first")
    assert run.path == str(a / "mine")  # outside the journal's folder: absolute
    assert journal.profile_path(run) == a / "mine"
    monkeypatch.chdir(a)
    # inside the journal's folder: kept relative to the journal (it moves with it), so
    # found from any current folder
    near = Journal(a / "j2.sqlite")
    by_path = near.add("mine", label="by path")
    monkeypatch.chdir(b)
    assert near.profile_path(by_path) == a / "mine"
    assert near.load_profile(by_path).meta.path == str(a / "mine")


def test_a_failed_add_leaves_no_journal_file(tmp_path: Path) -> None:
    target = tmp_path / "journal.sqlite"
    journal = Journal(target)
    assert target.is_file()  # made on opening, as before
    with pytest.raises(pk.PerfkitError, match="not found"):
        journal.add(tmp_path / "no-such-profile")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    run = journal.add("sample:slow-rank", label="then")  # the same object works on
    assert run.label == "then" and target.is_file()


def test_a_failed_add_keeps_a_journal_that_existed(tmp_path: Path) -> None:
    target = tmp_path / "journal.sqlite"
    Journal(target)  # made before, empty
    with pytest.raises(pk.PerfkitError):
        Journal(target).add(tmp_path / "no-such-profile")
    assert target.is_file()  # not this add's to remove


def test_the_cli_add_of_a_missing_profile_leaves_no_journal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFKIT_JOURNAL", raising=False)
    assert cli.main(["journal", "add", "nope"]) == 2
    assert list(tmp_path.iterdir()) == []
