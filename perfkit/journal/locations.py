"""Where journals are: the default journal file and the journals bundled with perfkit."""

from __future__ import annotations

import os
from pathlib import Path

from ..resources import data_dir
from .run import JournalError

__all__ = ["JOURNAL_ENV", "DEFAULT_JOURNAL_NAME", "BUNDLED_FOLDER", "default_journal_path",
           "bundled_journals", "bundled_journal_path"]

#: Environment variable naming the default journal file.
JOURNAL_ENV = "PERFKIT_JOURNAL"
#: File name of the default journal in the working folder.
DEFAULT_JOURNAL_NAME = "perfkit-journal.sqlite"
#: Folder of the bundled journals in perfkit's data.
BUNDLED_FOLDER = "journals"


def default_journal_path() -> Path:
    """Where ``perfkit journal`` keeps runs unless told: ``$PERFKIT_JOURNAL`` when set,
    else ``perfkit-journal.sqlite`` in the working folder."""
    env = os.environ.get(JOURNAL_ENV, "").strip()
    return Path(env).expanduser() if env else Path.cwd() / DEFAULT_JOURNAL_NAME


def bundled_journals() -> list[str]:
    """Names of the journals that ship with perfkit (``llama2-13b-case``)."""
    folder = data_dir() / BUNDLED_FOLDER
    return sorted(p.stem for p in folder.glob("*.sqlite")) if folder.is_dir() else []


def bundled_journal_path(name: str = "llama2-13b-case") -> Path:
    """The file of a bundled journal.

    Raises
    ------
    JournalError
        No bundled journal has that name (the message lists the names there are).
    """
    path = data_dir() / BUNDLED_FOLDER / f"{name}.sqlite"
    if not path.is_file():
        raise JournalError(path, f"no bundled journal is called {name!r}; the bundled "
                                 f"journals are: {', '.join(bundled_journals()) or 'none'}")
    return path
