"""The job as a run record keeps it: one row per field with its kind, value, source and
detail (:func:`job_rows`), and the perfkit version that measured it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from ...job import JOB_FIELDS, MODEL_FIELDS, PARALLEL_FIELDS, Job
from ...specs import Hardware
from .fields import JOB_COLUMNS, MEASURED_FIELDS

__all__ = ["job_rows", "perfkit_version"]


def perfkit_version() -> str:
    """The version of this perfkit (read when called: the package imports this module)."""
    from ..._version import __version__

    return __version__


def _plain(value: Any) -> Any:
    """A JSON-able form of a job value (a Hardware by its preset name, tuples as lists)."""
    if isinstance(value, Hardware):
        return value.name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _kind(name: str) -> str:
    if name in MEASURED_FIELDS:
        return "measured"
    if name in MODEL_FIELDS:
        return "model"
    if name in PARALLEL_FIELDS:
        return "parallel"
    return "run"


def job_rows(job: Job) -> pd.DataFrame:
    """The job field by field, as the journal stores it.

    Returns
    -------
    pandas.DataFrame
        One row per field of :data:`perfkit.job.JOB_FIELDS`: ``field``, ``kind``
        (``model``, ``parallel``, ``run`` or ``measured``), ``value`` (JSON text: a
        hardware by its preset name, a per-stage list as a list, ``null`` when unknown),
        ``source`` and ``detail`` (from :attr:`perfkit.Job.evidence`).
    """
    rows = []
    for name in JOB_FIELDS:
        rows.append({"field": name, "kind": _kind(name),
                     "value": json.dumps(_plain(job.value(name)), sort_keys=True),
                     "source": job.source(name), "detail": job.detail(name)})
    return pd.DataFrame(rows, columns=list(JOB_COLUMNS))
