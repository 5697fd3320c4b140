"""One run of a journal (:class:`Run`) and the errors a journal raises.

:class:`JournalError` names the journal file; :class:`DuplicateRunError` also carries the
run already recorded.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

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

    def sentences(self) -> list[str]:
        """The run as a reader sees it in a notebook: what it is, the note, where from.

        Returns
        -------
        list of str
            ``"Run 2 'tuned', added to the journal on 2026-11-26 04:28 UTC."`` (or "... is
            already in the journal (the same profile, added on ...): nothing was added."
            when :meth:`Journal.add` returned it), the job in one line, the note when there
            is one, and the profile as stored (the fingerprint is left out: it is for
            machines).
        """
        when = self.added_utc.replace("T", " ")[:16] + " UTC"
        head = (f"Run {self.id} '{self.label}' is already in the journal (the same profile, "
                f"added on {when}): nothing was added."
                if self.existing else f"Run {self.id} '{self.label}', added to the journal on "
                                      f"{when}.")
        lines = [head, f"The job: {self.job_line}"]
        if self.note:
            lines.append(f"Note: {self.note}")
        lines.append(f"Profile: {self.path}" if self.path else
                     f"Profile: not stored ({self.provenance or 'no path was kept'})")
        return lines

    def _repr_html_(self) -> str:
        return "<div class='pk-run'>" + "".join(
            f"<p style='margin:2px 0'>{html.escape(line)}</p>" for line in self.sentences()
        ) + "</div>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text("\n".join(self.sentences()))
