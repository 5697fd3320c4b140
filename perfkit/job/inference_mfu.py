"""The MFU of an inference step: one figure for the Overview, the job's table, ``perfkit info``
and the journal.

A profile without a backward pass (:meth:`perfkit.Job.training_step` False) is an
inference or evaluation step: its model FLOPs are one forward pass over the tokens it takes
(:func:`perfkit.calc.inference.inference_forward_flops`: exact GEMMs, a MoE's routed
experts only, logits for the rows the output layer computes, the attention core where the
sequence length is known), not a training step's ``3 × forward``. MFU divides them by
the step time, the devices that run those tokens (one model replica: ``tp × pp``) and
the peak of the run's matrix type (:mod:`perfkit.specs.hardware_presets`).
"""

from __future__ import annotations

from typing import Any

from ..calc.inference import STEP_FIELDS, inference_mfu, step_forward_flops
from ..errors import PerfkitError
from ..format import counted, listed, number_text, plural, share_text, time_text
from ..guards import check_utilization
from .fields import field_label
from .inference import LOGITS_ROWS, STEP_TOKENS
from .unknowns import PANEL_TITLE

__all__ = ["inference_mfu_figure", "inference_mfu_parts", "INFERENCE_HFU_NOTE"]

#: Why an inference step's HFU is its MFU (the job's figures and ``perfkit info`` say it).
INFERENCE_HFU_NOTE = ("an inference step runs no backward pass and recomputes nothing, so its "
                      "hardware FLOPs are its forward pass's model FLOPs: HFU equals MFU")

_LABELS = {"attention_width": "the query width", "kv_width": "the key/value width",
           "num_experts": "the expert count", "moe_top_k": "the experts per token"}


def _label(name: str) -> str:
    return _LABELS.get(name, "the " + field_label(name))


def inference_mfu_parts(job: Any) -> tuple[str, str, str | None]:
    """The MFU of ``job``'s inference step as (text, how it was counted, warning), or
    ("–", why not, None): :func:`inference_mfu_figure` without the value."""
    return inference_mfu_figure(job)[1:]


def inference_mfu_figure(job: Any, step_time_s: float | None = None, hardware: Any = None,
                         parallel: Any = None, dtype: str | None = None
                         ) -> tuple[float | None, str, str, str | None]:
    """The MFU of ``job``'s inference step as (value, text, how it was counted, warning),
    or (None, "–", why not, None). The Overview's card, the job's figures
    (:func:`perfkit.widgets.summary.job_summary`), ``perfkit info`` and the journal's
    :func:`perfkit.journal.run_metrics` show this one value.

    ``MFU = F / (step time × tp × pp × peak)`` with ``F`` the forward pass's model FLOPs
    (:func:`perfkit.calc.inference.inference_forward_flops`, with the attention core where
    the job's sequence length splits the tokens into whole sequences); the warning is the
    guard's (:func:`perfkit.guards.check_utilization`) when MFU is above 100 %.
    ``step_time_s``, ``hardware``, ``parallel`` and ``dtype`` replace the job's own (a
    slider's step time, a layout tried in a widget); by default the job's.
    """
    model = job.partial_model()
    hw = job.hardware if hardware is None else hardware
    step = job.step_time_s if step_time_s is None else step_time_s
    layout = job.parallel if parallel is None else parallel
    lacks = [_label(n) for n in STEP_FIELDS if model.get(n) is None]
    tokens = job.observed.get(STEP_TOKENS, (None, ""))[0]
    if not tokens:
        lacks.append("the tokens per step")
    if hw is None:
        lacks.append("the hardware")
    if not step:
        lacks.append("the step time")
    if lacks:
        return None, "–", (f"not computed for this inference step: {listed(lacks)} "
                           f"{plural(len(lacks), 'is', 'are')} not known (see "
                           f"“{PANEL_TITLE}”)"), None
    rows = job.observed.get(LOGITS_ROWS, (None, ""))[0]
    dtype = dtype or job.dtype or hw.default_dtype
    devices = layout.tp * layout.pp
    seq = job.seq_length
    try:
        flops, sequences = step_forward_flops(model, int(tokens), int(rows or 0), seq)
        peak = hw.peak(dtype)
        value = inference_mfu(flops, step, devices, peak)
    except PerfkitError as exc:
        return None, "–", f"not computed for this inference step: {exc}", None
    e, k = model["num_experts"], model["moe_top_k"]
    experts = f", {k} of the {e} experts per token" if e > 1 else ""
    logits = (f"logits for {counted(int(rows), 'row')}" if rows else
              "no logits (no output layer over the vocabulary in the step)")
    core = (f"the attention scores of {counted(sequences, 'sequence')} of "
            f"{counted(seq, 'token')} (full {seq} × {seq} scores) are counted" if sequences else
            "the attention scores are not counted (the trace does not record the "
            "sequences' context lengths)")
    note = (f"forward-only model FLOPs of an inference step (no backward pass): "
            f"{counted(int(tokens), 'token')} through {counted(model['num_layers'], 'layer')}"
            f" of exact GEMMs{experts}, and {logits}, make {number_text(flops / 1e12)} TFLOP;"
            f" {core}. MFU divides that by {time_text(step * 1e6)}"
            f" × {counted(devices, 'device')} (tp × pp) × the {dtype} peak "
            f"{peak / 1e12:,.0f} TFLOP/s")
    guard = check_utilization(value, "MFU")
    warning = guard.warning if guard.warning else None
    return value, share_text(value, 2), note, warning
