"""The ``job`` and ``runs`` answers: what run a profile is (:func:`perfkit.infer_job`) and
which separate runs a folder holds (:func:`perfkit.runs`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .common import envelope, plain
from .info import job_dict

__all__ = ["job_answer", "runs_answer"]


def job_answer(job: Any, path: str = "") -> dict[str, Any]:
    """The ``job`` answer: ``{"kind": "job", ..., "path", "job": job_dict(job)}``
    (:func:`perfkit.answers.info.job_dict`)."""
    return envelope("job", path=str(path), job=job_dict(job))


def runs_answer(runs: Sequence[Any], path: str = "") -> dict[str, Any]:
    """The ``runs`` answer of :func:`perfkit.runs`: per run its ``id`` and ``name`` (what
    ``load(path, run=...)`` takes), ``label``, ``ranks``, ``framework``, ``platform``,
    ``world_size`` and ``start`` (ISO text, or null)."""
    rows = [{"id": plain(r.id), "name": str(r.name), "label": str(r.label),
             "ranks": [int(x) for x in (r.ranks or []) if x is not None],
             "framework": plain(r.framework), "platform": plain(r.platform),
             "world_size": plain(r.world_size), "start": plain(r.start)}
            for r in runs]
    return envelope("runs", path=str(path), runs=rows)
