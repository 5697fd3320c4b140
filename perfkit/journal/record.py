"""What the tuning journal keeps of one run: measured once, from the profile and its job.

:func:`measure_run` loads a profile (or takes a loaded one), reads its job
(:func:`perfkit.infer_job`, or the job given), and keeps everything a later comparison
needs without the profile: the job field by field with its sources, the measured metrics
(step time, throughput, MFU / HFU through :mod:`perfkit.guards`, peak memory), the step
breakdown, the advisor's findings and the operator time per category and per name. The
result, a :class:`RunRecord`, is plain data: :class:`perfkit.journal.Journal` writes it
in one transaction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .._stats import median
from ..advisor import advise
from ..analysis.compare import operator_totals
from ..analysis.steps import step_breakdown
from ..bundled_samples import SAMPLE_PREFIX, is_sample_spec, resolve_sample, sample_list
from ..calc import (
    hardware_flops,
    hfu,
    mfu,
    model_flops,
    tokens_per_second_per_device,
    tokens_per_second_per_p,
)
from ..errors import InvalidArgumentError
from ..format import bytes_text, sig, time_text
from ..guards import check_utilization
from ..job import JOB_FIELDS, MODEL_FIELDS, PARALLEL_FIELDS, Job, infer_job
from ..resources import ResourceError
from ..specs import Hardware
from .fingerprint import fingerprint as content_fingerprint

__all__ = ["RunRecord", "measure_run", "run_metrics", "run_breakdown", "run_findings",
           "run_operators", "job_rows", "profile_spec", "METRIC_KEYS", "METRIC_COLUMNS",
           "BREAKDOWN_PARTS", "BREAKDOWN_COLUMNS", "FINDING_COLUMNS", "OPERATOR_COLUMNS",
           "JOB_COLUMNS", "MEASURED_FIELDS", "perfkit_version", "flops_text",
           "MAX_OPERATOR_NAMES", "GROUPINGS", "GIB"]

GIB = 2**30
#: The metrics of a run, in display order (:func:`run_metrics`).
METRIC_KEYS = ("step_time_s", "devices", "global_batch_size", "seq_length",
               "tokens_per_s_per_device", "tokens_per_s_per_p", "mfu", "hfu",
               "model_flops_per_step", "recompute_flops_per_step", "peak_memory_bytes")
#: Columns of :func:`run_metrics`.
METRIC_COLUMNS = ("key", "metric", "value", "unit", "text", "warning", "note")
#: Parts of the step breakdown kept (:func:`perfkit.analysis.compare_steps`'s parts).
BREAKDOWN_PARTS = ("step_us", "computing_us", "comm_not_overlapped_us", "overlapped_us",
                   "free_us", "bubble_us", "preparing_us")
#: Columns of :func:`run_breakdown`.
BREAKDOWN_COLUMNS = ("part", "us", "share")
#: Columns of :func:`run_findings`.
FINDING_COLUMNS = ("position", "rule", "severity", "area", "title", "ms_per_step",
                   "measured", "score", "evidence", "recommendation")
#: Columns of :func:`run_operators` (one table per grouping).
OPERATOR_COLUMNS = ("grouping", "key", "count", "us")
#: Operator tables kept: by shared category and by task name.
GROUPINGS = ("category", "name")
#: Columns of :func:`job_rows`.
JOB_COLUMNS = ("field", "kind", "value", "source", "detail")
#: Job fields that are measurements, not settings (compared as metrics, not as config).
MEASURED_FIELDS = ("step_time_s", "peak_memory_bytes")
#: Most task names kept per run (the longest first); the rest is counted, not named.
MAX_OPERATOR_NAMES = 500


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


# --------------------------------------------------------------------------------------
# the job
# --------------------------------------------------------------------------------------

def perfkit_version() -> str:
    """The version of this perfkit (read when called: the package imports this module)."""
    from .._version import __version__

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


# --------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------

def _metric(key: str, metric: str, value: float | None, unit: str, text: str, note: str,
            warning: str | None = None) -> dict[str, Any]:
    if value is not None and not math.isfinite(float(value)):
        value = None
    return {"key": key, "metric": metric, "value": None if value is None else float(value),
            "unit": unit, "text": text, "warning": warning, "note": note}


def _missing(key: str, metric: str, unit: str, why: str) -> dict[str, Any]:
    return _metric(key, metric, None, unit, "–", f"not computed: {why}")


def run_metrics(job: Job) -> pd.DataFrame:
    """The measured figures of a run, from its job (:func:`perfkit.infer_job`).

    Parameters
    ----------
    job : perfkit.Job
        Its measured step time and peak memory, its batch, layout, model and hardware.

    Returns
    -------
    pandas.DataFrame
        One row per key of :data:`METRIC_KEYS`, columns :data:`METRIC_COLUMNS`:
        ``value`` is a float in ``unit`` or None — None also when a guard flags the
        figure: an MFU or HFU above 100 % is never kept as a plain number, its ``text``
        ends in "⚠ not plausible" and ``warning`` says which inputs disagree
        (:func:`perfkit.guards.check_utilization`). ``note`` gives the formula, or why
        the figure is not computed.

    Notes
    -----
    With ``B`` the global batch (sequences per step, the job's), ``s`` the sequence
    length, ``T`` the measured step time and ``D = dp·tp·pp·cp`` the devices (a figure
    whose input the job lacks is not computed, and its note says why):

    * tokens/s per device ``= B·s / (T·D)`` (:func:`perfkit.tokens_per_second_per_device`);
    * the seed's tokens/s/p ``= B·s / (T·dp)`` (:func:`perfkit.tokens_per_second_per_p`);
    * MFU ``= model FLOPs per token × tokens/s per device / peak`` and HFU (recompute
      FLOPs counted, selective recompute strictly: the attention core re-runs), both
      non-causal, exact GEMMs, the peak of the job's dtype on its hardware — the same
      conventions as :func:`perfkit.widgets.summary.metrics_summary`;
    * model FLOPs per step ``= model_flops(model, B·s)`` and recompute FLOPs per step
      ``= hardware_flops(model, B·s, recompute) − model_flops(model, B·s)``: theory for
      the job's model and recompute setting, not a measurement;
    * step time and peak memory are the job's measured values (their sources are in the
      job's evidence).
    """
    if not isinstance(job, Job):
        raise InvalidArgumentError("job", "must be a perfkit.Job (perfkit.infer_job)",
                                   type(job).__name__)
    p = job.parallel
    model = job.model
    step = job.step_time_s
    gbs = job.global_batch_size
    seq = job.seq_length or (model.seq_length if model is not None else None)
    devices = p.world_size
    rows: list[dict[str, Any]] = []
    step_note = f"{job.detail('step_time_s')} [{job.source('step_time_s')}]"
    if step:
        rows.append(_metric("step_time_s", "step time", step, "s", _seconds(step), step_note))
    else:
        rows.append(_missing("step_time_s", "step time", "s", job.detail("step_time_s")))
    rows.append(_metric("devices", "devices (dp × tp × pp × cp)", devices, "devices",
                        f"{devices}", f"dp {p.dp} × tp {p.tp} × pp {p.pp} × cp {p.cp} "
                                      f"[{job.source('dp')}]"))
    if gbs:
        rows.append(_metric("global_batch_size", "global batch", gbs, "sequences", f"{gbs}",
                            f"sequences per step [{job.source('global_batch_size')}]"))
    else:
        rows.append(_missing("global_batch_size", "global batch", "sequences",
                             job.detail("global_batch_size")))
    if seq:
        rows.append(_metric("seq_length", "sequence length", seq, "tokens", f"{seq}",
                            f"tokens per sequence [{job.source('seq_length')}]"))
    else:
        rows.append(_missing("seq_length", "sequence length", "tokens",
                             job.detail("seq_length")))
    tps_device = tps_p = None
    if step and seq and gbs:
        tps_device = tokens_per_second_per_device(gbs, seq, step, devices)
        tps_p = tokens_per_second_per_p(gbs, seq, step, p.dp)
        rows.append(_metric("tokens_per_s_per_device", "tokens/s per device", tps_device,
                            "tokens/s", f"{tps_device:,.0f}",
                            f"B·s / (T·D) = {gbs} × {seq} / ({time_text(step * 1e6, digits=4)}"
                            f" × {devices})"))
        rows.append(_metric("tokens_per_s_per_p", "tokens/s/p (seed, p = dp)", tps_p,
                            "tokens/s", f"{tps_p:,.0f}",
                            f"B·s / (T·dp) = {gbs} × {seq} / ({time_text(step * 1e6, digits=4)}"
                            f" × {p.dp})"))
    else:
        why = "the job has no " + ("step time" if not step else "sequence length" if not seq
                                   else "global batch")
        rows.append(_missing("tokens_per_s_per_device", "tokens/s per device", "tokens/s", why))
        rows.append(_missing("tokens_per_s_per_p", "tokens/s/p (seed, p = dp)", "tokens/s",
                             why))
    rows += _utilisation_rows(job, tps_device)
    rows += _flops_rows(job, gbs, seq)
    peak = job.peak_memory_bytes
    if peak:
        rows.append(_metric("peak_memory_bytes", "peak memory (measured)", peak, "bytes",
                            bytes_text(peak),
                            f"{job.detail('peak_memory_bytes')} "
                            f"[{job.source('peak_memory_bytes')}]"))
    else:
        rows.append(_missing("peak_memory_bytes", "peak memory (measured)", "bytes",
                             job.detail("peak_memory_bytes")))
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def _seconds(s: float) -> str:
    return time_text(s * 1e6)


def _utilisation_rows(job: Job, tps_device: float | None) -> list[dict[str, Any]]:
    labels = {"mfu": "MFU", "hfu": "HFU"}
    why = None
    if tps_device is None:
        why = "no throughput (see tokens/s per device)"
    elif job.model is None or job.hardware is None:
        why = "the job lacks " + "; ".join(m for m in job.missing()
                                          if not m.startswith("the step"))
    dtype = None
    if why is None:
        dtype = job.dtype if job.dtype in job.hardware.peak_flops else None
        if job.dtype and dtype is None:
            why = (f"the job computes in {job.dtype}: "
                   f"{job.hardware.missing_peak(job.dtype)}")
    if why is not None:
        return [_missing(k, v, "fraction", why) for k, v in labels.items()]
    p = job.parallel
    model = job.model
    full = p.full_recompute_layers_per_stage(model)
    values = {
        "mfu": mfu(model, tps_device, job.hardware, causal=False, dtype=dtype),
        "hfu": hfu(model, tps_device, job.hardware, recompute=p.recompute,
                   selective_mode="strict", causal=False, full_recompute_layers=full,
                   dtype=dtype, selective_core=job.activation_model.recomputes_attention_core),
    }
    peak = job.hardware.peak(dtype)
    notes = {
        "mfu": f"model FLOPs (exact GEMMs, non-causal) × tokens/s per device / "
               f"{dtype or job.hardware.default_dtype} peak {peak / 1e12:,.0f} TFLOP/s",
        "hfu": f"adds recompute FLOPs ({p.recompute}, full layers per stage "
               f"{list(full)}{_selective_clause(job, '; ')}); non-causal",
    }
    rows = []
    for key, label in labels.items():
        guard = check_utilization(values[key], label, job)
        rows.append(_metric(key, label, values[key] if guard.ok else None, "fraction",
                            guard.text(), notes[key], guard.warning))
    return rows


def flops_text(flops: float) -> str:
    """FLOPs in the unit that fits, 3 significant digits (``1.52 PFLOP``, ``312 TFLOP``)."""
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9),
                        ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(flops) >= scale:
            return f"{sig(flops / scale)} {unit}"
    return f"{sig(flops)} FLOP"


def _flops_rows(job: Job, gbs: int | None, seq: int | None) -> list[dict[str, Any]]:
    keys = {"model_flops_per_step": "model FLOPs per step (theory)",
            "recompute_flops_per_step": "recompute FLOPs per step (theory)"}
    if job.model is None or not gbs or not seq:
        why = "the job has no model" if job.model is None else "the job has no batch"
        return [_missing(k, v, "FLOP", why) for k, v in keys.items()]
    p = job.parallel
    tokens = gbs * seq
    full = p.full_recompute_layers_per_stage(job.model)
    base = model_flops(job.model, tokens, causal=False)
    extra = hardware_flops(job.model, tokens, recompute=p.recompute, selective_mode="strict",
                           causal=False, full_recompute_layers=full,
                           selective_core=job.activation_model.recomputes_attention_core) - base
    return [
        _metric("model_flops_per_step", keys["model_flops_per_step"], base, "FLOP",
                flops_text(base), f"model_flops(model, B·s = {tokens}), "
                                             "fwd + bwd, non-causal"),
        _metric("recompute_flops_per_step", keys["recompute_flops_per_step"], extra, "FLOP",
                flops_text(extra),
                f"hardware_flops − model_flops: recompute {p.recompute}, full layers per "
                f"stage {list(full)}{_selective_clause(job, ', ')}"),
    ]


def _selective_clause(job: Job, sep: str) -> str:
    """How a selectively recomputed layer was counted, after ``sep``; nothing without
    selective recompute."""
    if job.parallel.recompute != "selective":
        return ""
    return sep + job.activation_model.selective_flops_note


# --------------------------------------------------------------------------------------
# breakdown, findings, operators
# --------------------------------------------------------------------------------------

def run_breakdown(profile: Any) -> pd.DataFrame:
    """The step breakdown of a run: per part, the median over ranks and steps.

    Returns
    -------
    pandas.DataFrame
        One row per part of :data:`BREAKDOWN_PARTS` that the profile has: ``part``,
        ``us`` (median of :func:`perfkit.analysis.step_breakdown`'s column over every
        (rank, step), as :func:`perfkit.analysis.compare_steps` takes it) and ``share``
        (``us`` / the median ``step_us``). Empty when the profile has no step breakdown.
    """
    steps = step_breakdown(profile)
    rows = []
    if not steps.empty and "step_us" in steps.columns:
        step = median(steps["step_us"])
        for part in BREAKDOWN_PARTS:
            if part not in steps.columns:
                continue
            us = median(steps[part])
            if math.isnan(us):
                continue
            share = us / step if step > 0 else None  # NaN > 0 is False
            rows.append({"part": part, "us": us, "share": share})
    return pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS))


def run_findings(profile: Any, job: Job) -> pd.DataFrame:
    """The advisor's findings for the run, best first (:func:`perfkit.advise` with the
    job's model, layout and hardware).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FINDING_COLUMNS`; ``position`` 1 is the first finding;
        ``ms_per_step`` NaN when the cost is not measurable.
    """
    found = advise(profile, model=job.model, parallel=job.parallel, hardware=job.hardware)
    rows = [{"position": i, "rule": f.rule, "severity": f.severity, "area": f.area,
             "title": f.title, "ms_per_step": float(f.ms_per_step), "measured": bool(f.measured),
             "score": float(f.score), "evidence": f.evidence,
             "recommendation": f.recommendation} for i, f in enumerate(found, 1)]
    return pd.DataFrame(rows, columns=list(FINDING_COLUMNS))


def run_operators(profile: Any, max_names: int = MAX_OPERATOR_NAMES) -> tuple[pd.DataFrame, int]:
    """Device time per operator category and per task name, per (rank, step).

    Parameters
    ----------
    profile : Profile or Cluster
    max_names : int
        Task names kept (the longest first).

    Returns
    -------
    (pandas.DataFrame, int)
        Columns :data:`OPERATOR_COLUMNS` (``grouping`` is ``"category"`` or ``"name"``):
        :func:`perfkit.analysis.compare.operator_totals` with its defaults (per (rank,
        step), communication included) — the two sides :func:`perfkit.analysis.
        compare_profiles` diffs, so a diff of two stored runs is the one the profiles
        would give; and the number of distinct task names before ``max_names`` was
        applied.
    """
    frames = []
    total_names = 0
    for grouping in GROUPINGS:
        t = operator_totals(profile, by=grouping)
        if grouping == "name":
            total_names = len(t)
            t = t.sort_values("us", ascending=False, kind="mergesort").head(max_names)
        frames.append(pd.DataFrame({"grouping": grouping, "key": t.index.astype(str),
                                    "count": t["count"].to_numpy(float),
                                    "us": t["us"].to_numpy(float)}))
    return pd.concat(frames, ignore_index=True)[list(OPERATOR_COLUMNS)], total_names


# --------------------------------------------------------------------------------------
# the whole record
# --------------------------------------------------------------------------------------

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
    from ..io.detect import load

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
        job_line=job.describe(), job_problems=tuple(job.problems()), job=job_rows(job),
        metrics=run_metrics(job), breakdown=run_breakdown(profile),
        findings=run_findings(profile, job), operators=operators,
        operator_names_total=names, source_format=_text_or_none(meta.source_format),
        framework=_text_or_none(meta.framework), ranks=len(ranks) if ranks else 1,
        profiled_utc=_utc(getattr(meta, "origin_ns", None)))


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _check_record(record: Any) -> RunRecord:
    if not isinstance(record, RunRecord):
        raise InvalidArgumentError("record", "must be a RunRecord (measure_run)",
                                   type(record).__name__)
    return record

