"""A journal shows itself in words in a notebook (as a :class:`perfkit.journal.Run` does):
where it is, its runs by label, and whether it can be written; not a bare ``Journal(...)``.

The labels expected are read from the journal file with :mod:`sqlite3` directly.
"""

from __future__ import annotations

import html
import sqlite3
from pathlib import Path

from IPython.lib.pretty import pretty

import perfkit as pk


def _labels(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as c:
        return [r[0] for r in c.execute("SELECT label FROM runs ORDER BY id")]


def test_the_bundled_journal_names_its_runs_and_says_it_is_read_only() -> None:
    journal = pk.Journal.bundled("llama2-13b-case")
    labels = _labels(journal.path)
    named = ", ".join(f"'{x}'" for x in labels)
    text = str(journal)
    assert text.splitlines() == [
        f"The tuning journal {journal.path}.",
        f"It has {len(labels)} runs: {named}.",
        "It ships with perfkit and is read-only: journal.copy_to(PATH) gives a writable copy."]
    assert pretty(journal) == text
    shown = journal._repr_html_()
    assert "Journal(" not in shown and html.escape(f"'{labels[-1]}'") in shown
    first = journal.sentences(max_labels=1)[1]
    assert first == f"It has {len(labels)} runs: '{labels[0]}' and {len(labels) - 1} more runs."


def test_a_temporary_journal_says_it_is_empty_and_removed_at_exit() -> None:
    journal = pk.Journal.temporary()
    assert _labels(journal.path) == []
    assert str(journal).splitlines()[1:] == [
        "It has no runs yet: add one with journal.add(PROFILE).",
        "It is temporary: its folder is removed when Python exits (give pk.Journal a path "
        "to keep one)."]


def test_a_journal_opened_read_only_says_so(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    pk.Journal(path)
    assert str(pk.Journal(path, readonly=True)).splitlines()[1:] == [
        "It has no runs yet: add one with journal.add(PROFILE).",
        "It is open read-only: add and the other writes refuse."]
