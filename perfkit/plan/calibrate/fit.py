"""The entry point: :func:`calibrate` on a profile, a steps table or a step time, and the
note a calibration carries when its fitted model is far off the measured step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...calc import ActivationModel
from ...calc.layout_rows import default_split, run_types
from ...calc.rates import GROUPS, Rates
from ...calc.timing import PART_NAMES
from ...errors import InvalidArgumentError, check_choice
from ...format import share_text, signed_share_text
from ...specs import Hardware, ModelSpec, ParallelConfig
from .fallback import _check_job, _from_step_time, _from_steps, _links_to_exposed
from .passes import _solve_pass_closing
from .profile import _from_profile
from .result import CalibratedJob, Calibration
from .solve import (
    _evaluate,
    _scaled_keeping_optimizer,
    _solve_computing_scale,
    _solve_scale,
    _solve_split_closing,
    attention_kept,
)

__all__ = ["BACKWARD_CLOSING", "CLOSINGS", "FORWARD_CLOSING", "MATRIX_CLOSING",
           "NOT_CLOSED_NOTE", "RESIDUAL_NOTE_SHARE", "VECTOR_CLOSING", "calibrate",
           "residual_note"]


#: A fitted model further than this share off the measured step gets a note.
RESIDUAL_NOTE_SHARE = 0.05
#: The note of a fit whose closing the peak capped (the compute rates cannot rise above 1).
NOT_CLOSED_NOTE = ("the fit could not be closed: the measured step is faster than the model "
                   "allows at its highest rates (every kernel's efficiency at most 1)")


def residual_note(residual: float) -> str:
    """The note a calibration carries when its fitted model, before closing, is more than
    :data:`RESIDUAL_NOTE_SHARE` off the measured step (``residual`` =
    :attr:`Calibration.residual`), or ``""`` when it is closer: a page that says the
    residual itself can leave this note out instead of saying it twice."""
    if not abs(residual) > RESIDUAL_NOTE_SHARE:
        return ""
    return (f"the fitted model is {signed_share_text(residual)} off the measured step "
            "before closing: the "
            "run does something the model does not (see the parts)")


#: How a profile's fit may be closed (:func:`calibrate`'s ``closing``).
CLOSINGS = ("one", "kernels")
#: The note of a fit asked to close by kernels whose profile's kernels do not split.
SPLIT_NOT_READ_NOTE = ("closed with one factor: the profile's kernels do not split into "
                       "matrix and memory-bound time")
#: The terms of a profile's two closing factors by kernel kind (:func:`_close_by_kernels`,
#: where the profile's passes cannot be told apart).
MATRIX_CLOSING = "closing scale, matrix kernels"
VECTOR_CLOSING = "closing scale, memory-bound kernels"
#: The terms of a profile's closing by kernel kind and pass (:func:`_close_by_passes`), with
#: :data:`MATRIX_CLOSING`: the forward's and the backward's memory-bound kernels.
FORWARD_CLOSING = "closing scale, forward memory-bound kernels"
BACKWARD_CLOSING = "closing scale, backward memory-bound kernels"
#: The note of a fit closed by kernels whose profile does not tell its passes apart.
PASSES_NOT_READ_NOTE = ("closed by kernel kind, not by pass: the profile does not tell its "
                        "forward's kernels from its backward's (no autograd thread)")
#: The note of a fit closed by kernels on a run that recomputes.
PASSES_RECOMPUTE_NOTE = ("closed by kernel kind, not by pass: the run recomputes, and a "
                         "recomputed forward launches its kernels from the backward")


def _matrix_term(before: Rates, rates: Rates, share: float, k: dict[str, Any]
                 ) -> tuple[str, float, str]:
    """The term of a closing's factor on the matrix kernels (:data:`MATRIX_CLOSING`): what
    it scaled, from ``before`` to ``rates``, and the time it gave them (``k``: the
    solver's factors and seconds)."""
    how = (f"GEMM efficiency {before.gemm_efficiency:.3g} → {rates.gemm_efficiency:.3g} "
           f"(fused attention with it), so that the model's matrix kernels take "
           f"{share_text(share)} of the measured computing time less the optimizer's "
           f"(the profile's matrix and attention kernels' share of its kernel time): "
           f"{k['matrix_s'] * 1e3:.2f} ms")
    if k["matrix_capped"]:
        how += (" — capped at the peak, above their measured share; the memory-bound "
                "kernels take the difference")
    return MATRIX_CLOSING, k["matrix"], how


def _close_by_kernels(job: CalibratedJob, rates: Rates, computing: float, share: float,
                      terms: list[tuple[str, float, str]], notes: list[str]) -> Rates:
    """Close a profile's fit on its computing time with two factors
    (:func:`~.solve._solve_split_closing`: the matrix kernels to their measured share, the
    memory-bound kernels to the rest), each said in ``terms`` with what it scaled: the
    ``"kernels"`` closing where the profile's passes cannot be told apart."""
    before = rates
    rates, k = _solve_split_closing(job, rates, computing, share)
    ms = 1e3
    terms.append(_matrix_term(before, rates, share, k))
    terms.append((VECTOR_CLOSING, k["vector"],
                  f"the memory-bound kernels' efficiency (elementwise_efficiency) "
                  f"{before.vector_efficiency:.3g} → {rates.vector_efficiency:.3g}, so that "
                  f"they take the rest of the measured computing time, "
                  f"{k['vector_s'] * ms:.2f} ms, and the model computes for as long as the "
                  f"device did; the GEMMs' byte term and the optimizer keep "
                  f"memory_efficiency"))
    if k["vector_capped"]:
        notes.append(NOT_CLOSED_NOTE)
    return rates


def _close_by_passes(job: CalibratedJob, rates: Rates, computing: float, share: float,
                     forward_share: float, terms: list[tuple[str, float, str]],
                     notes: list[str]) -> Rates:
    """Close a profile's fit on its computing time with three factors
    (:func:`~.passes._solve_pass_closing`: the matrix kernels to their measured share, the
    forward's and the backward's memory-bound kernels each to theirs of the rest), each
    said in ``terms`` with what it scaled."""
    before = rates
    rates, k = _solve_pass_closing(job, rates, computing, share, forward_share)
    ms = 1e3
    terms.append(_matrix_term(before, rates, share, k))
    rest = k["forward_s"] + k["backward_s"]
    terms.append((FORWARD_CLOSING, k["forward"],
                  f"the forward's memory-bound kernels' efficiency (elementwise_efficiency) "
                  f"{before.vector_efficiency:.3g} → {rates.vector_efficiency:.3g}, so that "
                  f"they take {share_text(forward_share)} of the rest of the measured computing "
                  f"time (the profile's forward share of its memory-bound kernel time, "
                  f"read from the launching threads): {k['forward_s'] * ms:.2f} ms of "
                  f"{rest * ms:.2f}; a recomputed forward runs at it"))
    terms.append((BACKWARD_CLOSING, k["backward"],
                  f"the backward's memory-bound kernels' efficiency "
                  f"(backward_elementwise_efficiency) {before.vector_efficiency:.3g} → "
                  f"{rates.backward_vector_efficiency:.3g}, so that they take the other "
                  f"{share_text(1 - forward_share)}, {k['backward_s'] * ms:.2f} ms, and the model "
                  f"computes for as long as the device did; the GEMMs' byte term and the "
                  f"optimizer keep memory_efficiency"))
    if k["vector_capped"]:
        notes.append(NOT_CLOSED_NOTE)
    return rates


# ----------------------------------------------------------------------------- entry point

def calibrate(source: Any, model: ModelSpec | None = None,
              parallel: ParallelConfig | None = None, hardware: Hardware | str | None = None,
              *, activation_model: ActivationModel | None = None, rates: Rates | None = None,
              static_scheme: str | None = None, dtype: str | None = None,
              skip_first_steps: int = 0, close: bool | None = None,
              stage_layers: Sequence[int] | None = None,
              selective_layers: Sequence[int] | None = None,
              comm_layers: Sequence[int] | None = None, closing: str = "one") -> Calibration:
    """Fit the step model's rates to a measured run (see the module docstring).

    Parameters
    ----------
    source : Profile, Cluster, DataFrame or float
        A loaded profile (the job is inferred; ``model``/``parallel``/``hardware`` win over
        what it shows), its canonical ``steps`` table, or a measured step time in seconds.
    model, parallel, hardware
        What ran. Required with a steps table or a step time.
    activation_model : ActivationModel, optional
        Fused attention, dropout, norm storage, selective kind (the profile's, as the job
        reads it, when not given: :attr:`perfkit.Job.activation_model`;
        ``ActivationModel()`` otherwise).
    rates : Rates, optional
        Starting rates and framework behaviour (recompute style, gradient-reduction
        buckets and bytes); default ``Rates()``, and for a profile the element-wise count
        its operators show (``Rates.elementwise_kernels``:
        :func:`perfkit.calc.elementwise.kernels_from_activations`; the calibration's
        notes say which). Pass rates to keep their count.
    static_scheme : str, optional
        Static-memory accounting for later predictions. Default: for a profile, the
        job's (:attr:`perfkit.Job.static_scheme`: ``"megatron"`` for PyTorch, on a GPU or
        an Ascend NPU, ``"mindspore"`` for MindSpore); ``"mindspore"`` for a steps table
        or a step time.
    dtype : str, optional
        The run's type (default, for a profile, its matrix dtype; else the hardware's
        default): its peak, or the hardware's default peak where it lists none for it
        (said in the notes); static memory and the gradients' default size keep the run's
        type either way (:attr:`CalibratedJob.run_dtype`).
    skip_first_steps : int
        Steps to drop from the start (warm-up, compilation).
    close : bool, optional
        Scale the compute rates at the end so the model reproduces the measurement: for a
        steps table or a step time, the measured step (one factor on every compute rate);
        for a profile, the busiest rank's measured computing time (``computing_us``:
        compute, recompute and the optimizer, whose measured time is kept), as ``closing``
        says (the module docstring), its idle time being fitted already
        (the steps' ``free_us`` per kernel of the model), since a profiled step's free time
        carries the profiler's own host stalls. Default: True for a steps table or a step
        time, False for a profile (its residual then measures the model).
    closing : {"one", "kernels"}
        How a profile's closed fit reaches its computing time: ``"one"`` (default) one
        factor on every compute rate but the optimizer's; ``"kernels"`` by kernel kind and
        pass, three factors: the matrix kernels to their share of the profile's kernel
        time, and the forward's and the backward's memory-bound kernels each to their
        pass's share of the profile's memory-bound kernel time (the module docstring says
        why and what each closing gets right on the measured H100 sets). A steps table or
        a step time is always closed with one factor; so is a profile whose kernels do not
        split; a profile whose passes cannot be told apart, or that recomputes, is closed
        by kernel kind alone, two factors (the matrix kernels to their share, the
        memory-bound kernels to the rest; each fallback said in the notes).
    stage_layers, selective_layers, comm_layers : sequence of int, optional
        Uneven layers per stage and per-stage selective / communication recompute of the
        calibrating run (see :func:`perfkit.plan.predict`).

    Returns
    -------
    Calibration
        Pass it to :func:`perfkit.plan.predict` or to :func:`perfkit.plan.search`
        (``calibration=``).
    """
    if isinstance(skip_first_steps, bool) or not isinstance(skip_first_steps, int) \
            or skip_first_steps < 0:
        raise InvalidArgumentError("skip_first_steps", "must be a whole number >= 0",
                                   skip_first_steps)
    check_choice("closing", closing, CLOSINGS)
    read_elementwise = rates is None  # a profile's operators then say how they ran
    rates = Rates() if rates is None else rates
    if not isinstance(rates, Rates):
        raise InvalidArgumentError("rates", "must be a perfkit.calc.Rates", type(rates).__name__)
    notes: list[str] = []
    job_kw = {"stage_layers": tuple(stage_layers) if stage_layers is not None else None,
              "selective_layers": tuple(selective_layers) if selective_layers is not None
              else None,
              "comm_layers": tuple(comm_layers) if comm_layers is not None else None}
    is_number = isinstance(source, (int, float, np.integer, np.floating)) \
        and not isinstance(source, bool)
    if is_number or isinstance(source, pd.DataFrame):
        model, parallel, hw = _check_job(model, parallel, hardware)
        split, split_said = default_split(model, parallel, job_kw["stage_layers"])
        if split_said:
            job_kw["stage_layers"] = tuple(split)
            notes.append(split_said)
        peak, tensor, said = run_types(dtype, hw)
        if said:
            notes.append(said)
        job = CalibratedJob(model, parallel, hw, parallel.global_batch_size,
                            model.seq_length, activation_model or ActivationModel(),
                            static_scheme or "mindspore", peak, tensor_dtype=tensor,
                            **job_kw)
        rates = rates.resolved(hw.name, job.dtype)
        if is_number:
            kind = "step time"
            rates, info = _from_step_time(float(source), job, rates, notes)
        else:
            kind = "steps"
            rates, info = _from_steps(source, job, rates, notes, skip_first_steps)
        close = True if close is None else close
    elif getattr(source, "meta", None) is not None and getattr(source, "steps", None) \
            is not None:
        kind = "profile"
        job, rates, info = _from_profile(source, model, parallel, hardware, activation_model,
                                         rates, static_scheme, dtype, notes,
                                         skip_first_steps, job_kw, read_elementwise)
        close = False if close is None else close
    else:
        raise InvalidArgumentError("source", "must be a Profile/Cluster, a steps table "
                                   "(DataFrame) or a measured step time in seconds",
                                   type(source).__name__)
    measured = float(info["measured"])
    residual = float(info["residual"])
    terms = list(info["terms"])
    parts_measured = info.get("steps_measured", {})
    computing = float(parts_measured.get("computing", math.nan))
    capped = False  # a closing the peak stopped short: the fit was not closed
    if close and kind == "profile" and computing > 0:
        # a profile's fit is closed part by part, as a steps table's is, not on the step:
        # the steps' free time carries the profiler's own host stalls (the H100 layout set:
        # 3.8 and 25.9 ms in two steps of one run, at the same 80.3 ms of computing), which
        # a closing on the step would fold into every kernel's speed. The computing time
        # first, then the exposed communication where no link was measured on its
        # transfers (those rates are the direct measurement); the idle time is fitted
        # already.
        share = float(info.get("matrix_share", math.nan))
        forward = float(info.get("forward_share", math.nan))
        if closing == "kernels" and 0 < share < 1:
            recomputes = _evaluate(job, rates)["recompute"] > 0
            if 0 < forward < 1 and not recomputes:
                rates = _close_by_passes(job, rates, computing, share, forward, terms,
                                         notes)
            else:
                notes.append(PASSES_RECOMPUTE_NOTE if 0 < forward < 1
                             else PASSES_NOT_READ_NOTE)
                rates = _close_by_kernels(job, rates, computing, share, terms, notes)
        else:
            if closing == "kernels":
                notes.append(SPLIT_NOT_READ_NOTE)
            factor, capped = _solve_computing_scale(job, rates, computing)
            if abs(factor - 1.0) > 1e-9:
                rates = _scaled_keeping_optimizer(rates, factor)
                terms.append(("closing scale", factor, "every compute rate but the "
                              "optimizer's, so the model's computing time reproduces the "
                              "measured one" + attention_kept(job, rates)))
            if capped:
                notes.append(NOT_CLOSED_NOTE)
        if not set(info["kinds"]) & set(GROUPS):  # links measured on transfers are kept
            rates, *_ = _links_to_exposed(job, rates, parts_measured, _evaluate(job, rates),
                                          notes, terms)
    elif close and abs(residual) > 1e-9:
        factor, capped = _solve_scale(job, rates, measured)
        rates = rates.scaled(factor)
        terms.append(("closing scale", factor, "every compute rate, so the model reproduces "
                      "the measured step" + attention_kept(job, rates)))
        if capped:
            notes.append(NOT_CLOSED_NOTE)
    final = _evaluate(job, rates)
    gap = residual_note(residual)
    if gap:
        notes.append(gap)
    return Calibration(rates, job, kind, measured, float(info["predicted"]), residual,
                       final["step_s"], bool(close) and not capped, frozenset(info["kinds"]),
                       tuple(terms), {p: final[p] for p in PART_NAMES}, tuple(notes))
