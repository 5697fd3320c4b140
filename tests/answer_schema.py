"""Validation of an answer against the JSON Schema shipped in the package."""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema

from perfkit.answers import schema

__all__ = ["validate", "no_nan"]


def validate(answer: Any, kind: str) -> None:
    """``answer`` is valid against the shipped schema as a whole and against its kind's
    ``$defs`` entry (so a wrong kind cannot pass through another kind's entry)."""
    s = schema()
    jsonschema.Draft202012Validator.check_schema(s)
    jsonschema.validate(answer, s, cls=jsonschema.Draft202012Validator)
    one = dict(s["$defs"][kind], **{"$defs": s["$defs"]})
    jsonschema.validate(answer, one, cls=jsonschema.Draft202012Validator)
    assert answer["kind"] == kind


def no_nan(text: str) -> Any:
    """Parse ``text`` refusing NaN and infinities (JSON has none); returns the value."""
    def refuse(name: str) -> float:
        raise AssertionError(f"{name} in the JSON")
    value = json.loads(text, parse_constant=refuse)
    assert not any(isinstance(x, float) and not math.isfinite(x) for x in _leaves(value))
    return value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]
