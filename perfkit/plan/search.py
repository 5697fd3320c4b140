"""Parallel-strategy search: every (dp, tp, pp, cp, ep, vpp, micro-batching, SP, optimizer
sharding, recompute) that fits, ranked by estimated step time.

The candidates are :mod:`perfkit.plan.candidates`'. By default they are timed with the step
model of :func:`perfkit.plan.predict` (:mod:`perfkit.plan.search_step`): at a calibration's
rates, at given rates, or, with neither, at perfkit's default rates — each row is then what
``predict`` gives for that layout, so a layout reads the same predicted step in the search,
in :func:`perfkit.plan.predict`, on the Planner tab and in the job's figures.
``step_model="first-order"`` times them with :func:`perfkit.calc.estimate_step`'s
first-order model instead (:mod:`perfkit.plan.search_first_order`: one efficiency for every
matrix product, one for every link), the first approximation the lab teaches. Both are
evaluated with numpy over all candidates at once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..calc import ActivationModel
from ..calc.rates import Rates
from ..calc.usable_memory import MEMORY_RESERVE, usable_memory_bytes
from ..errors import InvalidArgumentError, check_fraction, check_positive
from ..specs import Hardware, ModelSpec
from ..specs.recompute_ops import resolve_recompute_ops
from .candidates import SearchSpace, candidate_columns, candidates, to_parallel_config
from .search_first_order import evaluate_first_order
from .search_step import evaluate_step_model

__all__ = ["SearchSpace", "search", "candidates", "to_parallel_config", "STEP_MODELS"]

#: The values of :func:`search`'s ``step_model``: ``"step"`` (the default, the step model
#: of :func:`perfkit.plan.predict`) and ``"first-order"`` (:func:`perfkit.calc.estimate_step`'s).
STEP_MODELS = ("step", "first-order")

#: The arguments of the first-order model alone, and their defaults
#: (:func:`perfkit.calc.estimate_step`'s).
_FIRST_ORDER_TERMS = {"efficiency": 0.5, "comm_efficiency": 0.8, "dp_overlap": 0.0,
                      "tp_overlap": 0.0, "pp_overlap": 0.0, "ep_overlap": 0.0,
                      "cp_overlap": 0.0, "overhead_s": 0.0}


def search(model: ModelSpec, hardware: Hardware, num_devices: int, global_batch_size: int,
           memory_limit: float | None = None, *, space: SearchSpace | None = None,
           step_model: str = "step",
           efficiency: float | None = None, comm_efficiency: float | None = None,
           dp_overlap: float | None = None, tp_overlap: float | None = None,
           pp_overlap: float | None = None, ep_overlap: float | None = None,
           cp_overlap: float | None = None,
           overhead_s: float | None = None, calibration: object | None = None,
           dtype: str | None = None, static_scheme: str = "mindspore",
           memory_reserve: float = MEMORY_RESERVE, activation_model: ActivationModel | None = None,
           activation_convention: str = "seed", causal: bool = False,
           include_rejected: bool = False,
           gradient_bytes: float | None = None, rates: Rates | None = None) -> pd.DataFrame:
    """Rank every configuration that fits by estimated step time.

    Parameters
    ----------
    model, hardware : ModelSpec, Hardware
    num_devices, global_batch_size : int
        The job: devices and sequences per step.
    memory_limit : float, optional
        Usable bytes per device; default ``hardware.memory_bytes × (1 − memory_reserve)``.
    space : SearchSpace, optional
        What to enumerate (see :class:`SearchSpace`); by default context parallelism and,
        for a MoE model, expert parallelism are explored too.
    step_model : {"step", "first-order"}
        ``"step"`` (default): the step model of :func:`perfkit.plan.predict`
        (:func:`perfkit.calc.timing.step_times`), at the calibration's rates, at
        ``rates``, or at perfkit's default rates (``Rates(gradient_bytes=gradient_bytes)``)
        when given neither — each row is what ``predict`` gives for its layout.
        ``"first-order"``: :func:`perfkit.calc.estimate_step`'s first-order model, a first
        approximation (one efficiency for every matrix product, one for every link, each
        group's overlap a fixed share); not with a calibration or rates.
    efficiency, comm_efficiency, dp_overlap, tp_overlap, pp_overlap, ep_overlap, \
cp_overlap, overhead_s
        The first-order model's terms (see :func:`perfkit.calc.estimate_step`; None: its
        defaults 0.5, 0.8, no overlap, no overhead). Only with
        ``step_model="first-order"``: the step model's rates are ``rates``' fields.
    calibration : Calibration, optional
        From :func:`perfkit.plan.calibrate`: rank with the calibrated step model
        (:func:`perfkit.calc.timing.step_times` at the fitted rates — exactly what
        :func:`perfkit.plan.predict` gives for the same layout); the calibration's
        activation model is the default (its tensors at the
        size of ``dtype`` when given: :meth:`~perfkit.calc.ActivationModel.in_dtype`),
        and the band's residual is the calibration's
        (:func:`perfkit.plan.predict.band_residual`).
    dtype : str, optional
        The run's type: its peak where ``hardware`` lists one, else the hardware's default
        peak (:func:`perfkit.plan.run_types`), while static memory, the gradients and the
        traffic keep ``dtype``'s size either way. None: a calibration's run's types (as
        :func:`perfkit.plan.predict`), else the hardware's default type.
    static_scheme : {"mindspore", "megatron"}
        Static-memory accounting (the job's framework's: :attr:`perfkit.Job.static_scheme`).
        With a calibration, its ``Rates.gradient_bytes`` (the
        profile's reductions) sizes the gradients in static memory as in the reduction,
        and without ``dtype`` its run's type sizes static memory
        (:func:`perfkit.plan.predict` does the same).
    activation_model : ActivationModel, optional
        Activation accounting (default: the seed's table).
    activation_convention : {"seed", "korthikanti", "megatron", "llm-analysis"}
        Activation-memory convention (:func:`perfkit.calc.activation_memory`); the
        non-default ones are computed once per distinct layout, so they are slower.
    causal : bool
        FLOPs convention for compute and MFU (see :func:`perfkit.calc.model_flops`).
    include_rejected : bool
        Keep configurations that do not fit (``fits == False``) at the bottom.
    rates : Rates, optional
        Without a calibration: rank with the step model at these rates, as with a
        calibration but without its band's fitted terms. Left out, perfkit's default
        rates, what :func:`perfkit.plan.predict` uses uncalibrated, so each row is what
        ``predict(None, model, layout, hardware, dtype=..., overrides={"gradient_bytes":
        gradient_bytes})`` gives for its layout (the Planner tab ranks this way when it has
        no calibration). Not with ``calibration``.
    gradient_bytes : float, optional
        Without a calibration or rates: bytes per gradient element of the data-parallel
        reduction (:attr:`perfkit.Job.gradient_bytes`, what the profile's reductions move),
        which sizes the reduction and the gradients in static memory; None: the scheme's
        size (:func:`~perfkit.calc.memory.scheme_gradient_bytes`). With a calibration or
        rates their ``Rates.gradient_bytes`` counts instead.

    Returns
    -------
    DataFrame
        One row per configuration: the parallel settings, ``compute_s, bubble_s,
        tp_comm_s, dp_comm_s, pp_comm_s, ep_comm_s, cp_comm_s, exposed_comm_s,
        overhead_s, step_s, tokens_per_second_per_device, mfu, static_bytes,
        activation_bytes, memory_bytes, memory_limit_bytes, fits`` and ``rank`` (1 =
        fastest that fits; ties go to the one using less memory), sorted by rank. The
        step model's frame also has ``recompute_s``, ``optimizer_s``, ``low_s`` and
        ``high_s`` (the band of :func:`perfkit.plan.predict`), and its ``*_comm_s``
        columns are each group's *exposed* time.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        A first-order term (``efficiency`` …) given to the step model, a calibration or
        rates given to the first-order one, an unknown ``step_model``, a value out of
        range, or a job no configuration splits.
    """
    terms = {"efficiency": efficiency, "comm_efficiency": comm_efficiency,
             "dp_overlap": dp_overlap, "tp_overlap": tp_overlap, "pp_overlap": pp_overlap,
             "ep_overlap": ep_overlap, "cp_overlap": cp_overlap, "overhead_s": overhead_s}
    _check_step_model(step_model, terms, calibration, rates)
    terms = {name: _FIRST_ORDER_TERMS[name] if value is None else value
             for name, value in terms.items()}
    eff = check_fraction("efficiency", terms["efficiency"], allow_zero=False)
    ceff = check_fraction("comm_efficiency", terms["comm_efficiency"], allow_zero=False)
    overlaps = {key: check_fraction(f"{key}_overlap", terms[f"{key}_overlap"])
                for key in ("dp", "tp", "pp", "ep", "cp")}
    if static_scheme not in ("mindspore", "megatron"):
        raise InvalidArgumentError("static_scheme", "must be 'mindspore' or 'megatron'",
                                   static_scheme)
    reserve = check_fraction("memory_reserve", memory_reserve)
    limit = usable_memory_bytes(hardware, reserve) if memory_limit is None \
        else check_positive("memory_limit", memory_limit)
    cols = candidate_columns(model, num_devices, global_batch_size, space,
                              hardware.devices_per_node)
    if cols is None:
        raise InvalidArgumentError("num_devices", f"no valid configuration of {num_devices} "
                                   f"devices for global_batch_size={global_batch_size}")
    am = activation_model
    if calibration is not None:
        if rates is not None:
            raise InvalidArgumentError("rates", "comes from the calibration: pass one or "
                                       "the other", type(rates).__name__)
        rates = getattr(calibration, "rates", None)
        if not isinstance(rates, Rates):
            raise InvalidArgumentError("calibration", "must come from perfkit.plan.calibrate",
                                       type(calibration).__name__)
        job = getattr(calibration, "job", None)
        am = activation_model or getattr(job, "activation_model", None)
        if activation_model is None and am is not None:  # the run's tensors in ``dtype``
            am = am.in_dtype(dtype)
    elif rates is not None and not isinstance(rates, Rates):
        raise InvalidArgumentError("rates", "must be a perfkit.calc.rates.Rates",
                                   type(rates).__name__)
    elif step_model == "step":  # predict's uncalibrated model: perfkit's default rates
        rates = Rates(gradient_bytes=gradient_bytes)
    ops = resolve_recompute_ops(space.recompute_ops) if space is not None else None
    if rates is not None:
        frame = evaluate_step_model(model, hardware, cols, rates, calibration, dtype,
                                    static_scheme, limit, am, activation_convention, causal,
                                    include_rejected, recompute_ops=ops)
        if ops is not None:  # what each selective row reruns (to_parallel_config reads it)
            frame["recompute_ops"] = np.where(frame["recompute"] == "selective",
                                              ",".join(ops), "")
        return frame
    if ops is not None:
        raise InvalidArgumentError("space", "recompute_ops (op-level recompute) is priced "
                                   "by the step model only: leave step_model at 'step'",
                                   ops)
    return evaluate_first_order(model, hardware, cols, eff, ceff, overlaps,
                                float(terms["overhead_s"]),
                                dtype, static_scheme, limit, activation_model,
                                activation_convention, causal, include_rejected,
                                gradient_bytes)



def _check_step_model(step_model: str, terms: dict[str, float | None],
                      calibration: object | None, rates: object | None) -> None:
    """Refuse arguments of one model given to the other, naming the one they belong to."""
    if step_model not in STEP_MODELS:
        raise InvalidArgumentError("step_model", f"must be one of {STEP_MODELS}", step_model)
    given = [name for name, value in terms.items() if value is not None]
    if step_model == "step" and given:
        raise InvalidArgumentError(
            given[0], "is a term of the first-order model, not of the step model (its "
            "rates are perfkit.calc.rates.Rates fields, passed as rates=): pass "
            "step_model='first-order' to rank with the first-order model", terms[given[0]])
    if step_model == "first-order" and (calibration is not None or rates is not None):
        raise InvalidArgumentError(
            "calibration" if calibration is not None else "rates",
            "sets the step model's rates: the first-order model has none (leave "
            "step_model at 'step')")
