"""One run of a journal (:class:`Run`) and the errors a journal raises.

:class:`JournalError` names the journal file; :class:`DuplicateRunError` also carries the
run already recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PerfkitError

__all__ = ["Run", "JournalError", "DuplicateRunError"]


class JournalError(PerfkitError):
    """A journal file cannot be opened, read or written; the message names the file."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class DuplicateRunError(JournalError):
    """The profile is already in the journal (same content fingerprint).

    Attributes
    ----------
    run : Run
        The run already recorded.
    """

    def __init__(self, path: object, problem: str, run: Run) -> None:
        super().__init__(path, problem)
        self.run = run


@dataclass(frozen=True)
class Run:
    """One run of a journal (what :meth:`Journal.add` returns).

    Attributes
    ----------
    id : int
        Its number in the journal (1, 2, ... in the order added; never reused).
    label, note : str or None
    added_utc, profiled_utc : str or None
        When it was added, and when the profile started (ISO 8601, UTC).
    path : str or None
        The profile as stored: ``"sample:NAME"``, a path relative to the journal's folder,
        an absolute path, or None (see ``provenance``).
    fingerprint : str
        Content fingerprint of the profile.
    job_line : str
        The job in one line.
    provenance : str or None
        How the profile was made or can be made again.
    existing : bool
        True when :meth:`Journal.add` found the profile already recorded and returned
        this run instead of adding one (``if_exists="return"``).
    """

    id: int
    label: str
    note: str | None
    added_utc: str
    profiled_utc: str | None
    path: str | None
    fingerprint: str
    job_line: str
    provenance: str | None = None
    existing: bool = False

    def __str__(self) -> str:
        what = " (already in the journal)" if self.existing else ""
        return f"run {self.id} {self.label!r}{what}: {self.job_line}"
