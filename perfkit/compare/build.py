""":func:`compare`: two runs side by side, with a verdict, the difference split by step
part, kernel kind and operator, and what changed in the job.

Each side is a profile (a :class:`~perfkit.Profile` / :class:`~perfkit.Cluster`), a path
``perfkit.load`` reads, ``"sample:NAME"`` (a bundled sample) or the id or label of a run
of a tuning journal (``journal=``), whose profile is loaded.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._stats import median
from ..analysis.compare import compare_profiles
from ..analysis.steps import exposed_comm_us, step_breakdown, step_wall_us
from ..bundled_samples import path_not_found, resolve_sample
from ..errors import InvalidArgumentError, PerfkitError
from ..io.engines.loading import load
from ..job import JOB_FIELDS, infer_job
from ..journal import Journal
from .matching import match_operators
from .result import Comparison, Side
from .verdict import NOT_ONE_JOB, robust_sigma, step_verdict

__all__ = ["compare", "open_side", "side_summary", "step_parts", "job_changes",
           "not_one_job", "PART_COLUMNS", "NOT_ONE_JOB"]

#: The parts of the step compared (label, column of the step breakdown or "exposed").
PART_COLUMNS: tuple[tuple[str, str], ...] = (
    ("compute", "computing_us"), ("exposed communication", "exposed"),
    ("free", "free_us"), ("bubble", "bubble_us"), ("wait before the step", "preparing_us"))
#: Job fields that are measurements, not settings (the verdict covers them).
_MEASURED = ("step_time_s", "peak_memory_bytes")


def open_side(ref: Any, journal: Any = None) -> tuple[Any, str, str]:
    """The profile of one side, its path and its label.

    Parameters
    ----------
    ref : Profile, Cluster, str, path or int
        A profile; a path or ``"sample:NAME"``; or the id or label of a run of ``journal``.
    journal : Journal, str or path, optional
        The tuning journal whose runs ``ref`` may name.

    Raises
    ------
    PerfkitError
        ``ref`` is neither a profile, nor an existing path, nor a run of the journal (the
        message names it).
    """
    if hasattr(ref, "meta") and hasattr(ref, "kernels"):
        path = str(getattr(ref.meta, "path", "") or "")
        run = (getattr(ref.meta, "extra", None) or {}).get("run") or {}
        label = Path(path).name or "profile"
        if run.get("name") is not None:  # one of the separate runs a folder holds
            label += f" (run {run['name']})"
        return ref, path, label
    text = str(ref)
    resolved = resolve_sample(text) if isinstance(ref, (str, os.PathLike)) else text
    if Path(resolved).expanduser().exists():
        label = text.split(":", 1)[1] if text.startswith("sample:") else Path(text).name
        return load(Path(resolved).expanduser()), str(resolved), label
    path_like = any(c in text for c in "/\\") or text.startswith("sample:")
    if journal is not None and not path_like:
        book = journal if isinstance(journal, Journal) else Journal(journal, create=False)
        run = book.run(ref)
        return book.load_profile(run), str(book.profile_path(run)), str(run.label)
    hint = (" (a run id or label needs a journal: journal=, or --journal FILE)"
            if journal is None and not path_like else "")
    raise PerfkitError(path_not_found(text) + hint)


def side_summary(profile: Any, path: str, label: str
                 ) -> tuple[Side, pd.DataFrame, Any, list[str]]:
    """One side's step figures, its step breakdown, its job (None where it cannot be read)
    and notes (why the job could not be read; ranks that could not be loaded, whose steps
    the verdict then lacks)."""
    breakdown = step_breakdown(profile)
    known = breakdown.dropna(subset=["step_us"]) if "step_us" in breakdown else breakdown
    walls = step_wall_us(known) / 1e3 if not known.empty else pd.Series(dtype="float64")
    per_step = (pd.DataFrame({"step": known["step"], "w": walls})
                .groupby("step", dropna=False)["w"].max() if not known.empty
                else pd.Series(dtype="float64"))
    ranks = int(known["rank"].nunique()) if "rank" in known.columns and len(known) else (
        1 if len(known) else 0)
    notes: list[str] = []
    failed = sorted(map(str, getattr(profile, "failed", None) or {}))
    if failed:
        notes.append(f"{label}: {len(failed)} of {ranks + len(failed)} ranks could not be "
                     f"loaded (rank{'s' * (len(failed) > 1)} {', '.join(failed)}): its "
                     "figures are of the ranks loaded, and a slow rank among the others "
                     "would not show")
    try:
        job = infer_job(profile)
    except PerfkitError as exc:
        job = None
        notes.append(f"{label}: the job cannot be read ({exc})")
    work = _tokens_per_device(job)
    side = Side(path=path, label=label, step_ms=median(per_step),
                step_spread_ms=robust_sigma(walls.to_numpy()),
                steps=int(len(per_step)), ranks=ranks,
                format=str(getattr(profile.meta, "source_format", "") or ""),
                step_times_ms=tuple(float(x) for x in per_step.to_numpy()),
                tokens_per_device=work)
    return side, breakdown, job, notes


def _tokens_per_device(job: Any) -> float | None:
    """Tokens one device works through per step: global batch × sequence / devices."""
    if job is None:
        return None
    gbs, seq, world = job.global_batch_size, job.seq_length, job.world_size
    if not gbs or not seq or not world:
        return None
    return float(gbs) * float(seq) / float(world)


def step_parts(breakdown: pd.DataFrame) -> dict[str, float]:
    """Each part of the step (:data:`PART_COLUMNS`) in ms: per step the row of the rank
    that sets it (the longest wall), then the median over the steps. Computing + exposed
    communication + free + bubble is that rank's device span; the wait comes before it.
    NaN for a part the profile does not give."""
    known = breakdown.dropna(subset=["step_us"]) if "step_us" in breakdown else breakdown
    if known.empty:
        return {name: math.nan for name, _ in PART_COLUMNS}
    rows = known.assign(_w=step_wall_us(known))
    rows = rows.loc[rows.groupby("step", dropna=False)["_w"].idxmax()]
    out = {}
    for name, column in PART_COLUMNS:
        if column == "exposed":
            values = exposed_comm_us(rows) if "comm_not_overlapped_us" in rows else None
        else:
            values = rows[column] if column in rows else None
        out[name] = median(values) / 1e3 if values is not None else math.nan
    return out


def job_changes(job_a: Any, job_b: Any, profile_a: Any, profile_b: Any) -> pd.DataFrame:
    """The job's settings and the profiles' source facts that differ (``field``, ``a``,
    ``b`` as text, None where unknown): layout, batch, recompute, model, hardware, dtype
    (:data:`perfkit.job.JOB_FIELDS` without the measured ones), then format, framework,
    device, profiler level and any version the profiles record."""
    rows = []
    for name in JOB_FIELDS:
        if name in _MEASURED or job_a is None or job_b is None:
            continue
        va, vb = _text(job_a.value(name)), _text(job_b.value(name))
        if va != vb:
            rows.append({"field": name, "a": va, "b": vb})
    ma, mb = profile_a.meta, profile_b.meta
    facts = ["source_format", "framework", "device_type", "profiler_level"]
    for name in facts:
        va, vb = _text(getattr(ma, name, None)), _text(getattr(mb, name, None))
        if va != vb:
            rows.append({"field": name, "a": va, "b": vb})
    ea, eb = getattr(ma, "extra", {}) or {}, getattr(mb, "extra", {}) or {}
    for name in sorted(k for k in {*ea, *eb} if "version" in str(k).lower()):
        va, vb = _text(ea.get(name)), _text(eb.get(name))
        if va != vb:
            rows.append({"field": name, "a": va, "b": vb})
    return pd.DataFrame(rows, columns=["field", "a", "b"])


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "name") and not isinstance(value, str):  # a Hardware, a ModelSpec
        return str(value.name)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def compare(a: Any, b: Any, *, journal: Any = None, gate_pct: float | None = None,
            threshold_pct: float | None = None) -> Comparison:
    """Did the change help? Compare run ``b`` against run ``a``.

    Parameters
    ----------
    a, b : Profile, Cluster, str, path or int
        The base run and the new one: profiles, paths (any format :func:`perfkit.load`
        reads, the two may differ: an Ascend profile against a GPU trace), ``"sample:NAME"``,
        or run ids / labels of ``journal``.
    journal : Journal, str or path, optional
        Tuning journal for run ids and labels.
    gate_pct : float, optional
        A CI gate: ``result.gate_failed`` is True when B is slower than A by more than
        ``gate_pct`` % and more than the noise.
    threshold_pct : float, optional
        Smallest change called: the "no change" band is the larger of it and the noise
        (the threshold alone where a run has fewer than 2 steps); default
        :data:`perfkit.compare.verdict.DEFAULT_THRESHOLD_PCT` (2 %).

    Returns
    -------
    Comparison
        Both sides' step time and spread, the verdict (:func:`~.verdict.step_verdict`:
        medians of the per-step times, a MAD-based 95 % noise band), the difference by step
        part, by kernel kind (:func:`perfkit.analysis.compare_profiles`) and by operator
        (:func:`~.matching.match_operators`), and the job's changes. Where the runs do
        different work per step (tokens per step per device), B's times in every table are
        scaled to A's work and the verdict is per token per device.
    """
    if gate_pct is not None and not (isinstance(gate_pct, (int, float))
                                     and math.isfinite(gate_pct) and gate_pct >= 0):
        raise InvalidArgumentError("gate_pct", "must be a percentage >= 0", gate_pct)
    pa, path_a, label_a = open_side(a, journal)
    pb, path_b, label_b = open_side(b, journal)
    if label_a == label_b:
        label_a, label_b = f"A: {label_a}", f"B: {label_b}"
    side_a, bd_a, job_a, notes_a = side_summary(pa, path_a, label_a)
    side_b, bd_b, job_b, notes_b = side_summary(pb, path_b, label_b)
    notes = [*notes_a, *notes_b]
    changes = job_changes(job_a, job_b, pa, pb)
    unrelated = not_one_job(changes, job_a, job_b)
    scale = 1.0
    wa, wb = side_a.tokens_per_device, side_b.tokens_per_device
    if unrelated and wa and wb and not math.isclose(wa, wb, rel_tol=1e-9):
        # a token of one model is not a token of the other: no work to scale to
        notes.append(f"the runs do different work per step ({wa:,.0f} and {wb:,.0f} tokens "
                     "per device) of two jobs, whose tokens are not the same work: the step "
                     "times are compared as they are, not scaled")
    elif wa and wb and not math.isclose(wa, wb, rel_tol=1e-9):
        scale = wa / wb
        notes.append(f"the runs do different work per step ({wa:,.0f} and {wb:,.0f} tokens "
                     f"per device): B's times in every table are scaled by {scale:.4g} to "
                     "A's work, and the verdict is per token per device")
    elif not (wa and wb):
        notes.append("the work per step (global batch × sequence / devices) is not known "
                     "for both runs: the step times are compared as they are")
    verdict = step_verdict(side_a.step_times_ms, side_b.step_times_ms, scale, threshold_pct)
    parts_a, parts_b = step_parts(bd_a), step_parts(bd_b)
    parts = pd.DataFrame([{"part": name, "a_ms": parts_a[name], "b_ms": parts_b[name] * scale}
                          for name, _ in PART_COLUMNS])
    parts["delta_ms"] = parts["b_ms"] - parts["a_ms"]
    kinds = _kinds(pa, pb, scale)
    operators = match_operators(pa, pb, scale)
    if side_a.format != side_b.format and not operators.empty \
            and not operators["matched"].any():
        notes.append("no operator matches by name across the two formats: compare the "
                      "kernel kinds")
    if side_a.steps < 2 or side_b.steps < 2:
        notes.append("a run has a single step: its step-to-step noise cannot be measured")
    if unrelated:
        notes.insert(0, unrelated)
    return Comparison(a=side_a, b=side_b, verdict=verdict, parts=parts, kinds=kinds,
                      operators=operators, job_changes=changes,
                      gate_pct=None if gate_pct is None else float(gate_pct), notes=notes)


#: What makes two runs one job's: the model's shape (a preset name alone may be missing).
_MODEL_FIELDS = ("name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                 "ffn_hidden_size", "vocab_size", "num_experts")


def not_one_job(changes: pd.DataFrame, job_a: Any, job_b: Any) -> str:
    """A warning (empty when none applies) that the two runs are not one job before and
    after a change, so that the verdict compares two unrelated step times: the model is
    known on both sides and differs, or a field of its shape read on both sides (a model
    read in part) differs, or the device differs (``hardware``,
    ``device_type``) while the model of a side is unknown (nothing then says it is the
    same workload). A ``hardware`` a side's profile does not name (its preset assumed,
    source ``"default"``) is not taken for a difference."""
    def known(x: Any) -> bool:
        return x is not None and not (isinstance(x, float) and math.isnan(x))

    differ = {f: (a if known(a) else "?", b if known(b) else "?")
              for f, a, b in zip(changes["field"], changes["a"], changes["b"], strict=True)
              # a preset name known on one side only is no difference: the shape says
              if f != "name" or (known(a) and known(b))}
    model_known = all(j is not None and getattr(j, "model", None) is not None
                      for j in (job_a, job_b))
    said = [f"{f} {a} → {b}" for f, (a, b) in differ.items() if f in _MODEL_FIELDS]
    # a shape read on both sides that differs is another model, read in full or not (a
    # TimeSformer's hidden 768 against a Qwen's 1024 passed the gate: a walk)
    shape = [f"{f} {a} → {b}" for f, (a, b) in differ.items()
             if f in _MODEL_FIELDS and f != "name" and "?" not in (a, b)]
    # a device a side's profile does not name (a preset assumed) is no evidence either way
    assumed = any(j is not None and getattr(j, "hardware", None) is not None
                  and j.source("hardware") == "default" for j in (job_a, job_b))
    device = [f"{f} {a} → {b}" for f, (a, b) in differ.items()
              if f == "device_type" or (f == "hardware" and not assumed)]
    if model_known and said:
        why = f"the model differs ({', '.join(said)})"
    elif shape:
        why = f"the model differs ({', '.join(shape)}; read in part on a side)"
    elif device and not model_known:
        why = (f"the device differs ({', '.join(device)}) and the model of "
               f"{'both runs' if job_a is None or job_b is None else 'a run'} is not known")
    else:
        return ""
    return (f"{NOT_ONE_JOB} {why}: the verdict compares two step times, not a change to "
            "one job (a gate on it says nothing about the change)")


def _kinds(pa: Any, pb: Any, scale: float) -> pd.DataFrame:
    """Device time per step by kernel kind (:func:`perfkit.analysis.compare.kernel_class`),
    largest change first."""
    diff = compare_profiles(pa, pb, by="category")
    out = pd.DataFrame({"kind": diff["key"].astype(str).to_numpy(),
                        "a_ms": diff["base_us"].to_numpy(dtype="float64") / 1e3,
                        "b_ms": diff["new_us"].to_numpy(dtype="float64") * scale / 1e3})
    out["delta_ms"] = out["b_ms"] - out["a_ms"]
    order = np.argsort(-out["delta_ms"].abs().to_numpy(), kind="mergesort")
    out = out.iloc[order].reset_index(drop=True)
    out.attrs["notes"] = list(diff.attrs.get("notes", []))
    return out
