"""The ``info`` answer: what ``perfkit info PATH`` prints, as plain data — the profile,
the job read from it (each value with its source), the steps and the top findings."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import PerfkitError
from .advise import findings_list
from .common import envelope, number, plain

__all__ = ["profile_dict", "job_dict", "steps_dict", "info_answer"]


def profile_dict(profile: Any) -> dict[str, Any]:
    """What the profile is: path, format, framework, device, profiler level, ranks, world
    size and the loader's notes (``meta.notes``: what is missing and why)."""
    meta = profile.meta
    ranks = getattr(profile, "ranks", None)
    ranks = list(ranks) if ranks is not None else ([meta.rank] if meta.rank is not None
                                                    else [])
    return {"path": str(meta.path or ""), "type": type(profile).__name__,
            "source_format": meta.source_format, "framework": meta.framework,
            "device_type": meta.device_type, "profiler_level": meta.profiler_level,
            "ranks": [int(r) for r in ranks], "world_size": meta.world_size,
            "notes": [str(n) for n in meta.notes]}


def job_dict(job: Any) -> dict[str, Any]:
    """The job (:class:`perfkit.Job`) as plain data: the model's fields (None when not
    read), the layout (every :class:`~perfkit.ParallelConfig` field), batch, hardware,
    dtype, measured step in ms, the fused attention kernel its kernel names show
    (``attention_kernel``: ``implementation``, null when none, and ``detail``;
    :attr:`perfkit.Job.attention_implementation`), and the evidence (``field``,
    ``value``, ``source``, ``detail``), the unknowns and the problems."""
    model = dataclasses.asdict(job.model) if job.model is not None else None
    parallel = dataclasses.asdict(job.parallel)
    parallel["world_size"] = job.parallel.world_size
    hw = job.hardware
    step_s = number(job.step_time_s)
    evidence = [{"field": str(r["field"]), "value": plain(r["value"]),
                 "source": str(r["source"]), "detail": str(r["detail"])}
                for r in job.evidence.to_dict("records")]
    return {"model": model, "parallel": parallel,
            "hardware": None if hw is None else {"name": hw.name,
                                                 "peak_flops": number(hw.peak()),
                                                 "memory_bytes": number(hw.memory_bytes)},
            "global_batch_size": job.global_batch_size, "seq_length": job.seq_length,
            "dtype": job.dtype, "step_time_ms": None if step_s is None else step_s * 1e3,
            "peak_memory_bytes": number(job.peak_memory_bytes),
            "attention_kernel": {"implementation": job.attention_implementation,
                                 "detail": job.attention_detail},
            "evidence": evidence,
            "unknowns": [{"field": u.field, "label": u.label, "why": u.why,
                          "needed_for": u.needed_for} for u in job.unknowns()],
            "problems": [str(p) for p in job.problems()]}


def steps_dict(profile: Any) -> dict[str, Any]:
    """The steps: their numbers, the measured step time in ms
    (:func:`perfkit.analysis.measured_step_s`: the median over steps of the slowest rank's
    wall time) and what it is over (:func:`perfkit.analysis.steps.step_basis`); with
    ``why`` instead where the profile has no step with a duration."""
    from ..analysis import measured_step_s, step_breakdown
    from ..analysis.steps import step_basis

    try:
        steps = step_breakdown(profile)
    except PerfkitError as exc:
        return {"count": 0, "ids": [], "step_ms": None, "basis": "", "why": str(exc)}
    if steps.empty or "step" not in steps.columns:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step found"
        return {"count": 0, "ids": [], "step_ms": None, "basis": "", "why": why}
    ids = sorted({int(s) for s in steps["step"].dropna().tolist()})
    step_s = number(measured_step_s(steps))
    return {"count": len(ids) or 1, "ids": ids,
            "step_ms": None if step_s is None else step_s * 1e3,
            "basis": step_basis(steps) if step_s is not None else "",
            "why": "" if step_s is not None else "no step has a duration"}


def info_answer(profile: Any, n_findings: int = 5, config: Any = None,
                recording: bool = True) -> dict[str, Any]:
    """The ``info`` answer of a loaded profile.

    Parameters
    ----------
    profile : Profile or Cluster
    n_findings : int
        How many findings to include (0: the advisor does not run; ``findings`` is then
        empty and ``findings_total`` None).
    config : path or list of paths, optional
        Given to :func:`perfkit.infer_job` (a config that wins over the profile).
    recording : bool
        Include ``recording``: what the recording lacks per analysis
        (:func:`perfkit.answers.check.check_items`).

    Returns
    -------
    dict
        ``{"kind": "info", ..., "profile": profile_dict, "job": job_dict, "steps":
        steps_dict, "findings_total": int|None, "findings": [...], "recording": [...]}``.
    """
    from ..job import infer_job

    job = infer_job(profile, config=config)
    findings: list[dict[str, Any]] = []
    total = None
    if n_findings:
        from ..advisor import advise

        found = advise(profile, model=job.model, parallel=job.parallel,
                       hardware=job.hardware)
        total = len(found)
        findings = findings_list(found, n_findings)
    out = {"profile": profile_dict(profile), "job": job_dict(job),
           "steps": steps_dict(profile), "findings_total": total, "findings": findings}
    if recording:
        from .check import check_items

        out["recording"] = check_items(profile)
    return envelope("info", **out)
