"""What every answer of :mod:`perfkit.answers` shares: the envelope, plain JSON values (no
NaN, no numpy scalars), stable finding ids and the shipped JSON Schema."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from .._version import __version__

__all__ = ["SCHEMA_VERSION", "KINDS", "envelope", "plain", "number", "finding_id",
           "schema", "dumps"]

#: The version of the answers' layout; it changes when a field is renamed or removed
#: (a new field does not change it).
SCHEMA_VERSION = "1"

#: The kinds of answers, one ``$defs`` entry each in ``schema.json``.
KINDS = ("info", "advise", "predict", "lab-grade", "check", "compare", "job", "runs",
         "error")


def envelope(kind: str, **fields: Any) -> dict[str, Any]:
    """An answer: ``kind``, ``schema_version``, ``perfkit_version``, then ``fields``, made
    plain (:func:`plain`).

    Raises
    ------
    ValueError
        ``kind`` is not one of :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    out: dict[str, Any] = {"kind": kind, "schema_version": SCHEMA_VERSION,
                           "perfkit_version": __version__}
    out.update(fields)
    return plain(out)


def number(value: Any) -> float | None:
    """A finite float, or None for NaN, infinity, ``pd.NA`` and None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def plain(value: Any) -> Any:
    """``value`` as JSON's types: dicts with str keys, lists, str, int, float, bool, None.
    NaN and infinities become None; numpy scalars and arrays their Python values; a
    tuple or set a list; anything else its ``str``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item) and getattr(value, "ndim", 1) == 0:
        return plain(item())
    tolist = getattr(value, "tolist", None)  # numpy array
    if callable(tolist):
        return plain(tolist())
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, pd.Timestamp):
            return value.isoformat()
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return str(value)


#: A measured figure in a title: a number with a decimal point, or followed by a unit or
#: a percent sign (``25 %``, ``1.5 ms``, ``3×``); bare whole numbers (a rank, a step) stay.
_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?\s*(%|×|x\b|[kMG]?i?B\b|[mµu]?s\b|ms\b)"
                     r"|(?<![\w.])\d+\.\d+")


def finding_id(rule: str, title: str) -> str:
    """A finding's stable id: its rule, a slash, and its title's words without the
    measured figures (lower case, joined by ``-``, at most 60 characters, whole words).

    The same finding of the same profile always has the same id, and a finding whose
    figures move between two runs (``25 %`` → ``18 %``) keeps it; what it is about (a rank,
    an operator's name) stays part of it.

    Examples
    --------
    >>> finding_id("slow_ranks", "Rank 2 computes 25 % slower than the others")
    'slow_ranks/rank-2-computes-slower-than-the-others'
    """
    words = re.sub(r"[^0-9a-z]+", "-", _FIGURE.sub(" ", title.lower())).strip("-")
    subject = words[:60].rstrip("-")
    if len(words) > 60 and words[60] != "-" and "-" in subject:  # no half word at the end
        subject = subject.rsplit("-", 1)[0]
    return f"{rule or 'finding'}/{subject}" if subject else (rule or "finding")


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON Schema of every answer (``perfkit/answers/schema.json``, shipped in the
    wheel): one ``$defs`` entry per kind, the top level any of them."""
    text = resources.files(__package__).joinpath("schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def dumps(answer: Mapping[str, Any]) -> str:
    """An answer as JSON text (indented, NaN refused: :func:`plain` has removed it)."""
    return json.dumps(answer, indent=2, ensure_ascii=False, allow_nan=False)
