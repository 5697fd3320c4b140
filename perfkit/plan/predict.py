"""Predict the step time of a layout from a calibration: what the next run will do.

:func:`predict` evaluates :func:`perfkit.calc.timing.step_times` — the model
:func:`perfkit.plan.search` ranks with when it is given a calibration — for one layout,
at the rates :func:`perfkit.plan.calibrate` fitted on the user's own run, and adds a band
and the memory fit.

The band
--------
``low_s``/``high_s`` are ``step_s · (1 ∓ u)`` (the low end never below 0) with

    ``u = sqrt(r² + u_model² + Σ_parts (σ_part · part / step)²)``,

* ``r``: the calibration's residual on the run it was fitted to (how well the fitted
  model reproduced the measured step; 0 when the fit closes it by construction). A
  profile's fit closed part by part (:func:`perfkit.plan.calibrate`, ``close=True``) is
  not closed on the step: its ``r`` is how far the closed model's step is from the
  measured one (:func:`band_residual`);
* ``u_model`` = :data:`MODEL_UNCERTAINTY` (0.04): the model's own error on layouts it
  was not fitted to, measured on published runs (``benchmarks/bench_predict.py``:
  calibrated mean error 2–3 %, the larger errors near 6 %);
* ``σ_part`` = :data:`MEASURED_SIGMA` (0.05) for a part whose rate the calibration
  measured on the user's run (compute from the operators or the step, a group's link
  efficiency from its collectives), :data:`DEFAULT_SIGMA` (0.25) for a part still at
  perfkit's default rate (a communication group the calibrating run did not use).

Uncalibrated predictions (``calibration=None``) use :class:`~perfkit.calc.rates.Rates`'
defaults (published A100 figures, see :mod:`perfkit.calc.rates`) with
:data:`DEFAULT_SIGMA` on every part, and say so in ``notes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..calc import ActivationModel
from ..calc.behaviour import Behaviour
from ..calc.flops import flops_per_token
from ..calc.layout_memory import layout_memory
from ..calc.layout_rows import (
    default_split,
    layout_columns,
    layout_step,
    run_types,
    stage_params,
    stage_rows,
    validate_layout,
)
from ..calc.rates import Rates
from ..calc.timing import PART_NAMES
from ..calc.usable_memory import MEMORY_RESERVE
from ..errors import InvalidArgumentError, check_positive_int
from ..specs import Hardware, ModelSpec, ParallelConfig
from .recompute_style import STYLE_NOTE, style_note, style_unknown

__all__ = ["Prediction", "predict", "MODEL_UNCERTAINTY", "MEASURED_SIGMA", "DEFAULT_SIGMA",
           "band_residual", "layout_columns", "stage_rows", "stage_params", "run_types",
           "default_split", "STYLE_NOTE"]

#: Relative error of the calibrated model on layouts it was not fitted to (published runs).
MODEL_UNCERTAINTY = 0.04
#: Relative uncertainty of a part whose rate was measured on the calibrating run.
MEASURED_SIGMA = 0.05
#: Relative uncertainty of a part at perfkit's default rate.
DEFAULT_SIGMA = 0.25

#: Which rates each part runs at (for the band: measured or default).
PART_RATES = {"compute": "compute", "recompute": "compute", "bubble": "compute",
              "optimizer": "compute", "overhead": "overhead", "tp_comm": "tp",
              "cp_comm": "cp", "ep_comm": "ep", "pp_comm": "pp", "dp_comm": "dp"}

@dataclass(frozen=True)
class Prediction:
    """A predicted step: time with its band, parts, memory fit, and what it assumed.

    Attributes
    ----------
    step_s, low_s, high_s : float
        Predicted step time and its band (see the module docstring).
    parts : mapping of str to float
        Seconds per part (:data:`perfkit.calc.timing.PART_NAMES`: ``compute``,
        ``recompute``, exposed ``tp_comm``/``cp_comm``/``ep_comm``/``pp_comm``/``dp_comm``,
        ``bubble``, ``optimizer``, ``overhead``); they sum to ``step_s``.
    tokens_per_second_per_device, mfu : float
        Throughput and model FLOPs utilisation at ``step_s``.
    static_bytes, activation_bytes, memory_bytes, memory_limit_bytes : float
        Memory of the most loaded device (static + activations of its stage) and the
        limit it is held to; ``fits`` whether it fits.
    model, parallel, hardware : ModelSpec, ParallelConfig, Hardware
        The layout predicted.
    global_batch_size, seq_length : int
    calibrated : bool
        Whether a calibration supplied the rates.
    changes : tuple of str
        What differs from the calibrated run's layout (``"pp 1 → 2"``).
    notes : tuple of str
    """

    step_s: float
    low_s: float
    high_s: float
    parts: Mapping[str, float]
    tokens_per_second_per_device: float
    mfu: float
    static_bytes: float
    activation_bytes: float
    memory_bytes: float
    memory_limit_bytes: float
    fits: bool
    model: ModelSpec = field(repr=False)
    parallel: ParallelConfig = field(repr=False)
    hardware: Hardware = field(repr=False)
    global_batch_size: int = 0
    seq_length: int = 0
    calibrated: bool = False
    changes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def band(self) -> float:
        """Relative half-width of the band."""
        return (self.high_s - self.step_s) / self.step_s

    def to_frame(self) -> pd.DataFrame:
        """One row per part (``part``, ``seconds``, ``share``), then ``step``, ``low``, ``high``."""
        rows = [(k, v, v / self.step_s) for k, v in self.parts.items()]
        rows += [("step", self.step_s, 1.0), ("low", self.low_s, self.low_s / self.step_s),
                 ("high", self.high_s, self.high_s / self.step_s)]
        return pd.DataFrame(rows, columns=["part", "seconds", "share"])


def _resolve(calibration: Any, model: ModelSpec | None, parallel: ParallelConfig | None,
             hardware: Hardware | str | None, global_batch_size: int | None,
             seq_length: int | None) -> tuple[ModelSpec, ParallelConfig, Hardware]:
    base = getattr(calibration, "job", None)
    model = model if model is not None else getattr(base, "model", None)
    parallel = parallel if parallel is not None else getattr(base, "parallel", None)
    hardware = hardware if hardware is not None else getattr(base, "hardware", None)
    for name, value in (("model", model), ("parallel", parallel), ("hardware", hardware)):
        if value is None:
            raise InvalidArgumentError(name, "is needed: pass it, or a calibration that "
                                       "knows the job", None)
    if isinstance(hardware, str):
        hardware = Hardware.preset(hardware)
    if not isinstance(model, ModelSpec):
        raise InvalidArgumentError("model", "must be a ModelSpec", type(model).__name__)
    if not isinstance(parallel, ParallelConfig):
        raise InvalidArgumentError("parallel", "must be a ParallelConfig",
                                   type(parallel).__name__)
    if not isinstance(hardware, Hardware):
        raise InvalidArgumentError("hardware", "must be a Hardware or a preset name",
                                   type(hardware).__name__)
    if seq_length is not None:
        model = model.replace(seq_length=check_positive_int("seq_length", seq_length))
    if global_batch_size is not None:
        gbs = check_positive_int("global_batch_size", global_batch_size)
        per = parallel.dp * parallel.micro_batch_size
        if gbs % per:
            raise InvalidArgumentError("global_batch_size", f"must be a multiple of dp x "
                                       f"micro_batch_size = {per}", gbs)
        parallel = parallel.replace(num_micro_batches=gbs // per)
    return model, parallel, hardware


def _changes(old: ParallelConfig | None, new: ParallelConfig, old_model: ModelSpec | None,
             new_model: ModelSpec) -> tuple[str, ...]:
    if old is None:
        return ()
    # the device count first: a layout on more devices is not the run's made faster
    out = [f"devices {old.world_size} → {new.world_size}"] \
        if old.world_size != new.world_size else []
    # then the work per step: a layout that steps fewer sequences is not the run made faster
    if old.global_batch_size != new.global_batch_size:
        out.append(f"global batch {old.global_batch_size} → {new.global_batch_size} "
                   "sequences (the step does the work of another batch)")
    out += [f"{f.name} {getattr(old, f.name)} → {getattr(new, f.name)}"
            for f in dataclasses.fields(ParallelConfig)
            if getattr(old, f.name) != getattr(new, f.name)]
    if old_model is not None and old_model != new_model:
        out += [f"{f.name} {getattr(old_model, f.name)} → {getattr(new_model, f.name)}"
                for f in dataclasses.fields(ModelSpec)
                if getattr(old_model, f.name) != getattr(new_model, f.name)]
    return tuple(out)


def band_residual(calibration: Any) -> float:
    """The band's ``r`` (module docstring): the calibration's residual, or, for a profile's
    fit closed part by part, the closed model's step against the measured step (the
    residual before closing is what the closing took out)."""
    if calibration is None:
        return 0.0
    if getattr(calibration, "closed", False) and getattr(calibration, "source", "") == "profile":
        measured = float(calibration.measured_step_s)
        if measured > 0:
            return float(calibration.estimated_step_s) / measured - 1.0
    return float(getattr(calibration, "residual", 0.0))


def predict(calibration: Any = None, model: ModelSpec | None = None,
            parallel: ParallelConfig | None = None, hardware: Hardware | str | None = None,
            global_batch_size: int | None = None, seq_length: int | None = None, *,
            stage_layers: Sequence[int] | None = None,
            selective_layers: int | Sequence[int] | None = None,
            comm_layers: int | Sequence[int] | None = None,
            activation_model: ActivationModel | None = None,
            static_scheme: str | None = None, memory_limit_bytes: float | None = None,
            memory_reserve: float = MEMORY_RESERVE, dtype: str | None = None,
            overrides: Mapping[str, Any] | None = None,
            behaviour: Behaviour | str | None = None) -> Prediction:
    """Predict a layout's step time, its parts and memory from a calibration.

    Parameters
    ----------
    calibration : Calibration, optional
        From :func:`perfkit.plan.calibrate`: the rates, and the job whose fields fill in
        whatever is not given here. None: perfkit's default rates (uncalibrated).
    model, parallel, hardware
        The layout to predict: every knob of :class:`~perfkit.ParallelConfig` (dp, tp, pp,
        vpp, ep, cp, micro-batch size and count, recompute and its per-stage layers,
        sequence parallelism, optimizer sharding; the device count is their product).
    global_batch_size : int, optional
        Sequences per step; sets ``num_micro_batches = B / (dp · micro_batch_size)``.
    seq_length : int, optional
        Tokens per sequence (replaces the model's).
    stage_layers : sequence of int, optional
        Uneven layers per pipeline stage (the even split by default).
    selective_layers, comm_layers : int or sequence of int, optional
        Per stage: layers with selective recompute (default: every layer not fully
        recomputed when ``recompute="selective"``) and layers whose tensor-parallel
        all-gathers are recomputed (default 0).
    activation_model : ActivationModel, optional
        Fused attention, dropout, norm storage, selective-recompute kind (default: the
        calibration's, else ``ActivationModel()``).
    static_scheme : {"mindspore", "megatron", "zero", "deepspeed"}, optional
        Static-memory accounting (default: the calibration's, else ``"mindspore"``).
    memory_limit_bytes : float, optional
        Usable device memory; default ``hardware.memory_bytes · (1 − memory_reserve)``.
    dtype : str, optional
        The type the layout runs in (default the calibrating run's, else the hardware's
        default): its peak, or the hardware's default peak where it lists none for it
        (:func:`run_types`, said in ``notes``); static memory
        (:func:`~perfkit.calc.static_memory`'s ``dtype``) and the gradients' default size
        follow it, and the calibration's activation accounting keeps its tensors at this
        type's size (:meth:`~perfkit.calc.ActivationModel.in_dtype`).
    overrides : mapping, optional
        :class:`~perfkit.calc.rates.Rates` fields to change for this layout — what the
        framework does differently, e.g. ``{"dp_buckets": 8}`` (overlap the gradient
        reduction), ``{"recompute_style": "needed"}``, ``{"gradient_bytes": 4}``. Changing
        a fitted rate (an efficiency) makes the prediction no longer calibrated on it.
        ``Rates.gradient_bytes`` (given here, or read by the calibration from the
        profile's collectives) sizes the gradients in static memory too, as it does the
        reduction (:func:`perfkit.calc.precision.parameter_bytes`: one rule).
    behaviour : Behaviour or str, optional
        A framework's overlap options and fixed costs
        (:class:`~perfkit.calc.behaviour.Behaviour`, or a preset name such as
        ``"megatron"``, ``"nemo"``, ``"fsdp"``, ``"deepspeed"``, ``"mindspore"``), applied
        before ``overrides``. With a calibration, its own fit of the memory-bound rate
        stands (:data:`perfkit.calc.behaviour.FITTED_FIELDS`).

    Returns
    -------
    Prediction
    """
    model, parallel, hardware = _resolve(calibration, model, parallel, hardware,
                                         global_batch_size, seq_length)
    stage_layers, split_said = default_split(model, parallel, stage_layers)
    uneven = stage_layers is not None
    validate_layout(model, parallel, uneven)
    rates: Rates = getattr(calibration, "rates", None) or Rates()
    if behaviour is not None:
        rates = rates.replace(**Behaviour.of(behaviour).overrides_over(calibration))
    if overrides:
        rates = rates.replace(**dict(overrides))
    job = getattr(calibration, "job", None)
    am = activation_model or getattr(job, "activation_model", None) or ActivationModel()
    if activation_model is None:  # the calibrating run's tensors, in the type asked for
        am = am.in_dtype(dtype)
    scheme = static_scheme or getattr(job, "static_scheme", None) or "mindspore"
    notes: list[str] = [split_said] if split_said else []
    if dtype is not None:
        dtype, tensor_dtype, said = run_types(dtype, hardware)
        if said:
            notes.append(said)
    else:  # the calibrating run's: its peak, and its tensors' type where it has no peak
        dtype, tensor_dtype = getattr(job, "dtype", None), getattr(job, "tensor_dtype", None)
    run_dtype = tensor_dtype or dtype
    priced = {"stage_layers": stage_layers, "selective_layers": selective_layers,
              "comm_layers": comm_layers, "activation_model": am, "dtype": dtype,
              "static_scheme": scheme, "tensor_dtype": tensor_dtype}
    out = layout_step(model, parallel, hardware, rates, **priced)
    parts = {name: float(out[name][0]) for name in PART_NAMES}
    step = float(out["step_s"][0])
    if style_unknown(job, model, parallel, overrides):
        other = "needed" if rates.recompute_style == "all" else "all"
        alt = float(layout_step(model, parallel, hardware,
                                rates.replace(recompute_style=other), **priced)["step_s"][0])
        notes.append(style_note(rates.recompute_style, step, alt))
    measured = getattr(calibration, "measured", frozenset())
    if calibration is None:
        notes.append("uncalibrated: perfkit's default rates (calibrate on a run of yours "
                     "with perfkit.plan.calibrate)")
    terms = [band_residual(calibration), MODEL_UNCERTAINTY]
    for name, seconds in parts.items():
        sigma = MEASURED_SIGMA if PART_RATES[name] in measured else DEFAULT_SIGMA
        terms.append(sigma * seconds / step)
        if seconds > 0.02 * step and PART_RATES[name] not in measured and calibration \
                is not None and name.endswith("_comm"):
            notes.append(f"{name} runs at the default link efficiency (the calibrating run "
                         f"did not measure {PART_RATES[name]} traffic)")
    u = float(np.sqrt(np.sum(np.square(terms))))
    tokens = parallel.global_batch_size * model.seq_length
    per_device = tokens / (step * parallel.world_size)
    peak = hardware.peak(dtype)
    # the gradients the reduction moves are the ones static memory keeps
    memory = layout_memory(model, parallel, hardware, scheme, dtype=run_dtype,
                           gradient_bytes=rates.gradient_bytes, activation_model=am,
                           uneven=uneven, memory_limit_bytes=memory_limit_bytes,
                           memory_reserve=memory_reserve)
    notes.extend(memory.notes)
    static, act, limit = memory.static_bytes, memory.activation_bytes, memory.limit_bytes
    return Prediction(
        step, step * max(0.0, 1.0 - u), step * (1.0 + u), parts, per_device,
        flops_per_token(model) * per_device / peak, static, act, static + act, limit,
        memory.fits,
        model, parallel, hardware, parallel.global_batch_size, model.seq_length,
        calibration is not None,
        _changes(getattr(job, "parallel", None), parallel, getattr(job, "model", None), model),
        tuple(notes))
