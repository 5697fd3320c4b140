"""The search's step model: :func:`perfkit.calc.timing.step_times` over every candidate at
once, with the band of :func:`perfkit.plan.predict`.

It is the model :func:`perfkit.plan.predict` runs for one layout (the one checked against
published measurements: :mod:`perfkit.plan.published`), at a calibration's fitted rates or
at given ones (``Rates()``: perfkit's default rates, what an uncalibrated prediction
uses, and :func:`perfkit.plan.search`'s default), so each row's step time, parts, band and
memory are what ``predict`` gives for the same layout with the same rates, type and
conventions (tests/plan/test_search_step_model.py,
tests/test_planner_ranking_prediction.py). Per-layer kernel times are computed once per
distinct (micro-batch, tp, SP, cp, ep, expert_tp) inside ``step_times``; the rest is numpy
over all candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..calc import ActivationModel, flops_per_token
from ..calc.layout_rows import run_types
from ..calc.rates import Rates
from ..calc.timing import PART_NAMES, step_times
from ..specs import Hardware, ModelSpec
from .predict import (
    DEFAULT_SIGMA,
    MEASURED_SIGMA,
    MODEL_UNCERTAINTY,
    PART_RATES,
    band_residual,
)
from .search_parts import activation_bytes, max_stage_params, ranked, static_bytes
from .search_uneven import (
    search_stages,
    uneven_activation_bytes,
    uneven_layers,
    uneven_params,
)

__all__ = ["evaluate_step_model", "search_types"]


def search_types(calibration: Any, dtype: str | None,
                 hardware: Hardware) -> tuple[str | None, str | None]:
    """The peak's type and the tensors' type of the searched run, as
    :func:`perfkit.plan.predict` resolves them: ``dtype`` through
    :func:`~perfkit.plan.run_types` (its peak, or the hardware's default peak where it
    lists none, the tensors keeping ``dtype``'s size), else the calibrating run's
    (:attr:`perfkit.plan.CalibratedJob.dtype` and ``tensor_dtype``), else ``(None, None)``
    (the hardware's default)."""
    if dtype is not None:
        peak_dtype, tensor_dtype, _said = run_types(dtype, hardware)
        return peak_dtype, tensor_dtype
    job = getattr(calibration, "job", None)
    return getattr(job, "dtype", None), getattr(job, "tensor_dtype", None)


def evaluate_step_model(model: ModelSpec, hw: Hardware, c: dict[str, np.ndarray],
                        rates: Rates, calibration: Any, dtype: str | None, scheme: str,
                        limit: float, activation_model: ActivationModel | None,
                        convention: str, causal: bool, include_rejected: bool,
                        recompute_ops: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Every candidate through the step model at ``rates``, ranked, with the band of
    :func:`perfkit.plan.predict`.

    Parameters
    ----------
    model, hw : ModelSpec, Hardware
    c : dict of arrays
        :func:`~perfkit.plan.candidates.candidate_columns`.
    rates : Rates
        The calibration's, or given (uncalibrated).
    calibration : Calibration or None
        Its residual (:func:`perfkit.plan.predict.band_residual`) and measured rates
        widen the band, as in ``predict``; its run's
        types stand in for ``dtype`` when that is None (:func:`search_types`).
    dtype, scheme, limit, activation_model, convention, causal, include_rejected
        :func:`perfkit.plan.search`'s.

    Returns
    -------
    DataFrame
        The layout columns, the parts (``compute_s`` … ``overhead_s``; each ``*_comm_s``
        the group's exposed time), ``step_s``, the band ``low_s = step · max(0, 1 − u)``
        and ``high_s = step · (1 + u)`` with ``u = √(r² + MODEL_UNCERTAINTY² +
        Σ (σ_part · part / step)²)`` (:func:`perfkit.plan.predict`'s), tokens per second
        per device, MFU and memory, ranked (:func:`~perfkit.plan.search_parts.ranked`).
    """
    peak_dtype, tensor = search_types(calibration, dtype, hw)
    run_dtype = tensor or peak_dtype
    params = uneven_params(model, c, max_stage_params(model, c))
    out = step_times(model, hw, rates, c, search_stages(model, c), params=params,
                     activation_model=activation_model, dtype=peak_dtype,
                     static_scheme=scheme, tensor_dtype=tensor, recompute_ops=recompute_ops)
    step = out["step_s"]
    measured = getattr(calibration, "measured", frozenset())
    residual = band_residual(calibration)
    terms = [np.full(len(step), residual), np.full(len(step), MODEL_UNCERTAINTY)]
    for name in PART_NAMES:
        sigma = MEASURED_SIGMA if PART_RATES[name] in measured else DEFAULT_SIGMA
        terms.append(sigma * out[name] / step)
    u = np.sqrt(np.sum(np.square(terms), axis=0))
    pp, v, k = (c[name].astype(float) for name in ("pp", "vpp", "full_layers_per_stage"))
    n, k = uneven_layers(model, c, model.num_layers / pp, k)
    static = static_bytes(model, c, scheme, c["num_micro_batches"].astype(float), pp,
                          run_dtype, rates.gradient_bytes)
    activation = uneven_activation_bytes(
        model, c, activation_bytes(model, c, activation_model, convention, n, k, v,
                                   recompute_ops), activation_model, convention, recompute_ops)
    tokens = c["dp"] * c["micro_batch_size"] * c["num_micro_batches"] * model.seq_length
    devices = c["dp"] * c["tp"] * pp * c["cp"]
    per_device = tokens / (step * devices)
    exposed = sum(out[name] for name in ("tp_comm", "dp_comm", "pp_comm", "ep_comm",
                                         "cp_comm"))
    results = {"compute_s": out["compute"], "recompute_s": out["recompute"],
               "bubble_s": out["bubble"], "tp_comm_s": out["tp_comm"],
               "dp_comm_s": out["dp_comm"], "pp_comm_s": out["pp_comm"],
               "ep_comm_s": out["ep_comm"], "cp_comm_s": out["cp_comm"],
               "exposed_comm_s": exposed, "optimizer_s": out["optimizer"],
               "overhead_s": out["overhead"], "step_s": step,
               "low_s": step * np.maximum(0.0, 1 - u), "high_s": step * (1 + u),
               "tokens_per_second_per_device": per_device,
               "mfu": flops_per_token(model, causal) * per_device / hw.peak(peak_dtype)}
    return ranked(c, results, static, activation, limit, include_rejected)
