"""A run measured once (:func:`measure_run`) into a :class:`RunRecord`: the profile loaded
or taken, its job read, its metrics and tables kept, its path and fingerprint stored.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from ...bundled_samples import SAMPLE_PREFIX, is_sample_spec, resolve_sample, sample_list
from ...errors import InvalidArgumentError
from ...job import Job, infer_job
from ...resources import ResourceError
from ..fingerprint import fingerprint as content_fingerprint
from .fields import MAX_OPERATOR_NAMES, METRIC_KEYS
from .job_fields import job_rows, perfkit_version
from .metrics import run_metrics
from .parts import run_breakdown, run_findings, run_operators

__all__ = ["RunRecord", "measure_run", "profile_spec", "not_loaded", "ranks_not_loaded"]


@dataclass(frozen=True)
class RunRecord:
    """One run, as the journal stores it.

    Attributes
    ----------
    path : str or None
        Where the profile was: ``"sample:NAME"`` for a bundled sample, else an absolute
        path; None when the profile is not kept anywhere (``provenance`` then says how to
        make it again). The journal stores it relative to its own folder when it lies
        inside it (see docs/journal.md).
    fingerprint : str
        Content fingerprint of the profile (:func:`perfkit.journal.fingerprint.fingerprint`).
    profile_bytes : int
        Bytes of profile the fingerprint covers.
    label, note : str or None
        The user's name for the run and a free note.
    job_line : str
        :meth:`perfkit.Job.describe`.
    job_problems : tuple of str
        The ranks of the folder that did not load (:func:`not_loaded`), then
        :meth:`perfkit.Job.problems` (where the job disagrees with its profile).
    job, metrics, breakdown, findings, operators : pandas.DataFrame
        :func:`job_rows`, :func:`run_metrics`, :func:`run_breakdown`,
        :func:`run_findings`, :func:`run_operators`.
    operator_names_total : int
        Distinct task names in the profile (``operators`` keeps at most
        :data:`MAX_OPERATOR_NAMES`).
    source_format, framework : str or None
        Of the profile (``profile.meta``).
    ranks : int or None
        Ranks loaded.
    profiled_utc : str or None
        When the profile started (ISO 8601, UTC), where the profile records it.
    added_utc : str or None
        When the run was added; None lets the journal stamp the time of writing.
    provenance : str or None
        How the profile was made or can be made again.
    perfkit_version : str
        The perfkit that measured it.
    """

    path: str | None
    fingerprint: str
    profile_bytes: int
    label: str | None
    note: str | None
    job_line: str
    job_problems: tuple[str, ...]
    job: pd.DataFrame = field(repr=False)
    metrics: pd.DataFrame = field(repr=False)
    breakdown: pd.DataFrame = field(repr=False)
    findings: pd.DataFrame = field(repr=False)
    operators: pd.DataFrame = field(repr=False)
    operator_names_total: int = 0
    source_format: str | None = None
    framework: str | None = None
    ranks: int | None = None
    profiled_utc: str | None = None
    added_utc: str | None = None
    provenance: str | None = None
    perfkit_version: str = field(default_factory=lambda: perfkit_version())

    def replace(self, **changes: Any) -> RunRecord:
        """A copy with some attributes changed (``label``, ``note``, ``path``, ...)."""
        return dataclasses.replace(self, **changes)

    def metric(self, key: str) -> float | None:
        """The value of one metric (None when not computed or flagged by a guard)."""
        row = self.metrics[self.metrics["key"] == key]
        if row.empty:
            raise InvalidArgumentError("key", "must be one of " + ", ".join(METRIC_KEYS), key)
        value = row["value"].iloc[0]
        return None if value is None or (isinstance(value, float) and math.isnan(value)) \
            else float(value)


def profile_spec(path: str | os.PathLike[str]) -> str:
    """How a profile path is kept: ``"sample:NAME"`` for a bundled sample (so a journal
    that names it works from any installation), else the absolute path."""
    if is_sample_spec(path):
        resolved = Path(resolve_sample(path)).resolve()
    else:
        resolved = Path(path).expanduser().resolve()
    try:
        for sample in sample_list():
            if sample.path.resolve() == resolved:
                return SAMPLE_PREFIX + sample.short_name
    except ResourceError:
        pass
    return str(resolved)


def _utc(ns: Any) -> str | None:
    try:
        value = int(ns)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    return datetime.fromtimestamp(value / 1e9, tz=timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def measure_run(profile_or_path: Any, job: Job | None = None, *, config: Any = None,
                label: str | None = None, note: str | None = None,
                max_names: int = MAX_OPERATOR_NAMES,
                fingerprint: tuple[str, int] | None = None) -> RunRecord:
    """Measure a run for the journal, without writing anything.

    Parameters
    ----------
    profile_or_path : Profile, Cluster, path or ``"sample:NAME"``
        The profile (loaded with :func:`perfkit.load` when a path).
    job : perfkit.Job, optional
        The job that ran; default :func:`perfkit.infer_job` of the profile (with
        ``config``).
    config : path, dict or list, optional
        A MindFormers YAML, HF ``config.json``, training log or dict that wins over the
        profile (see :func:`perfkit.infer_job`); ignored when ``job`` is given.
    label, note : str, optional
        Kept with the run.
    max_names : int
        Task names kept in the operator table.
    fingerprint : (str, int), optional
        The profile's fingerprint and size when already computed
        (:func:`perfkit.journal.fingerprint.fingerprint`).

    Returns
    -------
    RunRecord

    Raises
    ------
    perfkit.PerfkitError
        The profile cannot be read (the message names the file), or ``job`` is not a Job.
    """
    from ...io.engines.local import load

    if isinstance(profile_or_path, (str, os.PathLike)):
        spec = profile_spec(profile_or_path)
        profile = load(profile_or_path)
    elif getattr(profile_or_path, "meta", None) is not None:
        profile = profile_or_path
        if not profile.meta.path:
            raise InvalidArgumentError("profile_or_path", "the profile has no path to "
                                       "fingerprint; load it from a file or folder")
        spec = profile_spec(profile.meta.path)
    else:
        raise InvalidArgumentError("profile_or_path", "must be a path, 'sample:NAME' or a "
                                   "profile from perfkit.load", type(profile_or_path).__name__)
    if job is None:
        job = infer_job(profile, config=config)
    elif not isinstance(job, Job):
        raise InvalidArgumentError("job", "must be a perfkit.Job (perfkit.infer_job)",
                                   type(job).__name__)
    where = resolve_sample(spec) if is_sample_spec(spec) else spec
    digest, size = fingerprint if fingerprint is not None else content_fingerprint(where)
    operators, names = run_operators(profile, max_names)
    meta = profile.meta
    ranks = getattr(profile, "ranks", None)
    return RunRecord(
        path=spec, fingerprint=digest, profile_bytes=size, label=label, note=note,
        job_line=job.describe(), job_problems=(*not_loaded(profile), *job.problems()),
        job=job_rows(job),
        metrics=run_metrics(job), breakdown=run_breakdown(profile),
        findings=run_findings(profile, job), operators=operators,
        operator_names_total=names, source_format=_text_or_none(meta.source_format),
        framework=_text_or_none(meta.framework), ranks=len(ranks) if ranks else 1,
        profiled_utc=_utc(getattr(meta, "origin_ns", None)))


#: How :func:`not_loaded` words a rank that did not load (its rank and why follow).
_NOT_LOADED = " not loaded: "


def not_loaded(profile: Any) -> list[str]:
    """One sentence per rank of the folder that did not load, with why (``Cluster.failed``):
    the run's figures are then those of the ranks that did."""
    failed = getattr(profile, "failed", None) or {}
    return [f"rank {r}{_NOT_LOADED}{why}" for r, why in sorted(failed.items(), key=str)]


def ranks_not_loaded(problems: Iterable[str]) -> list[str]:
    """The sentences of :func:`not_loaded` among a record's ``job_problems`` (stored with
    the job's own problems in one column of the journal)."""
    return [p for p in problems if str(p).startswith("rank ") and _NOT_LOADED in str(p)]


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _check_record(record: Any) -> RunRecord:
    if not isinstance(record, RunRecord):
        raise InvalidArgumentError("record", "must be a RunRecord (measure_run)",
                                   type(record).__name__)
    return record
