"""The Planner's and the Recompute tab's sentences: what the step model was calibrated
on and with which gradients, which static-memory scheme it counts, the profiled layout
measured against predicted, and a layout's recompute and changes in words.

Pure functions of a calibration, a fit (``fit``: a
:class:`perfkit.widgets.prediction.PlannerFit`, not imported here, as that module imports
this one) and a job; :mod:`perfkit.widgets.prediction` re-exports them beside the figures
they describe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..calc.memory import STATIC_SCHEME_NAMES, scheme_gradient_bytes
from ..errors import InvalidArgumentError, PerfkitError
from ..format import band_range_text, counted, listed, signed_share_text, time_text
from ..job import Job
from ..plan import Calibration
from ..plan.calibrate import NOT_CLOSED_NOTE
from ..specs import ParallelConfig
from ..specs.recompute_ops import recompute_ops_text

__all__ = ["gradient_sentence", "scheme_sentence", "comparison_sentence", "recompute_text",
           "layout_changes", "change_words", "stages_text", "why_not", "sentence_end",
           "planned_job_sentence"]


def gradient_sentence(cal: Calibration) -> str:
    """Which gradient element size the calibration's data-parallel reduction moves, and
    why, as a sentence (with a leading space), or ``""`` for a job without data
    parallelism.

    The profile's own reductions when it records their data type and every reduction is
    the gradients' (the calibration's ``gradient_bytes`` term,
    :func:`perfkit.analysis.reduced_dtype.reduced_gradient_bytes`; where it differs from
    the scheme's size the sentence says so, and that static memory keeps the gradients
    the reduction moves, :func:`perfkit.calc.precision.parameter_bytes`), else the job's
    scheme
    (:func:`perfkit.calc.memory.scheme_gradient_bytes`), with why the profile was not
    read: it records no data type, or tensor, context or expert parallelism all-reduce
    activations beside the gradients.
    """
    par = cal.job.parallel
    if par.dp <= 1:
        return ""
    scheme = cal.job.static_scheme
    name = STATIC_SCHEME_NAMES.get(scheme, scheme)
    guess = scheme_gradient_bytes(scheme, cal.job.run_dtype)  # its tensors, not its peak
    read = next(((value, how) for term, value, how in cal.terms if term == "gradient_bytes"),
                None)
    if read is not None:
        text = (f" Gradients are reduced at {read[0]:g} bytes per element, as the profile "
                f"records it: {read[1]}")
        if read[0] != guess:
            text += (f"; the {name} alone would reduce {guess:g}-byte gradients (the "
                     "data-parallel traffic and the gradient buffer static memory keeps "
                     "follow the profile)")
        return text + "."
    if cal.rates.gradient_bytes is not None:
        return (f" Gradients are reduced at {cal.rates.gradient_bytes:g} bytes per element, "
                "as the calibration was given.")
    why = ("with tensor, context or expert parallelism its all-reduces carry activations "
           "too, so the profile's reductions are not read as the gradients'"
           if par.tp > 1 or par.cp > 1 or par.ep > 1 else
           "the profile does not record the data type of its reductions")
    return f" Gradients are reduced at {guess:g} bytes per element, the {name}'s default: {why}."


def why_not(exc: PerfkitError) -> str:
    """Why the profile could not be calibrated, for a sentence: the rule broken, without
    the name of ``calibrate``'s own argument (``source: its steps table ...``)."""
    if isinstance(exc, InvalidArgumentError) and exc.parameter == "source":
        return exc.rule
    return str(exc)


def sentence_end(text: str) -> str:
    """``text`` ending in one full stop (none added to an empty text)."""
    text = text.strip()
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def scheme_sentence(fit: Any, job: Job) -> str:
    """Which static-memory scheme the fit's memory figures use, and why, in one sentence:
    the calibration's (:func:`fit_job` gives it the job's), else the job's."""
    scheme = fit.calibration.job.static_scheme if fit.calibration is not None \
        else job.static_scheme
    why = job.static_scheme_detail if scheme == job.static_scheme else "as asked"
    return (f"Static memory (weights, gradients, optimizer state) is counted with the "
            f"{STATIC_SCHEME_NAMES.get(scheme, scheme)}: {why}.")


def comparison_sentence(frame: pd.DataFrame, fit: Any, job: Job | None = None,
                        edits: Sequence[str] = ()) -> str:
    """One sentence: predicted step with its band against the measured one, in or out;
    with ``job``, whether its pp is a placeholder (a measured bubble shows pp > 1,
    :attr:`perfkit.Job.pp_unread`) and whether its profile is a training step at all (the
    model predicts one, :meth:`perfkit.Job.training_step`). With ``edits`` (what the user
    changed in the assumptions), the prediction is a what-if of the profiled run: the
    difference is what the change does, and nothing is said to be the run's fault.

    A profile that runs no backward pass (``training_step()`` False) measures a forward
    pass where the model predicts a training step (forward, backward, optimizer): the
    sentence then says the two do not compare, and gives no difference and no "inside" or
    "outside the band", which would compare them."""
    pred = fit.prediction
    text = (f"Predicted {time_text(pred.step_s * 1e6)} (band "
            f"{band_range_text(pred.low_s * 1e6, pred.high_s * 1e6)})")
    measured = frame.loc[frame["run"] == "measured", "step_s"]
    if measured.empty:
        return text + "; the profile shows no step time to compare with."
    step = float(measured.iloc[0])
    inside = pred.low_s <= step <= pred.high_s
    forward_only = job is not None and job.training_step() is False
    if forward_only:
        text += (" for a training step (forward, backward, optimizer), and a measured "
                 f"{time_text(step * 1e6)} (slowest rank, median step) of a profile that "
                 "is not a training step (it runs no backward pass): the two do not "
                 "compare, and neither do the layouts below with this run.")
    elif getattr(fit, "source", "") == "step time":  # scaled to it: no check of the model
        text += (f" against the measured {time_text(step * 1e6)} (slowest rank, median step) "
                 "it was scaled to: equal by construction, calibrated on that step time "
                 "alone, so no check of the model." + _parts_apart(frame, step))
    elif edits:  # a what-if: the gap is the change's, not the model's nor the run's
        text += (f" with your {listed(list(edits))}, against the measured "
                 f"{time_text(step * 1e6)} (slowest rank, median step): "
                 f"{signed_share_text(pred.step_s / step - 1)}, what your change does to "
                 "the profiled run by the calibrated model (a what-if, not a check of the "
                 "model).")
    elif NOT_CLOSED_NOTE in getattr(getattr(fit, "calibration", None), "notes", ()):
        # the peak stopped the closing: no band holds this run, whatever its width
        text += (f" against a measured {time_text(step * 1e6)} (slowest rank, median "
                 f"step): {signed_share_text(pred.step_s / step - 1)}, even at the device's "
                 "peak: the model does not reproduce this run, which computed less than the "
                 "model counts — the model, layout or device may not be the run's.")
    else:
        text += (f" against a measured {time_text(step * 1e6)} (slowest rank, median "
                 f"step): {signed_share_text(pred.step_s / step - 1)}, "
                 f"{'inside' if inside else 'outside'} the band.")
    waits = frame.loc[frame["run"] == "measured", "wait_s"] if "wait_s" in frame else None
    wait = float(waits.iloc[0]) if waits is not None and len(waits) else math.nan
    if wait > 0 and time_text((step + wait) * 1e6) != time_text(step * 1e6):
        # the job line and the Overview print the step with its wait: say why they differ
        text += (" Both figures are the device's span: the step time on the Overview also "
                 f"counts the {time_text(wait * 1e6)} the device waits before each step's "
                 "first task (data, launch), which no layout shortens.")
    if job is not None and job.pp_unread:
        text += (" The profiled layout's pp = 1 is a placeholder, not the run's: "
                 f"{job.pp_unread}; the prediction and the layouts below assume no pipeline "
                 "until pp is set in the job.")
    if forward_only:  # the first sentence says they do not compare: nothing to explain
        return text
    if not fit.calibrated:
        text += " Uncalibrated: calibrate to trust it."
    elif not inside and not edits:
        text += (" The run loses time the model does not explain (a slow rank or link, "
                 "stalls): see the Overview's findings before trusting the ranking below.")
    return text


#: A part of the step predicted this many times off its measure (either way), and apart
#: by more than :data:`PART_APART_SHARE` of the step, is named under the comparison.
PART_APART_RATIO = 2.0
PART_APART_SHARE = 0.10


def _parts_apart(frame: pd.DataFrame, step: float) -> str:
    """`` Its parts are not the run's: compute 427 ms predicted against 49.2 ms
    measured, …`` for the parts of ``frame`` (:func:`measured_against_predicted`) whose
    prediction is :data:`PART_APART_RATIO` times off the measure and apart by more than
    :data:`PART_APART_SHARE` of the step; ``""`` where none is, or the profile measures
    no parts."""
    runs = {run: dict(zip(rows["part"], rows["seconds"], strict=True))
            for run, rows in frame.groupby("run")}
    measured, predicted = runs.get("measured", {}), runs.get("predicted", {})
    apart = []
    for part, p in predicted.items():
        m = measured.get(part)
        if m is None or not (m == m) or abs(p - m) <= PART_APART_SHARE * step:
            continue
        if max(p, m) >= PART_APART_RATIO * min(p, m):
            apart.append(f"{part} {time_text(p * 1e6)} predicted against "
                         f"{time_text(m * 1e6)} measured")
    if not apart:
        return ""
    return (f" Its parts are not the run's: {'; '.join(apart)}: the model matches the "
            "step's total, not how this run spends it, so the layouts below rest on "
            "perfkit's defaults.")


_LABELS = {"dp": "dp", "tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "vpp": "vpp",
           "micro_batch_size": "micro-batch", "num_micro_batches": "micro-batches",
           "optimizer_shard": "optimizer shard"}


def recompute_text(parallel: ParallelConfig) -> str:
    """The recompute setting in words: ``"full"``, ``"selective + 2 full layers per
    stage"``, or per stage where the stages differ (``"selective + 1 full layer on stage
    0"``, ``"selective + 3 full layers on stage 0, 1 on stage 1"``: the stages with any);
    op-level selective recompute names its ops or preset (``"selective (torchtitan-op-sac)"``).
    """
    layers = parallel.recompute_layers
    if parallel.recompute == "selective" and parallel.recompute_ops is not None:
        ops = recompute_ops_text(parallel.recompute_ops)
        plain = recompute_text(parallel.replace(recompute_ops=None))
        return plain.replace("selective", f"selective ({ops})", 1)
    if parallel.recompute != "selective" or not layers or not any(np.atleast_1d(layers)):
        return str(parallel.recompute)
    if not isinstance(layers, tuple) or len(set(layers)) == 1:
        n = layers[0] if isinstance(layers, tuple) else layers
        return f"selective + {counted(n, 'full layer')} per stage"
    stages = [(stage, n) for stage, n in enumerate(layers) if n]
    first, rest = stages[0], stages[1:]
    words = [f"{counted(first[1], 'full layer')} on stage {first[0]}"]
    words += [f"{n} on stage {stage}" for stage, n in rest]
    return "selective + " + ", ".join(words)


def stages_text(stage_layers: Any) -> str:
    """``", stages of 10, 11, 10, 9 layers"`` for an uneven split (the search's
    ``stage_layers`` text, or a sequence of ints), ``""`` for none."""
    if stage_layers is None or (isinstance(stage_layers, float) and np.isnan(stage_layers)):
        return ""
    layers = (str(stage_layers).split(",") if isinstance(stage_layers, str)
              else [str(n) for n in stage_layers])
    layers = [n.strip() for n in layers if n.strip()]
    return f", stages of {', '.join(layers)} layers" if layers else ""


def change_words(change: str) -> str:
    """One of :attr:`perfkit.plan.Prediction.changes` (``"micro_batch_size 2 → 1"``)
    with the field named as the page names it (``"micro-batch 2 → 1"``) and Python's
    values in words (``"sequence parallel off → on"``, ``"… per stage none → 2"``)."""
    name, _, rest = change.partition(" ")
    labels = {**_LABELS, "sequence_parallel": "sequence parallel",
              "recompute_layers": "fully recomputed layers per stage",
              "zero_stage": "ZeRO stage", "expert_tp": "expert tp"}
    if name not in labels:
        return change
    values = rest.split(" → ")
    if len(values) == 2:
        rest = " → ".join(_VALUE_WORDS.get(v.strip(), v.strip()) for v in values)
    return f"{labels[name]} {rest}"


#: Python's values in a change, as the page says them.
_VALUE_WORDS = {"True": "on", "False": "off", "None": "none"}


def layout_changes(old: ParallelConfig, new: ParallelConfig) -> str:
    """What ``new`` changes from ``old``, in a short phrase (``"dp 16 → 8, pp 1 → 2"``);
    ``"the profiled layout"`` when nothing does."""
    out = [f"{label} {getattr(old, name)} → {getattr(new, name)}"
           for name, label in _LABELS.items() if getattr(old, name) != getattr(new, name)]
    if (old.expert_tp is not None or new.expert_tp is not None) and \
            (old.expert_tp or old.tp) != (new.expert_tp or new.tp):  # None follows tp
        out.append(f"expert tp {old.expert_tp or old.tp} → {new.expert_tp or new.tp}")
    if old.sequence_parallel != new.sequence_parallel:
        out.append(f"sequence parallel {'on' if new.sequence_parallel else 'off'}")
    if recompute_text(old) != recompute_text(new):
        out.append(f"recompute {recompute_text(old)} → {recompute_text(new)}")
    return ", ".join(out) if out else "the profiled layout"


def planned_job_sentence(model: Any, devices: int, global_batch_size: int,
                         profile_job: Job | None = None) -> str:
    """Which job a search plans, and whether it is the profiled one (notebook 02's
    section 4 plans its parameters' full model, where sections 1-3 looked at the
    profiled job: a reader must not take one ranking for the other).

    ``"Planned: llama2-13b (40 layers, hidden 5120, sequence 4,096) on 16 devices,
    1,024 sequences per step: not the profiled job (8 layers, 32 sequences per step), so
    its steps do not compare with the measured one."``
    """
    said = (f"Planned: {model.name or 'the model'} ({model.num_layers} layers, hidden "
            f"{model.hidden_size}, sequence {model.seq_length:,}) on "
            f"{counted(devices, 'device')}, {counted(global_batch_size, 'sequence')} per "
            "step")
    job_model = getattr(profile_job, "model", None)
    if profile_job is None or job_model is None:
        return said + "."
    same = (job_model.num_layers == model.num_layers
            and job_model.hidden_size == model.hidden_size
            and profile_job.global_batch_size == global_batch_size
            and profile_job.parallel.world_size == devices)
    if same:
        return said + ": the profiled job's model, devices and batch."
    return (said + f": not the profiled job ({job_model.num_layers} layers, "
            f"{counted(profile_job.global_batch_size or 0, 'sequence')} per step on "
            f"{counted(profile_job.parallel.world_size, 'device')}), so its steps do not "
            "compare with the measured one.")
