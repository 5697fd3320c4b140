"""The ``error`` answer: why a tool of ``perfkit mcp`` could not answer, for a program.

The command line prints its errors as one line on stderr (status 2) and no answer; a tool
has no stderr, so its error result carries this answer instead: ``error`` (a code: what
kind of failure, :attr:`perfkit.errors.PerfkitError.code`), the one-line ``message``
(naming the file and what was wrong, as the command line says it), and where known the
``path``, the ``parameter`` and, for a folder of several runs, the ``runs`` to choose from.
"""

from __future__ import annotations

from typing import Any

from ..errors import PerfkitError, RunNotFoundError, RunsFound
from .common import envelope
from .job import runs_answer

__all__ = ["ERROR_CODES", "error_answer"]

#: The codes of :func:`error_answer`, by kind of failure.
ERROR_CODES = {
    "path_not_allowed": "the path lies outside the folders the server may read",
    "not_found": "no file or folder at the path",
    "bad_profile": "a profile file is damaged, of an unknown format or lacks a field",
    "several_runs": "the folder holds several separate runs: give run (one of runs)",
    "bad_config": "a configuration file is missing, unreadable or lacks a key",
    "invalid_argument": "an argument is missing, of the wrong type or out of range",
    "cannot_answer": "the profile does not hold what the answer needs (the message says "
                     "what, and how to give it)",
    "unexpected": "a failure perfkit did not foresee (report it with the profile's format)",
}


def error_answer(exc: BaseException, *, path: str | None = None,
                 parameter: str | None = None) -> dict[str, Any]:
    """The ``error`` answer of ``exc``.

    Parameters
    ----------
    exc : exception
        A :class:`~perfkit.errors.PerfkitError` (its ``code``; ``several_runs`` also where
        it was raised from a :class:`~perfkit.errors.RunsFound`; ``invalid_argument``
        with the runs to choose from for a
        :class:`~perfkit.errors.RunNotFoundError`), or any other exception
        (``unexpected``).
    path, parameter : str, optional
        The path and the argument the error is about, where ``exc`` does not say.

    Returns
    -------
    dict
        ``kind`` "error", ``error`` (one of :data:`ERROR_CODES`), ``message``, ``path``,
        ``parameter`` (null where not known) and ``runs`` (the ``runs`` answer's rows,
        or null).
    """
    found = exc if isinstance(exc, (RunsFound, RunNotFoundError)) else exc.__cause__
    runs = runs_answer(found.runs)["runs"] if isinstance(
        found, (RunsFound, RunNotFoundError)) else None
    if isinstance(exc, PerfkitError):
        code = "several_runs" if isinstance(found, RunsFound) else exc.code
        message = " ".join(str(exc).split())
    else:
        code = "unexpected"
        message = f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
    if code not in ERROR_CODES:
        code = "cannot_answer"
    return envelope("error", error=code, message=message,
                    path=getattr(exc, "path", None) or path,
                    parameter=getattr(exc, "parameter", None) or parameter, runs=runs)
