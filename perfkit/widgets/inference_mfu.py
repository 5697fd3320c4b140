"""The job's table of figures for an inference step (:func:`inference_summary_rows`).

The figure itself, an inference step's forward-only MFU, is computed in
:mod:`perfkit.job.inference_mfu` (:func:`inference_mfu_figure`, kept importable from here);
its memory, the forward-only theory the measured peak is held against, in
:mod:`perfkit.job.inference_memory`.
"""

from __future__ import annotations

from typing import Any

from ..errors import PerfkitError
from ..format import bytes_text
from ..guards import check_memory
from ..job.inference_memory import (
    INFERENCE_THEORY,
    inference_memory_of,
    inference_memory_words,
)
from ..job.inference_mfu import (
    INFERENCE_HFU_NOTE,
    inference_mfu_figure,
    inference_mfu_parts,
    packed_step,
)

__all__ = ["inference_mfu_figure", "inference_mfu_parts", "inference_summary_rows",
           "INFERENCE_HFU_NOTE"]


#: What the training-step figures of an inference step's table say they are.
_TRAINING_ONLY = ("a training step's figure (forward and backward), not an inference "
                  "figure: ")


#: The name of an inference step's memory row (its theory: forward only).
_MEMORY_METRIC = "memory (inference, forward only)"


#: What a packed step's batch row holds (:func:`perfkit.job.inference_mfu.packed_step`).
_PACKED = "the step's packed tokens (the trace does not split them into sequences)"


def inference_summary_rows(rows: list[dict[str, object]], job: Any,
                           step_time_s: float | None = None, hardware: Any = None,
                           parallel: Any = None, dtype: str | None = None
                           ) -> list[dict[str, object]]:
    """:func:`perfkit.widgets.summary.metrics_summary`'s rows for an inference step
    (:meth:`perfkit.Job.training_step` False): MFU is the forward pass's, the Overview's
    (:func:`inference_mfu_figure`: ``F / (step time × tp × pp × peak)``), HFU the same
    value (no backward pass, no recompute), and the uncalibrated estimates, which model a
    training step, say so; the throughput no longer says MFU uses it. The memory the
    measured peak is held against (``memory_gib``) is the forward-only theory
    (:func:`perfkit.job.inference_memory.inference_memory_of`: weights + KV cache + the
    step's largest transient), and the static and activation rows, a training step's,
    say so. Where the trace packs
    the step's tokens (:func:`perfkit.job.inference_mfu.packed_step`) the global batch and
    samples/s say that a batch row is the step's tokens, not a sequence. A figure the guard
    flags ends in "⚠ not plausible", as the table's other rows do. ``step_time_s``,
    ``hardware``, ``parallel`` and ``dtype``: the table's own (see
    :func:`inference_mfu_figure`)."""
    value, text, note, warning = inference_mfu_figure(job, step_time_s, hardware, parallel,
                                                      dtype)
    if warning:
        text = f"{text} ⚠ not plausible"
    v = float("nan") if value is None else value
    packed = packed_step(job)
    out = []
    for row in rows:
        row = dict(row)
        if row["key"] == "mfu":
            row.update(value=v, text=text, note=note, warning=warning)
        elif row["key"] == "hfu":
            row.update(value=v, text=text, warning=warning,
                       note=(INFERENCE_HFU_NOTE if value is not None else
                             "not computed for this inference step: see MFU"))
        elif row["key"] == "tokens_per_s_per_device":
            row["note"] = str(row["note"]).replace(": the figure MFU uses", "")
        elif row["key"] == "memory_gib":
            row = _memory_row(row, job, hardware, parallel, dtype)
        elif row["key"] in ("predicted_step_s", "predicted_mfu", "static_gib",
                            "activation_gib"):
            row["note"] = _TRAINING_ONLY + str(row["note"])
        elif row["key"] == "global_batch_size" and packed:
            row["note"] = f"{row['note']}: one batch row of {_PACKED}"
        elif row["key"] == "samples_per_s" and packed:
            row["note"] = f"batch rows per second, one a step: {_PACKED}"
        out.append(row)
    return out


def _memory_row(row: dict[str, object], job: Any, hardware: Any, parallel: Any,
                dtype: str | None) -> dict[str, object]:
    """The ``memory_gib`` row of an inference step: the forward-only theory, what it counts
    and the measured peak, guarded against it (:func:`perfkit.guards.check_memory` with
    ``forward_only``); where it cannot be computed, why."""
    layout = job.parallel if parallel is None else parallel
    try:
        memory = inference_memory_of(job, layout, dtype)
    except PerfkitError as exc:
        return dict(row, metric=_MEMORY_METRIC, value=float("nan"), text="–",
                    note=f"not computed: {exc}", warning=None)
    total = memory.total_bytes
    hw = job.hardware if hardware is None else hardware
    measured = job.peak_memory_bytes
    guard = check_memory(total, measured, job, what=f"the {INFERENCE_THEORY}",
                         forward_only=True)
    text = bytes_text(total) + ("" if guard.ok else " ⚠ not plausible")
    said = [inference_memory_words(job, memory, layout, dtype)]
    if hw is not None:
        verb = "fits in" if total <= hw.memory_bytes else "does not fit in"
        said.append(f"{verb} the {hw.name}'s {bytes_text(hw.memory_bytes)}")
    if measured:
        said.append(f"measured peak {bytes_text(measured)}")
    return dict(row, metric=_MEMORY_METRIC, value=total / 2**30, text=text,
                note="; ".join(said), warning=guard.warning)
