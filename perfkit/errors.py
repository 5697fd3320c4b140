"""Errors raised by perfkit.

Every failure that perfkit can explain is a :class:`PerfkitError`. Argument errors are
also :class:`ValueError`, so ``except ValueError`` keeps working for callers who do not
know perfkit. Messages name the parameter (or file) and the rule that failed.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = [
    "PerfkitError",
    "InvalidArgumentError",
    "ParallelConfigError",
    "ConfigFileError",
    "ProfileError",
    "PathNotFoundError",
    "RunsFound",
    "RunNotFoundError",
    "PerfkitWarning",
    "check_positive",
    "check_non_negative",
    "check_positive_int",
    "check_choice",
    "check_fraction",
    "as_perfkit_error",
    "file_boundary",
    "boundary",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class PerfkitError(Exception):
    """Base class of every error perfkit raises on purpose.

    Attributes
    ----------
    code : str
        What kind of failure, for a program (the ``error`` of the ``error`` answer that
        ``perfkit mcp`` returns, docs/json.md): ``cannot_answer`` here, a narrower word on
        the subclasses.
    """

    code = "cannot_answer"


class InvalidArgumentError(PerfkitError, ValueError):
    """An argument is zero, negative, of the wrong kind or inconsistent with another.

    Attributes
    ----------
    parameter : str
        Name of the offending parameter (as the caller spelled it).
    rule : str
        The rule it broke, in words.
    """

    code = "invalid_argument"

    def __init__(self, parameter: str, rule: str, value: object = None) -> None:
        self.parameter = parameter
        self.rule = rule
        self.value = value
        shown = "" if value is None else f" (got {value!r})"
        super().__init__(f"{parameter}: {rule}{shown}")


class ParallelConfigError(InvalidArgumentError):
    """A parallel configuration breaks one or more rules; ``rules`` lists them all."""

    def __init__(self, parameter: str, rule: str, value: object = None,
                 rules: Iterable[str] = ()) -> None:
        super().__init__(parameter, rule, value)
        self.rules = tuple(rules) or (f"{parameter}: {rule}",)


class ConfigFileError(PerfkitError, ValueError):
    """A configuration file (YAML, JSON) is missing, unreadable or lacks a needed key."""

    code = "bad_config"

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ProfileError(PerfkitError):
    """A profiler file is missing, damaged, of an unknown format or lacks a needed field.

    The message names the file, and where known the line or field, what was expected and
    what was found: ``"<path>:<line>: <field>: expected ..., found ..."``.
    """

    code = "bad_profile"

    def __init__(self, path: object, problem: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        self.field = field
        where = self.path + (f":{line}" if line is not None else "")
        what = f"{field}: {problem}" if field else problem
        super().__init__(f"{where}: {what}")


class PathNotFoundError(PerfkitError):
    """A profile path that does not exist; the message is the whole text
    (:func:`perfkit.bundled_samples.path_not_found`: ``"profile path not found: PATH"``
    and a hint where PATH looks like a bundled sample's name).

    Attributes
    ----------
    path : str
        The path as the caller gave it.
    """

    code = "not_found"

    def __init__(self, path: object, message: str) -> None:
        self.path = str(path)
        super().__init__(message)


class RunsFound(ProfileError):
    """A folder holds several separate runs; ``load(path, run=...)`` picks one.

    Attributes
    ----------
    runs : list of perfkit.io.detect.runs.Run
        The runs found, earliest first: ``id``, ``name``, ``label``, ``ranks``,
        ``framework``, ``platform``, ``world_size``, ``start`` and ``paths`` of each.
    """

    code = "several_runs"

    def __init__(self, path: object, runs: Iterable[Any]) -> None:
        self.runs = list(runs)
        listing = "; ".join(f"{r.id} = {r.name!r}: {r.label}" for r in self.runs)
        first = self.runs[0].id if self.runs else 0
        claims: dict[Any, list[str]] = {}
        for r in self.runs:
            for rank, p in zip(r.ranks, r.paths, strict=False):
                if rank is not None:
                    claims.setdefault(rank, []).append(os.path.basename(str(p)))
        twice = "".join(f"; two profiles claim rank {rank} ({', '.join(ps)})"
                        for rank, ps in claims.items() if len(ps) > 1)
        super().__init__(path, f"{len(self.runs)} separate runs found, not merged ({listing})"
                         f"{twice}; load one with perfkit.load(path, run={first}) (an id or a "
                         "name) or list them with perfkit.runs(path)")


class RunNotFoundError(ProfileError):
    """``run=`` names none of the runs a folder holds (an argument's error: the folder is
    fine); ``runs`` are those it holds, to choose from.

    Attributes
    ----------
    runs : list of perfkit.io.detect.runs.Run
    parameter : str
        ``"run"``.
    """

    code = "invalid_argument"
    parameter = "run"

    def __init__(self, path: object, problem: str, runs: Iterable[Any] = ()) -> None:
        self.runs = list(runs)
        super().__init__(path, problem)

    @classmethod
    def among(cls, runs: Iterable[Any]) -> Callable[[object, str], RunNotFoundError]:
        """The ``error`` of :func:`perfkit.io.detect.runs.pick_run`: this error, with the
        ``runs`` it chose from."""
        found = list(runs)
        return lambda path, problem: cls(path, problem, found)


class PerfkitWarning(UserWarning):
    """perfkit had to assume something the caller did not say; the message says what.

    Raised with :func:`warnings.warn`, so ``warnings.simplefilter("error", PerfkitWarning)``
    turns every such assumption into an error.
    """


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_positive(name: str, value: object) -> float:
    """Return ``value`` if it is a finite number > 0, else raise InvalidArgumentError."""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise InvalidArgumentError(name, "must be a finite number", value)
    if value <= 0:
        raise InvalidArgumentError(name, "must be > 0", value)
    return value


def check_non_negative(name: str, value: object) -> float:
    """Return ``value`` if it is a finite number >= 0, else raise InvalidArgumentError."""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise InvalidArgumentError(name, "must be a finite number", value)
    if value < 0:
        raise InvalidArgumentError(name, "must be >= 0", value)
    return value


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an integer >= 1 (an integral float is accepted)."""
    if isinstance(value, bool) or not _is_real(value) or not math.isfinite(float(value)) \
            or value != int(value):
        raise InvalidArgumentError(name, "must be a whole number", value)
    if value < 1:
        raise InvalidArgumentError(name, "must be >= 1", value)
    return int(value)


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise InvalidArgumentError(name, f"must be one of {', '.join(map(repr, choices))}",
                                   value)
    return value  # type: ignore[return-value]


def check_fraction(name: str, value: object, *, allow_zero: bool = True) -> float:
    """Return ``value`` if it lies in [0, 1] (or (0, 1] when ``allow_zero`` is False)."""
    if not _is_real(value) or not math.isfinite(float(value)):
        raise InvalidArgumentError(name, "must be a finite number", value)
    low_ok = value >= 0 if allow_zero else value > 0
    if not low_ok or value > 1:
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise InvalidArgumentError(name, f"must lie in {interval}", value)
    return float(value)


# ----------------------------------------------------------------------------- boundaries

def _where(path: object) -> str:
    if isinstance(path, Mapping):
        return "<dict>"
    if isinstance(path, (bytes, bytearray, memoryview)):
        return "<bytes>"
    try:
        return os.fspath(path)  # type: ignore[arg-type]
    except TypeError:
        return str(path)


def as_perfkit_error(exc: BaseException, path: object, what: str = "",
                     cls: type[PerfkitError] = ProfileError) -> PerfkitError:
    """The :class:`PerfkitError` to raise for ``exc``, an error met while reading ``path``.

    A PerfkitError is returned as it is. An ``OSError`` names the file it was about
    (``exc.filename``, else ``path``) and the system's reason (permission denied, is a
    directory, name too long, ...). Anything else (a field of an unexpected type deep in
    a file, a library's own error) becomes ``cls(path, "could not be read as <what>:
    unexpected <Type>: <message>")``, so a caller only ever sees perfkit's errors.

    Parameters
    ----------
    exc : BaseException
        What was raised.
    path : path-like, str or mapping
        The file (or folder, or in-memory config) being read.
    what : str, optional
        What the file was expected to be, in words.
    cls : type, default ProfileError
        The error class to build; it takes ``(path, problem)`` (``ProfileError`` or
        ``ConfigFileError``).
    """
    if isinstance(exc, PerfkitError):
        return exc
    as_what = f" as {what}" if what else ""
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename else _where(path)
        reason = exc.strerror or str(exc) or type(exc).__name__
        return cls(where, f"cannot be read{as_what}: {reason}")  # type: ignore[call-arg]
    if isinstance(exc, MemoryError):
        return cls(_where(path), f"ran out of memory while reading it{as_what}; "  # type: ignore[call-arg]
                   "is the file damaged or much larger than expected?")
    text = " ".join(str(exc).split())[:300]
    return cls(_where(path), f"could not be read{as_what}: unexpected "  # type: ignore[call-arg]
               f"{type(exc).__name__}{': ' + text if text else ''} (damaged file, or a field "
               "of an unexpected type)")


@contextmanager
def file_boundary(path: object, what: str = "",
                  cls: type[PerfkitError] = ProfileError) -> Iterator[None]:
    """Exception boundary of one file: inside it, any error becomes a PerfkitError.

    ``with file_boundary(f, "kernel_details.csv"): ...`` re-raises a PerfkitError as it
    is and turns everything else into :func:`as_perfkit_error` (naming ``f``).
    ``KeyboardInterrupt`` and ``SystemExit`` pass through.
    """
    try:
        yield
    except PerfkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - the point of a boundary
        raise as_perfkit_error(exc, path, what, cls) from exc


def boundary(cls: type[PerfkitError] = ProfileError, *, path_arg: str = "path",
             what: str = "") -> Callable[[_F], _F]:
    """Decorator: the public reader it wraps raises nothing but PerfkitErrors.

    Parameters
    ----------
    cls : type, default ProfileError
        Error class for failures that are not PerfkitErrors already.
    path_arg : str, default "path"
        Name of the argument holding the file, folder or data read (named in the message).
    what : str, optional
        What is being read, in words.
    """

    def wrap(func: _F) -> _F:
        sig = inspect.signature(func)

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except PerfkitError:
                raise
            except Exception as exc:  # noqa: BLE001 - the point of a boundary
                try:
                    target = sig.bind_partial(*args, **kwargs).arguments.get(path_arg, "?")
                except TypeError:
                    target = "?"
                raise as_perfkit_error(exc, target, what, cls) from exc

        return run  # type: ignore[return-value]

    return wrap
