"""``perfkit report --notebook`` takes a part of a guided notebook's name (``05``, ``memory``).

A new user typed ``--notebook 05`` and was told that no notebook 05 exists, in a message
that listed ``05_memory``. A part that only one name has picks that notebook; a part that
several share is refused with the names, and an unknown name still lists them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfkit.report.notebooks import NOTEBOOK_DIR, ReportError, locate_notebook

GUIDED = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb") if p.stem != "dashboard")


@pytest.mark.parametrize("part, stem", [("05", "05_memory"), ("memory", "05_memory"),
                                        ("05_memory.ipynb", "05_memory"),
                                        ("cluster", "07_cluster"), ("case", "08_case_llama2_13b"),
                                        ("10", "10_tuning_journal")])
def test_a_part_only_one_name_has_picks_that_notebook(part: str, stem: str) -> None:
    assert stem in GUIDED  # the notebooks this test names ship with perfkit
    assert locate_notebook(part) == NOTEBOOK_DIR / f"{stem}.ipynb"


def test_a_part_several_names_share_is_refused_with_them() -> None:
    with pytest.raises(ReportError) as err:
        locate_notebook("0")
    starting = [n for n in GUIDED if n.startswith("0")]
    assert len(starting) > 1
    assert all(n in str(err.value) for n in starting) and "give more of its name" in str(err.value)


def test_an_unknown_name_lists_the_guided_notebooks(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="notebook not found: nope") as err:
        locate_notebook("nope")
    assert all(n in str(err.value) for n in GUIDED)
    copy = tmp_path / "mine.ipynb"  # a path is taken as it is
    copy.write_text("{}")
    assert locate_notebook(copy) == copy
