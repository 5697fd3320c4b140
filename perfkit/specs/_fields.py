"""Dataclass field helpers shared by the spec classes."""

from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["optional"]


def optional(default: Any) -> Any:
    """A field for a feature that is off at its default. ``dataclasses.fields`` still lists
    it; its metadata lets a serializer leave it out while it is off (the simulator's
    ``profiler_metadata.json`` stays the same for a job that does not use it)."""
    return field(default=default, metadata={"omit_when_default": True})
