"""One layout as the step model reads it, and its step: the one place a layout is priced.

:func:`layout_step` is what :func:`perfkit.calc.estimate_step`, :func:`perfkit.plan.predict`
and :func:`perfkit.plan.calibrate` run for one layout: :func:`perfkit.calc.timing.step_times`
on the layout's columns (:func:`layout_columns`), its stage rows (:func:`stage_rows`:
layers, recomputed layers) and the parameters of its most loaded stage
(:func:`stage_params`). :func:`perfkit.plan.search` runs the same ``step_times`` over every
candidate at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import InvalidArgumentError, ParallelConfigError
from ..specs import Hardware, ModelSpec, ParallelConfig
from .activation import ActivationModel
from .memory import stage_parameters
from .pipeline import split_when_uneven
from .rates import Rates
from .timing import step_times

__all__ = ["layout_columns", "stage_rows", "stage_params", "default_split", "run_types",
           "validate_layout", "layout_step"]

_DIVISIBILITY = "pp: pp*vpp="


def layout_columns(parallel: ParallelConfig) -> dict[str, np.ndarray]:
    """One configuration as the columns :func:`perfkit.calc.timing.step_times` reads."""
    cols = {k: np.array([getattr(parallel, k)], dtype=np.int64) for k in (
        "dp", "tp", "pp", "cp", "ep", "vpp", "micro_batch_size", "num_micro_batches",
        "optimizer_shard", "zero_stage")}
    cols["expert_tp"] = np.array([parallel.expert_tp or 0], dtype=np.int64)
    cols["sequence_parallel"] = np.array([parallel.sequence_parallel])
    cols["trainable_fraction"] = np.array([parallel.trainable_fraction], dtype=float)
    return cols


def _per_stage(name: str, value: int | Sequence[int] | None, pp: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    values = tuple(value) if isinstance(value, Sequence) else (value,) * pp
    if len(values) != pp:
        raise InvalidArgumentError(name, f"needs one entry per pipeline stage (pp={pp})", value)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidArgumentError(name, "entries must be whole numbers >= 0", value)
    return tuple(int(v) for v in values)


def stage_rows(model: ModelSpec, parallel: ParallelConfig,
               stage_layers: Sequence[int] | None = None,
               selective_layers: int | Sequence[int] | None = None,
               comm_layers: int | Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Per-stage rows of one layout: layers, fully / selectively / communication-recomputed.

    ``stage_layers`` overrides the even split (MindFormers' ``offset``, Megatron's lighter
    first and last stages). Fully recomputed layers come from ``parallel.recompute_layers``
    (or all with ``recompute="full"``); ``selective_layers`` defaults to the rest of each
    stage with ``recompute="selective"``; ``comm_layers`` (default 0) are layers whose
    tensor-parallel all-gathers are recomputed in the backward (MindFormers'
    ``select_comm_recompute``).
    """
    pp = parallel.pp
    layers = _per_stage("stage_layers", stage_layers, pp) or tuple(
        parallel.layers_per_stage(model))
    if sum(layers) != model.num_layers:
        raise InvalidArgumentError("stage_layers", f"must add up to num_layers="
                                   f"{model.num_layers}", stage_layers)
    rl = parallel.recompute_layers
    if rl is None:
        full = layers if parallel.recompute == "full" else (0,) * pp
    else:
        full = tuple(rl) if isinstance(rl, tuple) else (rl,) * pp
    if any(f > n for f, n in zip(full, layers, strict=True)):
        raise InvalidArgumentError("recompute_layers", "more fully recomputed layers than "
                                   "the stage holds", rl)
    selective = _per_stage("selective_layers", selective_layers, pp)
    if selective is None:
        selective = tuple(n - f if parallel.recompute == "selective" else 0
                          for n, f in zip(layers, full, strict=True))
    comm = _per_stage("comm_layers", comm_layers, pp) or (0,) * pp
    for name, values in (("selective_layers", selective), ("comm_layers", comm)):
        if any(v > n for v, n in zip(values, layers, strict=True)):
            raise InvalidArgumentError(name, "more layers than the stage holds", values)
    stage = np.arange(pp)
    return {"cand": np.zeros(pp, dtype=np.int64), "layers": np.array(layers, float),
            "full": np.array(full, float), "selective": np.array(selective, float),
            "comm": np.array(comm, float), "first": stage == 0, "last": stage == pp - 1}


def stage_params(model: ModelSpec, parallel: ParallelConfig,
                 stage_layers: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Dense and expert parameters per device of the most loaded stage (1-element arrays)."""
    if stage_layers is None:
        stages = stage_parameters(model, parallel)
    else:
        par = parallel.replace(vpp=1, recompute_layers=None)
        # each stage as if every stage held its n layers (dense layers first, as the
        # model), once per distinct n
        evens = {n: stage_parameters(model.replace(num_layers=n * parallel.pp), par)
                 for n in set(stage_layers)}
        stages = [evens[n][s] for s, n in enumerate(stage_layers)]
    top = max(stages, key=lambda st: st["total"])
    return {"dense": np.array([top["total"] - top["experts"]]),
            "experts": np.array([top["experts"]])}


def run_types(dtype: str | None, hardware: Hardware) -> tuple[str | None, str | None, str]:
    """The peak a run of ``dtype`` computes at, and the type its tensors keep.

    ``(dtype, None, "")`` where ``hardware`` has a peak for ``dtype`` (or ``dtype`` is
    None); else ``(None, dtype, note)``: the hardware's default peak is used, while static
    memory, the gradients and the activations keep ``dtype``'s size (an fp32 run on an
    Ascend NPU, which lists no fp32 peak, still keeps fp32 weights and gradients, as its
    Memory tab counts them), and ``note`` says so. :func:`perfkit.plan.calibrate`,
    :func:`perfkit.plan.predict` and :func:`perfkit.calc.estimate_step` all resolve the
    run's type this way (:attr:`perfkit.plan.CalibratedJob.tensor_dtype`).
    """
    if dtype is None or dtype in hardware.peak_flops:
        return dtype, None, ""
    return None, dtype, (f"{dtype} has no peak on {hardware.name}: its "
                         f"{hardware.default_dtype} peak is used, while static memory and "
                         f"the gradients keep {dtype}'s size")


def default_split(model: ModelSpec, parallel: ParallelConfig,
                  stage_layers: Sequence[int] | None) -> tuple[Sequence[int] | None, str]:
    """The stage layers to use, and what was assumed to get them.

    ``stage_layers`` as given; else, where ``num_layers`` does not divide by ``pp · vpp``,
    torchtitan's automatic split (:func:`perfkit.calc.pipeline.split_layers`: the
    embedding and the output head each count as one layer), with a note saying so; else
    None (the even split).
    """
    found = None if stage_layers is not None else split_when_uneven(
        model.num_layers, parallel.pp, parallel.vpp)
    return (stage_layers, "") if found is None else found


def validate_layout(model: ModelSpec, parallel: ParallelConfig, uneven: bool) -> None:
    """Raise :class:`~perfkit.errors.ParallelConfigError` for the first rule ``parallel``
    breaks on ``model``; with uneven stages, the even-split rules do not apply."""
    rules = parallel.problems(model)
    if uneven:
        rules = [r for r in rules if not r.startswith(_DIVISIBILITY)
                 and not r.startswith("recompute_layers: more than")]
    if rules:
        param, _, rule = rules[0].partition(": ")
        raise ParallelConfigError(param, rule, getattr(parallel, param, None), rules=rules)


def layout_step(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware, rates: Rates,
                *, stage_layers: Sequence[int] | None = None,
                selective_layers: int | Sequence[int] | None = None,
                comm_layers: int | Sequence[int] | None = None,
                activation_model: ActivationModel | None = None,
                dtype: str | None = None, static_scheme: str | None = None,
                tensor_dtype: str | None = None) -> dict[str, np.ndarray]:
    """The step model's step for one layout (1-element arrays, see
    :func:`perfkit.calc.timing.step_times`), with the stage rows it was priced on
    (``"rows"``).

    Parameters
    ----------
    model, parallel, hardware, rates
        What runs, how it is split, on what, at which rates.
    stage_layers, selective_layers, comm_layers
        Per stage, see :func:`stage_rows` (``stage_layers`` None: the even split).
    activation_model, dtype, static_scheme, tensor_dtype
        See :func:`perfkit.calc.timing.step_times`.
    """
    rows = stage_rows(model, parallel, stage_layers, selective_layers, comm_layers)
    params = stage_params(model, parallel, None if stage_layers is None
                          else tuple(int(x) for x in rows["layers"]))
    out = step_times(model, hardware, rates, layout_columns(parallel), rows, params=params,
                     activation_model=activation_model, dtype=dtype,
                     static_scheme=static_scheme, tensor_dtype=tensor_dtype,
                     rank_order=parallel.rank_order, recompute_ops=parallel.recompute_ops)
    out["rows"] = rows
    return out
