"""The measured metrics of a run (:func:`run_metrics`): step time, throughput, MFU / HFU
checked by :mod:`perfkit.guards`, the model FLOPs and peak memory, each with its text, unit
and the warning or note that qualifies it.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...calc import (
    hardware_flops,
    hfu,
    mfu,
    model_flops,
    tokens_per_second_per_device,
    tokens_per_second_per_p,
)
from ...errors import InvalidArgumentError
from ...format import bytes_text, sig, time_text
from ...guards import check_utilization
from ...job import Job
from ...job.inference_mfu import (
    INFERENCE_HFU_NOTE,
    inference_mfu_figure,
    inference_step_flops,
    packed_step,
)
from .fields import METRIC_COLUMNS

__all__ = ["run_metrics", "flops_text"]


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
      conventions as :func:`perfkit.widgets.summary.metrics_summary`; for an inference
      step (:meth:`perfkit.Job.training_step` False) MFU is the forward pass's, the
      Overview's (:func:`perfkit.job.inference_mfu.inference_mfu_figure`), and HFU
      the same value (no backward pass, nothing recomputed);
    * model FLOPs per step ``= model_flops(model, B·s)`` and recompute FLOPs per step
      ``= hardware_flops(model, B·s, recompute) − model_flops(model, B·s)``: theory for
      a training step of the job's model and recompute setting, not a measurement; for an
      inference step the forward pass its MFU counts
      (:func:`perfkit.job.inference_mfu.inference_step_flops`) and no recompute;
    * where the trace packs its tokens (vLLM, :func:`perfkit.job.inference_mfu.
      packed_step`) ``s`` is the step's tokens and ``B`` one batch row;
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
    packed = packed_step(job)  # the trace packs its tokens: no sequences shown
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
                            ("batch rows per step (one row of packed tokens)" if packed else
                             "sequences per step") + f" [{job.source('global_batch_size')}]"))
    else:
        rows.append(_missing("global_batch_size", "global batch", "sequences",
                             job.detail("global_batch_size")))
    if seq:
        rows.append(_metric("seq_length", "sequence length", seq, "tokens", f"{seq}",
                            ("the step's tokens, packed: the trace does not split them into "
                             "sequences" if packed else "tokens per sequence")
                            + f" [{job.source('seq_length')}]"))
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


def _inference_rows(job: Job) -> list[dict[str, Any]]:
    """MFU and HFU of an inference step (:meth:`perfkit.Job.training_step` False): the
    forward pass's MFU, the Overview's (:func:`perfkit.job.inference_mfu.
    inference_mfu_figure`), and HFU the same value (no backward pass, no recompute)."""
    value, text, note, warning = inference_mfu_figure(job)
    if value is None:
        return [_metric(k, label, None, "fraction", "–", note)
                for k, label in (("mfu", "MFU"), ("hfu", "HFU"))]
    kept = value if warning is None else None  # a flagged figure is never a plain number
    text = text if warning is None else f"{text} ⚠ not plausible"
    return [_metric("mfu", "MFU", kept, "fraction", text, note, warning),
            _metric("hfu", "HFU", kept, "fraction", text, INFERENCE_HFU_NOTE, warning)]


def _utilisation_rows(job: Job, tps_device: float | None) -> list[dict[str, Any]]:
    if job.training_step() is False:
        return _inference_rows(job)
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


def _inference_flops_rows(job: Job, keys: dict[str, str]) -> list[dict[str, Any]]:
    """The model FLOPs of an inference step (:meth:`perfkit.Job.training_step` False): its
    forward pass, as its MFU counts it (:func:`perfkit.job.inference_mfu.
    inference_step_flops`), and no recompute (no backward pass)."""
    flops = inference_step_flops(job)
    if flops is None:
        why = inference_mfu_figure(job)[2].replace("not computed for this inference step: ",
                                                  "")
        return [_missing(k, v, "FLOP", why) for k, v in keys.items()]
    return [
        _metric("model_flops_per_step", keys["model_flops_per_step"], flops, "FLOP",
                flops_text(flops), "one forward pass of this inference step (no backward "
                                   "pass), the FLOPs its MFU counts"),
        _metric("recompute_flops_per_step", keys["recompute_flops_per_step"], 0.0, "FLOP",
                flops_text(0.0), "none: " + INFERENCE_HFU_NOTE),
    ]


def _flops_rows(job: Job, gbs: int | None, seq: int | None) -> list[dict[str, Any]]:
    keys = {"model_flops_per_step": "model FLOPs per step (theory)",
            "recompute_flops_per_step": "recompute FLOPs per step (theory)"}
    if job.training_step() is False:
        return _inference_flops_rows(job, keys)
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
                flops_text(base), f"a training step's: model_flops(model, B·s = {tokens}), "
                                  "forward and backward, non-causal"),
        _metric("recompute_flops_per_step", keys["recompute_flops_per_step"], extra, "FLOP",
                flops_text(extra),
                f"a training step's: hardware_flops − model_flops: recompute {p.recompute}, "
                f"full layers per "
                f"stage {list(full)}{_selective_clause(job, ', ')}"),
    ]


def _selective_clause(job: Job, sep: str) -> str:
    """How a selectively recomputed layer was counted, after ``sep``; nothing without
    selective recompute."""
    if job.parallel.recompute != "selective":
        return ""
    return sep + job.activation_model.selective_flops_note
