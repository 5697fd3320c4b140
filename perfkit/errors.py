"""Errors raised by perfkit.

Every failure that perfkit can explain is a :class:`PerfkitError`. Argument errors are
also :class:`ValueError`, so ``except ValueError`` keeps working for callers who do not
know perfkit. Messages name the parameter (or file) and the rule that failed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

__all__ = [
    "PerfkitError",
    "InvalidArgumentError",
    "ParallelConfigError",
    "ConfigFileError",
    "ProfileError",
    "PerfkitWarning",
    "check_positive",
    "check_non_negative",
    "check_positive_int",
    "check_choice",
    "check_fraction",
]


class PerfkitError(Exception):
    """Base class of every error perfkit raises on purpose."""


class InvalidArgumentError(PerfkitError, ValueError):
    """An argument is zero, negative, of the wrong kind or inconsistent with another.

    Attributes
    ----------
    parameter : str
        Name of the offending parameter (as the caller spelled it).
    rule : str
        The rule it broke, in words.
    """

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

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ProfileError(PerfkitError):
    """A profiler file is missing, damaged, of an unknown format or lacks a needed field.

    The message names the file, and where known the line or field, what was expected and
    what was found: ``"<path>:<line>: <field>: expected ..., found ..."``.
    """

    def __init__(self, path: object, problem: str, *, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        self.field = field
        where = self.path + (f":{line}" if line is not None else "")
        what = f"{field}: {problem}" if field else problem
        super().__init__(f"{where}: {what}")


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
    if isinstance(value, bool) or not _is_real(value) or value != int(value):
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
