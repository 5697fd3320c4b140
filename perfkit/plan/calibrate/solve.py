"""The step model at a calibration's rates, and the factors that make it hit a measured
step: one on every compute rate, one on every link efficiency (bisection)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...calc.rates import GROUPS, Rates
from ...calc.timing import step_times
from ..predict import layout_columns, stage_params, stage_rows
from .result import CalibratedJob

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


def _evaluate(job: CalibratedJob, rates: Rates) -> dict[str, float]:
    rows = stage_rows(job.model, job.parallel, job.stage_layers, job.selective_layers,
                      job.comm_layers)
    params = stage_params(job.model, job.parallel, job.stage_layers)
    out = step_times(job.model, job.hardware, rates, layout_columns(job.parallel), rows,
                     params=params, activation_model=job.activation_model, dtype=job.dtype,
                     static_scheme=job.static_scheme, tensor_dtype=job.tensor_dtype)
    return {k: float(v[0]) for k, v in out.items()}


def _solve_scale(job: CalibratedJob, rates: Rates, target: float,
                 parts: Sequence[str] | None = None) -> tuple[float, bool]:
    """Factor on every compute rate making the model's step (or ``parts``) hit ``target``.

    The step falls monotonically as the rates rise; bisection on the log of the factor.
    Returns the factor and whether the caps (efficiency 1) kept it from reaching the
    target.
    """
    def value(k: float) -> float:
        out = _evaluate(job, rates.scaled(k))
        return sum(out[p] for p in parts) if parts else out["step_s"]

    return _bisect_factor(value, 1e-3, 1.0 / min(rates.gemm_efficiency,
                                                  rates.memory_efficiency), target)


#: The model's parts that the device spends computing (a step's ``computing_us``).
COMPUTING_PARTS = ("compute", "recompute", "optimizer")


def _scaled_keeping_optimizer(rates: Rates, factor: float) -> Rates:
    """:meth:`Rates.scaled` with the optimizer's time kept: its bytes per parameter move
    with the memory efficiency, so that a fitted optimizer (the profile's ``Adam`` kernels)
    keeps the time it was measured at while the other kernels' rates move."""
    scaled = rates.scaled(factor)
    return scaled.replace(optimizer_bytes_per_param=rates.optimizer_bytes_per_param
                          * scaled.memory_efficiency / rates.memory_efficiency)


def _solve_computing_scale(job: CalibratedJob, rates: Rates, target: float
                           ) -> tuple[float, bool]:
    """Factor on every compute rate but the optimizer's (:func:`_scaled_keeping_optimizer`)
    making the model's computing time (:data:`COMPUTING_PARTS`) hit ``target`` seconds, and
    whether the caps kept it from reaching it (bisection, as :func:`_solve_scale`)."""
    def value(k: float) -> float:
        out = _evaluate(job, _scaled_keeping_optimizer(rates, k))
        return sum(out[p] for p in COMPUTING_PARTS)

    return _bisect_factor(value, 1e-3, 1.0 / min(rates.gemm_efficiency,
                                                  rates.memory_efficiency), target)


def _links_scaled(job: CalibratedJob, rates: Rates, factor: float) -> Rates:
    """Every group's link efficiency times ``factor``, capped at 1."""
    dpn = job.hardware.devices_per_node
    return rates.replace(link_efficiency={
        g: min(1.0, rates.link(g, _group_span(job, g) <= dpn) * factor) for g in GROUPS})


def _solve_link_scale(job: CalibratedJob, rates: Rates, target: float) -> tuple[float, bool]:
    """Factor on every link efficiency making the model's step hit ``target`` (bisection),
    and whether the cap (efficiency 1) kept it from reaching it."""
    dpn = job.hardware.devices_per_node
    lowest = min(rates.link(g, _group_span(job, g) <= dpn) for g in GROUPS)

    def value(k: float) -> float:
        return _evaluate(job, _links_scaled(job, rates, k))["step_s"]

    return _bisect_factor(value, 1.0, 1.0 / lowest, target)


def _bisect_factor(value: Callable[[float], float], lo: float, hi: float,
                   target: float) -> tuple[float, bool]:
    """The factor in [lo, hi] at which the falling ``value`` meets ``target`` (bisection on
    its log, to 1e-9), and whether ``hi`` (the caps) still leaves it above the target."""
    if value(hi) > target:
        return hi, True
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if value(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi), False


def _group_span(job: CalibratedJob, kind: str) -> int:
    """Consecutive ranks a group spans (tp, cp, dp, pp from the inside out)."""
    p = job.parallel
    return {"tp": p.tp, "cp": p.tp * p.cp, "dp": p.tp * p.cp * p.dp,
            "pp": 2 * p.tp * p.cp * p.dp, "ep": p.expert_tp_size * p.ep}[kind]
