"""Parallel-strategy search: every (dp, tp, pp, cp, ep, vpp, micro-batching, SP, optimizer
sharding, recompute) that fits, ranked by estimated step time.

The candidates are :mod:`perfkit.plan.candidates`'. By default they are timed with the step
model of :func:`perfkit.plan.predict` (:mod:`perfkit.plan.search_step`): at a calibration's
rates, at given rates, or, with neither, at perfkit's default rates — each row is then what
``predict`` gives for that layout, so a layout reads the same predicted step in the search,
in :func:`perfkit.plan.predict`, on the Planner tab and in the job's figures. A what-if's
round numbers (``efficiency`` for every matrix product, ``comm_efficiency`` for every link,
the overlaps, ``overhead_s``: :meth:`perfkit.calc.rates.Rates.with_terms`) change the rates,
not the model. The model is evaluated with numpy over all candidates at once.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..calc import ActivationModel
from ..calc.rates import Rates
from ..calc.usable_memory import MEMORY_RESERVE, usable_memory_bytes
from ..errors import InvalidArgumentError, check_fraction, check_positive
from ..specs import Hardware, ModelSpec
from ..specs.recompute_ops import resolve_recompute_ops
from .candidates import (
    SearchSpace,
    candidate_columns,
    candidates,
    split_of,
    to_parallel_config,
)
from .search_step import evaluate_step_model

__all__ = ["SearchSpace", "search", "candidates", "to_parallel_config", "STEP_MODELS"]

#: The values of :func:`search`'s ``step_model``: ``"step"``, the step model of
#: :func:`perfkit.plan.predict`, the only one. ``"first-order"``, the retired first-order
#: model, is still accepted with a :class:`DeprecationWarning`: the step model at its
#: round numbers (every matrix product at ``efficiency``, default 0.5; every link at
#: ``comm_efficiency``, default 0.8).
STEP_MODELS = ("step",)

#: The what-if terms' defaults under the deprecated ``step_model="first-order"``.
_FIRST_ORDER_DEFAULTS = {"efficiency": 0.5, "comm_efficiency": 0.8}


def _why_none(model: ModelSpec, space: SearchSpace | None) -> str:
    """What in ``space`` the search cannot price, when that is why nothing is left: a pp
    that leaves a stage without a decoder layer (stages the layers do not divide are
    split as :func:`perfkit.plan.predict` splits them, :func:`split_of`)."""
    empty = [p for p in (getattr(space, "pp", None) or ())
             if split_of(model.num_layers, int(p)) is None]
    if not empty:
        return ""
    return (f" (pp {', '.join(map(str, empty))} leaves a stage without a decoder layer: "
            f"the model has {model.num_layers} layers)")


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
    step_model : {"step"}
        The step model of :func:`perfkit.plan.predict`
        (:func:`perfkit.calc.timing.step_times`), at the calibration's rates, at
        ``rates``, or at perfkit's default rates (``Rates(gradient_bytes=gradient_bytes)``)
        when given neither — each row is what ``predict`` gives for its layout at those
        rates. ``"first-order"`` (the retired first-order model) is accepted with a
        :class:`DeprecationWarning`: the same model with ``efficiency`` 0.5 and
        ``comm_efficiency`` 0.8 unless given.
    efficiency, comm_efficiency, dp_overlap, tp_overlap, pp_overlap, ep_overlap, \
cp_overlap, overhead_s
        A what-if's round numbers over those rates
        (:meth:`perfkit.calc.rates.Rates.with_terms`): every matrix product at
        ``efficiency`` of the peak, every link at ``comm_efficiency`` of its bandwidth,
        each group's overlap, a fixed time per step. None: the rates' own. Over a
        calibration they replace what it fitted, and the band still counts its residual.
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
        columns are each group's *exposed* time. ``stage_layers``: the decoder layers of
        each pipeline rank where the layers do not divide by ``pp · vpp``
        (``"10,11,10,9"``, torchtitan's split, as ``predict`` assumes it), else "".

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        An unknown ``step_model``, a value out of range, or a job no configuration splits.
    """
    if step_model == "first-order":
        warnings.warn("step_model='first-order' is retired: the step model prices every "
                      "layout; pass efficiency= and comm_efficiency= for its round numbers",
                      DeprecationWarning, stacklevel=2)
        efficiency = _FIRST_ORDER_DEFAULTS["efficiency"] if efficiency is None else efficiency
        comm_efficiency = _FIRST_ORDER_DEFAULTS["comm_efficiency"] if comm_efficiency is None \
            else comm_efficiency
    elif step_model not in STEP_MODELS:
        raise InvalidArgumentError("step_model", f"must be one of {STEP_MODELS}", step_model)
    overlaps = {key: check_fraction(f"{key}_overlap", value) for key, value in (
        ("dp", dp_overlap), ("tp", tp_overlap), ("pp", pp_overlap), ("ep", ep_overlap),
        ("cp", cp_overlap)) if value is not None}
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
                                   f"devices for global_batch_size={global_batch_size}"
                                   + _why_none(model, space))
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
    elif rates is not None:
        if not isinstance(rates, Rates):
            raise InvalidArgumentError("rates", "must be a perfkit.calc.rates.Rates",
                                       type(rates).__name__)
    else:  # predict's uncalibrated model: perfkit's default rates
        rates = Rates(gradient_bytes=gradient_bytes)
    rates = rates.with_terms(efficiency, comm_efficiency, overlaps or None, overhead_s)
    ops = resolve_recompute_ops(space.recompute_ops) if space is not None else None
    frame = evaluate_step_model(model, hardware, cols, rates, calibration, dtype,
                                static_scheme, limit, am, activation_convention, causal,
                                include_rejected, recompute_ops=ops)
    if ops is not None:  # what each selective row reruns (to_parallel_config reads it)
        frame["recompute_ops"] = np.where(frame["recompute"] == "selective",
                                          ",".join(ops), "")
    frame["stage_layers"] = _stage_layers(model.num_layers, frame)
    return frame


def _stage_layers(num_layers: int, frame: pd.DataFrame) -> np.ndarray:
    """Each row's decoder layers per pipeline rank where the layers do not divide by
    ``pp · vpp`` (``"10,11,10,9"``: :func:`split_of`, the split ``predict`` assumes), ""
    where they do."""
    out = np.full(len(frame), "", dtype=object)
    pp, vpp = frame["pp"].to_numpy(), frame["vpp"].to_numpy()
    for p, v in {(int(a), int(b)) for a, b in zip(pp, vpp, strict=True)
                 if num_layers % (a * b)}:
        out[(pp == p) & (vpp == v)] = ",".join(map(str, split_of(num_layers, p, v) or ()))
    return out
