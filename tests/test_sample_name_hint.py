"""A bundled sample's name typed as a path says how to open it (a new user's slip).

The dashboard's list and ``pk.samples()`` show the samples as ``simulated/slow-rank``
(short name ``slow-rank``); a path argument opens one only as ``sample:slow-rank``. Typed
without the prefix, every entry point said "profile path not found" and stopped there.
Each now adds the spelling that works; a name that is no sample gets no hint. The names
are read from the bundled data folder here, not from perfkit's list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import perfkit as pk
from perfkit.cli import main
from perfkit.errors import PerfkitError, ProfileError
from perfkit.resources import data_dir
from perfkit.widgets.dashboard_open import open_profile

SAMPLE = Path(data_dir()) / "simulated" / "slow-rank"
HINT = "(the bundled sample of that name is opened as sample:slow-rank)"


def test_the_sample_is_where_the_names_say() -> None:
    assert (SAMPLE / "README.md").is_file()


@pytest.mark.parametrize("typed", ["slow-rank", "simulated/slow-rank"])
def test_every_entry_point_gives_the_spelling(typed: str, tmp_path: Path, capsys,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # nothing of that name here
    assert main(["info", typed]) != 0
    assert capsys.readouterr().err.strip() == \
        f"perfkit: error: profile path not found: {typed} {HINT}"
    with pytest.raises(ProfileError, match=r"path does not exist.*sample:slow-rank\)$"):
        pk.load(typed)
    if typed == "slow-rank":
        with pytest.raises(ProfileError, match=r"dashboard \(the bundled sample.*rank\)"):
            open_profile(typed)
    else:  # the dashboard's path box takes the names its list shows
        assert len(open_profile(typed).ranks) == 4
    assert not any(tmp_path.iterdir())  # nothing written where the user stands


def test_no_hint_for_a_name_that_is_no_sample(tmp_path: Path, capsys,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["info", "slow-ranks"]) != 0
    assert capsys.readouterr().err.strip() == \
        "perfkit: error: profile path not found: slow-ranks"
    with pytest.raises(PerfkitError) as info:
        pk.load("slow-ranks")
    assert "sample:" not in str(info.value)
