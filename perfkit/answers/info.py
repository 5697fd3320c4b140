"""The ``info`` answer: what ``perfkit info PATH`` prints, as plain data — the profile,
the job read from it (each value with its source), the steps and the top findings."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import PerfkitError
from .advise import findings_list
from .common import envelope, number, plain

__all__ = ["profile_dict", "job_dict", "steps_dict", "figures_dict", "info_answer"]


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
    ``why`` instead where the profile has no step with a duration. ``split``: where the
    step goes (:func:`perfkit.widgets.headline.step_split`: ``part``, ``label``,
    ``share``, summed over ``split_over`` ranks and steps), empty where the profile does
    not divide its steps; ``per_step``: each step's slowest rank, its wall time in ms and
    the shares of its split (:func:`perfkit.widgets.slowest_steps.slowest_steps`), as
    ``perfkit info`` prints them."""
    from ..analysis import measured_step_s, step_breakdown
    from ..analysis.steps import step_basis

    none = {"count": 0, "ids": [], "step_ms": None, "basis": "", "split": [],
            "split_over": None, "per_step": []}
    try:
        steps = step_breakdown(profile)
    except PerfkitError as exc:
        return {**none, "why": str(exc)}
    if steps.empty or "step" not in steps.columns:
        why = "; ".join(steps.attrs.get("notes", [])) or "no step found"
        return {**none, "why": why}
    ids = sorted({int(s) for s in steps["step"].dropna().tolist()})
    step_s = number(measured_step_s(steps))
    return {"count": len(ids) or 1, "ids": ids,
            "step_ms": None if step_s is None else step_s * 1e3,
            "basis": step_basis(steps) if step_s is not None else "",
            "why": "" if step_s is not None else "no step has a duration",
            **(_split(steps) if step_s is not None else
               {k: none[k] for k in ("split", "split_over", "per_step")})}


def _split(steps: Any) -> dict[str, Any]:
    """``split``, ``split_over`` and ``per_step`` of :func:`steps_dict`."""
    from ..widgets.headline import step_split
    from ..widgets.slowest_steps import slowest_steps

    split = step_split(steps)
    divided = not split.empty and bool(split.attrs.get("rows", 1))
    shown = slowest_steps(steps, rounded=False)
    per_step = [{"step": None if r["step"] is None else int(r["step"]),
                 "rank": None if r["rank"] is None else int(r["rank"]),
                 "step_ms": None if number(r["wall_us"]) is None else r["wall_us"] / 1e3,
                 "shares": {c: number(r[c]) for c in shown.parts}}
                for r in (plain(rec) for rec in shown.rows.to_dict("records"))]
    return {"split": [{"part": str(r.part), "label": str(r.label), "share": number(r.share)}
                      for r in split.itertuples()] if divided else [],
            "split_over": {"ranks": int(split.attrs["ranks"]),
                           "steps": int(split.attrs["steps"]),
                           "left_out": str(split.attrs.get("left_out", ""))}
            if divided else None,
            "per_step": per_step}


def figures_dict(job: Any) -> dict[str, Any]:
    """The job's figures as ``perfkit info`` prints them (:func:`perfkit.widgets.summary.
    job_summary`: tokens/s per device, MFU, HFU, memory, the uncalibrated step estimate
    ...), each ``key``, ``metric``, ``value``, ``unit``, ``text``, ``note`` and ``warning``
    (a flagged figure's value is null: never a plain number); ``why`` where they cannot
    be computed (the model, the device or the step time not known: tokens/s per device
    alone then, where the batch, the devices and the step are known)."""
    from ..widgets.summary import job_summary

    if job.missing():  # throughput needs only the batch, the devices and the step
        from ..job.unknowns import unknown_labels
        from ..widgets.headline import throughput_figure

        labels = unknown_labels(job, ("model", "hardware", "step_time_s"))
        tps = throughput_figure(job, job.step_time_s or float("nan"))
        rows = [] if tps.value is None else [{
            "key": "tokens_per_s_per_device", "metric": "tokens/s per device",
            "value": number(tps.value), "unit": "tokens/s",
            "text": tps.text.split(" tokens")[0], "note": tps.note, "warning": None}]
        return {"rows": rows, "why": "other figures not computed: " + ", ".join(labels)
                + " not known"}
    try:
        summary = job_summary(job)
    except PerfkitError as exc:
        return {"rows": [], "why": f"not computed: {exc}"}
    rows = []
    for r in summary.to_dict("records"):
        warning = r["warning"] if isinstance(r["warning"], str) and r["warning"] else None
        rows.append({"key": str(r["key"]), "metric": str(r["metric"]),
                     "value": None if warning else number(r["value"]),
                     "unit": str(r["unit"]), "text": str(r["text"]),
                     "note": str(r["note"]), "warning": warning})
    return {"rows": rows, "why": ""}


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
        ``{"kind": "info", ..., "profile": profile_dict, "job": job_dict, "figures":
        figures_dict, "steps": steps_dict, "findings_total": int|None, "findings": [...],
        "recording": [...]}``.
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
           "figures": figures_dict(job), "steps": steps_dict(profile),
           "findings_total": total, "findings": findings}
    if recording:
        from .check import check_items

        out["recording"] = check_items(profile)
    return envelope("info", **out)
