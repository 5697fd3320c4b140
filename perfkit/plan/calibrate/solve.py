"""The step model at a calibration's rates, and the factors that make it hit a measured
step: one on every compute rate, one on every link efficiency (bisection), and a profile's
two closing factors, one on the matrix kernels and one on the memory-bound kernels
(:func:`_solve_split_closing`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...calc.attention_rate import resolve_implementation
from ...calc.gemm_rate import surface_for
from ...calc.layout_rows import layout_columns, stage_params, stage_rows
from ...calc.rates import GEMM_SURFACE_SCALE_MAX, GROUPS, Rates
from ...calc.timing import step_times
from ...calc.topology import GROUP_COLLECTIVE, group_bandwidth, layout_group
from .result import CalibratedJob

__all__: list[str] = []  # private parts of perfkit.plan.calibrate


def _evaluate(job: CalibratedJob, rates: Rates) -> dict[str, float]:
    rows = stage_rows(job.model, job.parallel, job.stage_layers, job.selective_layers,
                      job.comm_layers)
    params = stage_params(job.model, job.parallel, job.stage_layers)
    out = step_times(job.model, job.hardware, rates, layout_columns(job.parallel), rows,
                     params=params, activation_model=job.activation_model, dtype=job.dtype,
                     static_scheme=job.static_scheme, tensor_dtype=job.tensor_dtype,
                     rank_order=job.parallel.rank_order)
    return {k: float(v[0]) for k, v in out.items()}


def _on_surface(job: CalibratedJob, rates: Rates) -> bool:
    """Whether the job's GEMMs are priced on a measured surface (``gemm_surface_scale``
    moves them) rather than the size curve (``gemm_efficiency``)."""
    return surface_for(job.hardware.name, job.dtype, rates.gemm_model) is not None


def _gemm_ceiling(job: CalibratedJob, rates: Rates) -> float:
    """The largest factor the GEMMs can take: to an efficiency of 1 on the size curve, to
    :data:`~perfkit.calc.rates.GEMM_SURFACE_SCALE_MAX` on a surface (where each shape's
    efficiency is capped at 1 in its own pricing)."""
    if _on_surface(job, rates):
        return GEMM_SURFACE_SCALE_MAX / rates.gemm_surface_scale
    return 1.0 / rates.gemm_efficiency


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

    return _bisect_factor(value, 1e-3, max(_gemm_ceiling(job, rates),
                                           1.0 / rates.memory_efficiency), target)


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

    return _bisect_factor(value, 1e-3, max(_gemm_ceiling(job, rates),
                                           1.0 / rates.memory_efficiency), target)


def _computing_s(job: CalibratedJob, rates: Rates) -> float:
    """The model's computing time (:data:`COMPUTING_PARTS`), seconds."""
    out = _evaluate(job, rates)
    return sum(out[p] for p in COMPUTING_PARTS)


def _vector_s(job: CalibratedJob, rates: Rates) -> float:
    """Seconds the model's memory-bound kernels take of its computing time.

    Each lasts ``(B + B½)/(e_vec·bw)`` (:func:`perfkit.calc.timing.memory_seconds`) and
    nothing else in the computing time depends on ``e_vec``
    (:attr:`~perfkit.calc.rates.Rates.vector_efficiency`: the GEMMs' byte term and the
    optimizer run at ``memory_efficiency``), so halving ``e_vec`` adds exactly their time
    once: ``V = C(e_vec/2) − C(e_vec)``."""
    e_vec = rates.vector_efficiency
    return _computing_s(job, rates.replace(elementwise_efficiency=e_vec / 2)) \
        - _computing_s(job, rates.replace(elementwise_efficiency=e_vec))


def attention_kept(job: CalibratedJob, rates: Rates) -> str:
    """What a compute-scale term adds to its description when fused attention is priced on
    a published curve (:meth:`Rates.scaled` moves its ``attention_efficiency`` with the
    rest; "" where attention is a share of the GEMM efficiency or unfused)."""
    if not job.activation_model.flash_attention or rates.attention_implementation == "gemm":
        return ""
    impl = resolve_implementation(rates.attention_implementation, job.hardware.name)
    return (f"; fused attention, on the published {impl} curve, takes the same factor "
            f"(the measured times do not show its kernels apart)")


def _gemm_scaled(rates: Rates, factor: float, surface: bool = False) -> Rates:
    """The GEMM efficiency times ``factor``, capped at 1 (and a measured surface's scale,
    capped at :data:`~perfkit.calc.rates.GEMM_SURFACE_SCALE_MAX`), and fused attention
    with it: under ``attention_implementation="gemm"`` attention is a share of the GEMM
    efficiency; on a published curve (:mod:`perfkit.calc.attention_rate`) its
    ``attention_efficiency`` takes the same factor as the GEMMs got (the closing's
    measured share counts the matrix and attention kernels together; ``surface``: the
    GEMMs' factor is the surface's)."""
    gemm = min(1.0, rates.gemm_efficiency * factor)
    scale = min(GEMM_SURFACE_SCALE_MAX, rates.gemm_surface_scale * factor)
    if rates.attention_implementation == "gemm":
        return rates.replace(gemm_efficiency=gemm, gemm_surface_scale=scale)
    got = scale / rates.gemm_surface_scale if surface else gemm / rates.gemm_efficiency
    return rates.replace(gemm_efficiency=gemm, gemm_surface_scale=scale,
                         attention_efficiency=min(2.0, rates.attention_efficiency * got))


def _solve_split_closing(job: CalibratedJob, rates: Rates, computing: float,
                         matrix_share: float) -> tuple[Rates, dict[str, float]]:
    """A profile's closing, part by part of the device's work: the matrix kernels' and the
    memory-bound kernels' efficiencies each scaled to what the profile measured of them.

    With ``C`` the measured computing time (seconds), ``O`` the model's optimizer time
    (kept: fitted to the profile's own optimizer kernels) and ``s`` the matrix and
    attention kernels' share of the profile's other kernel time (``matrix_share``):

    1. ``k_g`` on ``gemm_efficiency`` (bisection, capped at an efficiency of 1) makes the
       model's GEMM and attention time ``M(k_g)`` equal ``s·(C − O)``;
    2. ``k_v = V / (C − O − M(k_g))`` on the memory-bound kernels' efficiency
       (``elementwise_efficiency``, from ``memory_efficiency``; ``V`` their model time,
       :func:`_vector_s`) gives them the rest, so that the model's computing time is ``C``
       exactly, as the single factor did.

    Why two factors: the model's memory-bound kernels are the ones a layout splits least
    (norms and residual adds run on every tensor-parallel rank's full activation without
    sequence parallelism), and the work the model misses is of that kind (a run's unfused
    element-wise kernels). One factor on every rate spread that missing time over the
    GEMMs too, which ``tp`` divides: on the H100 Llama's tp shares
    (``tests/data/kineto_llama_tp_h100``) it made a tp-4 rank compute 21 % too little.

    Returns the closed rates and ``{"matrix": k_g, "vector": k_v, "matrix_s": M,
    "vector_s": V/k_v, "matrix_capped": 0/1, "vector_capped": 0/1}``; a capped ``k_g``
    (the matrix kernels already slower in the model than measured at the peak) leaves
    their excess to come off the memory-bound kernels, a capped ``k_v`` (even at an
    efficiency of 1 they take more than the rest) leaves the computing time above ``C``.
    """
    rates = rates.replace(elementwise_efficiency=rates.vector_efficiency)
    vector = _vector_s(job, rates)
    optimizer = _evaluate(job, rates)["optimizer"]
    target = (computing - optimizer) * matrix_share

    surface = _on_surface(job, rates)

    def matrix(k: float) -> float:
        return _computing_s(job, _gemm_scaled(rates, k, surface)) - vector - optimizer

    k_g, matrix_capped = _bisect_factor(matrix, 1e-3, _gemm_ceiling(job, rates), target)
    matrix_s = matrix(k_g)
    rates = _gemm_scaled(rates, k_g, surface)
    rest = computing - optimizer - matrix_s
    e_vec = rates.vector_efficiency
    vector_capped = not rest > vector * e_vec  # k_v would lift e_vec above 1
    k_v = 1.0 / e_vec if vector_capped else vector / rest
    rates = rates.replace(elementwise_efficiency=min(1.0, e_vec * k_v))
    return rates, {"matrix": k_g, "vector": k_v, "matrix_s": matrix_s,
                   "vector_s": vector / k_v, "matrix_capped": float(matrix_capped),
                   "vector_capped": float(vector_capped)}


def _links_scaled(job: CalibratedJob, rates: Rates, factor: float) -> Rates:
    """Every group's link efficiency times ``factor``, capped at 1."""
    return rates.replace(link_efficiency={
        g: min(1.0, _group_link(job, rates, g) * factor) for g in GROUPS})


def _solve_link_scale(job: CalibratedJob, rates: Rates, target: float) -> tuple[float, bool]:
    """Factor on every link efficiency making the model's step hit ``target`` (bisection),
    and whether the cap (efficiency 1) kept it from reaching it."""
    lowest = min(_group_link(job, rates, g) for g in GROUPS)

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


def _group_link(job: CalibratedJob, rates: Rates, group: str) -> float:
    """The one link efficiency of ``group`` that prices its collectives as ``rates`` do:
    the group's bandwidth at its shape (:func:`perfkit.calc.topology.group_bandwidth`)
    with each tier at its own efficiency, over the same at nominal. A group inside a node
    (or one rank per node) gets its tier's efficiency; a hierarchical one, in between."""
    node = job.hardware.topology
    n, r = layout_group(job.parallel, group, node.devices_per_node)
    if n <= 1:
        return rates.link(group, True)
    coll = GROUP_COLLECTIVE[group]
    alg = rates.collective_algorithm
    inside = node.bandwidth_among(r)
    nominal = group_bandwidth(coll, n, r, inside, node.nic_bandwidth_per_device, alg)
    achieved = group_bandwidth(coll, n, r, inside * rates.link(group, True),
                               node.nic_bandwidth_per_device * rates.link(group, False), alg)
    return achieved / nominal
