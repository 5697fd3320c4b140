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

from ..calc.inference import (
    STEP_FIELDS,
    attention_core_bound,
    inference_mfu,
    step_forward_flops,
)
from ..errors import PerfkitError
from ..format import counted, listed, number_text, plural, share_text, time_text
from ..guards import check_utilization
from .fields import field_label
from .inference import LOGITS_ROWS, PACKED_TOKENS, STEP_TOKENS
from .unknowns import PANEL_TITLE

__all__ = ["inference_mfu_figure", "inference_mfu_parts", "inference_step_flops",
           "packed_step", "INFERENCE_HFU_NOTE"]

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


def packed_step(job: Any) -> bool:
    """Whether ``job``'s sequence length is its packed step's tokens
    (:data:`perfkit.job.inference.PACKED_TOKENS`), not a length a config or the user gave:
    the trace then shows no sequences, and the attention core is not counted."""
    return bool(job.observed.get(PACKED_TOKENS, (False, ""))[0]) and \
        job.source("seq_length") not in ("user", "config")


def inference_step_flops(job: Any) -> float | None:
    """``F`` of :func:`inference_mfu_figure`: the forward-pass model FLOPs of ``job``'s
    inference step (:func:`perfkit.calc.inference.step_forward_flops` over the tokens the
    trace shows, the attention core where the sequences are known), or None where a field
    it needs is not known."""
    model = job.partial_model()
    tokens = job.observed.get(STEP_TOKENS, (None, ""))[0]
    if not tokens or any(model.get(n) is None for n in STEP_FIELDS):
        return None
    rows = job.observed.get(LOGITS_ROWS, (None, ""))[0]
    try:
        return step_forward_flops(model, int(tokens), int(rows or 0),
                                  None if packed_step(job) else job.seq_length)[0]
    except PerfkitError:
        return None


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

    A trace that packs its tokens (:data:`perfkit.job.inference.PACKED_TOKENS`: vLLM)
    shows no sequences: its sequence length is the step's tokens, not a sequence's, so the
    attention core is not counted unless a config or the user gives the sequence length.
    Where the core is not counted the note says the most it could add with no key cached
    before the step (:func:`perfkit.calc.inference.attention_core_bound`,
    ``L · 4·T²·q``) and the MFU that would give.
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
    packed = packed_step(job)
    seq = None if packed else job.seq_length
    try:
        flops, sequences = step_forward_flops(model, int(tokens), int(rows or 0), seq)
        peak = hw.peak(dtype)
        value = inference_mfu(flops, step, devices, peak)
        bound = None if sequences else attention_core_bound(
            model["num_layers"], model["attention_width"], int(tokens))
    except PerfkitError as exc:
        return None, "–", f"not computed for this inference step: {exc}", None
    e, k = model["num_experts"], model["moe_top_k"]
    experts = f", {k} of the {e} experts per token" if e > 1 else ""
    logits = (f"logits for {counted(int(rows), 'row')}" if rows else
              "no logits (no output layer over the vocabulary in the step)")
    core = (f"the attention scores of {counted(sequences, 'sequence')} of "
            f"{counted(seq, 'token')} (full {seq} × {seq} scores) are counted" if sequences
            else _core_left_out(int(tokens), model["num_layers"], bound or 0.0, flops, value,
                                packed))
    note = (f"forward-only model FLOPs of an inference step (no backward pass): "
            f"{counted(int(tokens), 'token')} through {counted(model['num_layers'], 'layer')}"
            f" of exact GEMMs{experts}, and {logits}, make {number_text(flops / 1e12)} TFLOP;"
            f" {core}. MFU divides the {number_text(flops / 1e12)} TFLOP by "
            f"{time_text(step * 1e6)}"
            f" × {counted(devices, 'device')} (tp × pp) × the {dtype} peak "
            f"{peak / 1e12:,.0f} TFLOP/s")
    guard = check_utilization(value, "MFU")
    warning = guard.warning if guard.warning else None
    return value, share_text(value, 2), note, warning


def _core_left_out(tokens: int, layers: int, bound: float, flops: float, value: float,
                   packed: bool) -> str:
    """Why the attention scores are not counted, and the most they could add
    (:func:`perfkit.calc.inference.attention_core_bound`) with the MFU that gives."""
    why = (f"how the {counted(tokens, 'token')} split into sequences" if packed else
           "the sequences' lengths")
    return (f"the attention scores are not counted: the trace does not record {why} nor "
            f"the keys cached before the step. With no key cached they add at most "
            f"{number_text(bound / 1e12)} TFLOP (the {counted(tokens, 'token')} as one "
            f"sequence, full {tokens} × {tokens} scores in all {counted(layers, 'layer')}), "
            f"{share_text(bound / flops, 1)} of the FLOPs counted: MFU at most "
            f"{share_text(value * (flops + bound) / flops, 2)}")

