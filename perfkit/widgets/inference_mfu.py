"""The job's table of figures for an inference step (:func:`inference_summary_rows`).

The figure itself, an inference step's forward-only MFU, is computed in
:mod:`perfkit.job.inference_mfu` (:func:`inference_mfu_figure`, kept importable from here).
"""

from __future__ import annotations

from typing import Any

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
    training step, say so; the throughput no longer says MFU uses it. Where the trace packs
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
        elif row["key"] in ("predicted_step_s", "predicted_mfu"):
            row["note"] = _TRAINING_ONLY + str(row["note"])
        elif row["key"] == "global_batch_size" and packed:
            row["note"] = f"{row['note']}: one batch row of {_PACKED}"
        elif row["key"] == "samples_per_s" and packed:
            row["note"] = f"batch rows per second, one a step: {_PACKED}"
        out.append(row)
    return out
