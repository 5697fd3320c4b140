"""The ``check`` answer: what the recording lacks per analysis, and the switch that turns
it on (:func:`perfkit.analysis.recording_check.recording_check`)."""

from __future__ import annotations

from typing import Any

from .common import envelope

__all__ = ["check_items", "check_answer"]


def check_items(profile: Any) -> list[dict[str, Any]]:
    """The rows of :func:`~perfkit.analysis.recording_check.recording_check`, as dicts
    (``analysis``, ``profiler``, ``status``, ``switch``, ``lacks``, ``evidence``,
    ``cost``)."""
    from ..analysis.recording_check import recording_check

    return [{k: str(v) for k, v in r.items()}
            for r in recording_check(profile).to_dict("records")]


def check_answer(profile: Any, path: str | None = None) -> dict[str, Any]:
    """The ``check`` answer of a loaded profile; ``path`` as the caller gave it (default
    the profile's folder).

    Returns
    -------
    dict
        ``{"kind": "check", ..., "path", "profiler", "missing": int, "items": [...],
        "notes": [the loader's meta.notes]}``; ``missing`` counts the items whose
        status is ``"missing"``.
    """
    items = check_items(profile)
    profiler = items[0]["profiler"] if items else ""
    return envelope("check", path=path or str(profile.meta.path or ""), profiler=profiler,
                    missing=sum(i["status"] == "missing" for i in items), items=items,
                    notes=[str(n) for n in profile.meta.notes])
