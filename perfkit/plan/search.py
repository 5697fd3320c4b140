"""Parallel-strategy search: every (dp, tp, pp, cp, ep, vpp, micro-batching, SP, optimizer
sharding, recompute) that fits, ranked by estimated step time.

The step model is :func:`perfkit.calc.estimate_step`'s, evaluated with numpy over all
candidates at once (tests check that every row equals ``estimate_step`` for the same
configuration). Quantities that depend on few inputs — parameters per device, static
memory, activation bytes per layer, in-flight micro-batches — come from the calculators
themselves, once per distinct input; only the final arithmetic is vectorised.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..calc import (
    ActivationModel,
    activation_memory,
    activation_per_layer,
    flops_per_token,
    in_flight_micro_batches,
    layer_forward_flops,
    static_memory,
)
from ..calc.memory import full_precision, scheme_gradient_bytes, stage_parameters
from ..calc.rates import Rates
from ..calc.timing import PART_NAMES, step_times
from ..errors import InvalidArgumentError, check_fraction, check_positive, check_positive_int
from ..specs import Hardware, ModelSpec, ParallelConfig
from .predict import DEFAULT_SIGMA, MEASURED_SIGMA, MODEL_UNCERTAINTY, PART_RATES, run_types

__all__ = ["SearchSpace", "search", "candidates", "to_parallel_config"]

_REC_CODE = {"none": 0, "selective": 1, "full": 2}
_REC_NAME = {v: k for k, v in _REC_CODE.items()}
_COLUMNS = ["dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
            "num_micro_batches", "sequence_parallel", "optimizer_shard", "recompute",
            "full_layers_per_stage"]


@dataclass(frozen=True)
class SearchSpace:
    """What :func:`search` enumerates.

    Parameters
    ----------
    tp, pp, vpp, micro_batch_size : sequences of int, optional
        Allowed values; ``None`` = every power of two dividing the device count (tp at
        most ``max_tp``), every divisor of the layers for pp, (1, 2, 4) for vpp and
        (1, 2, 4, 8) for the micro-batch size.
    max_tp : int, optional
        Largest tp (default: devices per node, so TP stays on the fast links).
    cp : sequence of int, optional
        Context-parallel sizes; ``None`` = every power of two up to ``max_cp`` that
        divides the devices and leaves the sequence a multiple of ``2·cp`` (Megatron's
        rule).
    max_cp : int
        Largest cp tried by default (8).
    ep : sequence of int, optional
        Expert-parallel sizes; ``None`` = for a MoE model every power of two dividing
        the experts and ``dp × cp`` (with ``expert_tp = tp``: Megatron's expert grid), for
        a dense model 1 only.
    expert_tp : sequence of int or None
        Tensor-parallel sizes inside the experts; ``None`` stands for "the same as tp"
        (default ``(None,)``; add ``1`` to try Megatron's ``--expert-tensor-parallel-size
        1``).
    sequence_parallel : sequence of bool
    optimizer_shard : sequence of {"off", "dp"}
        Optimizer sharding off, or over the whole data-parallel group.
    recompute : sequence of {"none", "selective", "full"}
    full_layer_fractions : sequence of float
        Partial full recompute: besides ``recompute="selective"`` on every layer, try
        ``round(f · layers per stage)`` fully recomputed layers per stage for each ``f``.
    """

    tp: Sequence[int] | None = None
    pp: Sequence[int] | None = None
    vpp: Sequence[int] = (1, 2, 4)
    micro_batch_size: Sequence[int] = (1, 2, 4, 8)
    max_tp: int | None = None
    sequence_parallel: Sequence[bool] = (False, True)
    optimizer_shard: Sequence[str] = ("off", "dp")
    recompute: Sequence[str] = ("none", "selective", "full")
    full_layer_fractions: Sequence[float] = (0.25, 0.5, 0.75)
    cp: Sequence[int] | None = None
    max_cp: int = 8
    ep: Sequence[int] | None = None
    expert_tp: Sequence[int | None] = (None,)


def _powers_of_two_dividing(n: int, limit: int) -> list[int]:
    out, t = [], 1
    while t <= min(n, limit):
        if n % t == 0:
            out.append(t)
        t *= 2
    return out


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=_COLUMNS)


def candidates(model: ModelSpec, num_devices: int, global_batch_size: int,
               space: SearchSpace | None = None,
               devices_per_node: int = 8) -> pd.DataFrame:
    """Every valid configuration of ``space``, one row each (no estimate yet).

    Columns: ``dp, tp, pp, cp, ep, expert_tp, vpp, micro_batch_size, num_micro_batches,
    sequence_parallel, optimizer_shard, recompute, full_layers_per_stage`` (``expert_tp``
    0 means "same as tp"). Rules are those of :meth:`perfkit.ParallelConfig.problems`,
    plus ``global_batch_size`` divisible by ``dp × micro_batch_size``.
    """
    cols = _candidate_columns(model, num_devices, global_batch_size, space, devices_per_node)
    if cols is None:
        return _empty()
    frame = pd.DataFrame({name: cols[name] for name in _COLUMNS if name != "recompute"})
    frame.insert(_COLUMNS.index("recompute"), "recompute", _REC_NAMES[cols["recompute"]])
    return frame


_REC_NAMES = np.array(["none", "selective", "full"], dtype=object)


def _candidate_columns(model: ModelSpec, num_devices: int, global_batch_size: int,
                       space: SearchSpace | None, devices_per_node: int
                       ) -> dict[str, np.ndarray] | None:
    """The candidates as numpy columns (``recompute`` as codes 0/1/2), or None."""
    space = space or SearchSpace()
    n = check_positive_int("num_devices", num_devices)
    gbs = check_positive_int("global_batch_size", global_batch_size)
    L, s = model.num_layers, model.seq_length
    max_tp = space.max_tp or devices_per_node
    tps = space.tp if space.tp is not None else _powers_of_two_dividing(n, max_tp)
    tps = [t for t in tps if n % t == 0 and model.num_attention_heads % t == 0
           and model.num_kv_heads % t == 0]
    cps = space.cp if space.cp is not None else \
        _powers_of_two_dividing(n, check_positive_int("max_cp", space.max_cp))
    cps = [c for c in cps if check_positive_int("cp", c) == 1 or s % (2 * c) == 0]
    pps = space.pp if space.pp is not None else [p for p in range(1, L + 1) if L % p == 0]
    etps = [0 if e is None else check_positive_int("expert_tp", e) for e in space.expert_tp]
    eps_all = (space.ep if space.ep is not None
               else _powers_of_two_dividing(model.num_experts, model.num_experts)) \
        if model.is_moe else (1,)
    base = []
    for tp, cp, pp in itertools.product(tps, cps, pps):
        if n % (tp * cp * pp) or L % pp:
            continue
        dp = n // (tp * cp * pp)
        expert = [(1, 0)]
        if model.is_moe:  # Megatron's expert grid: ep·expert_tp divides tp·cp·dp
            expert = sorted({(ep, 0 if etp == tp else etp) for ep in eps_all for etp in etps
                             if model.num_experts % ep == 0
                             and (tp * cp * dp) % (ep * (etp or tp)) == 0})
        for mbs in space.micro_batch_size:
            if gbs % (dp * mbs):
                continue
            m = gbs // (dp * mbs)
            if pp > 1 and m < pp:
                continue
            for v in space.vpp:
                if v > 1 and (pp == 1 or m % pp or L % (pp * v)):
                    continue
                base.extend((dp, tp, pp, cp, ep, etp, v, mbs, m) for ep, etp in expert)
    if not base:
        return None
    b = np.array(base, dtype=np.int64)
    extras = []
    for sp, os_, rec in itertools.product(space.sequence_parallel, space.optimizer_shard,
                                          space.recompute):
        if os_ not in ("off", "dp"):
            raise InvalidArgumentError("optimizer_shard", "entries must be 'off' or 'dp'", os_)
        if rec not in _REC_CODE:
            raise InvalidArgumentError("recompute", "entries must be none/selective/full", rec)
        extras.append((int(sp), int(os_ == "dp"), _REC_CODE[rec], -1))
        if rec == "selective":
            extras.extend((int(sp), int(os_ == "dp"), 1, -2 - i)
                          for i in range(len(space.full_layer_fractions)))
    e = np.array(extras, dtype=np.int64)
    rows = np.repeat(b, len(e), axis=0)
    ext = np.tile(e, (len(b), 1))
    base_index = np.repeat(np.arange(len(b)), len(e))
    dp, tp, pp = rows[:, 0], rows[:, 1], rows[:, 2]
    sp, os_, rec, pick = ext[:, 0], ext[:, 1], ext[:, 2], ext[:, 3]
    per_stage = L // pp
    full = np.where(rec == 2, per_stage, 0)
    fractions = np.asarray(space.full_layer_fractions, dtype=float)
    partial = pick <= -2
    if partial.any():
        full[partial] = np.rint(fractions[-2 - pick[partial]] * per_stage[partial])
    keep = ~((sp == 1) & (tp == 1))
    keep &= ~((os_ == 1) & (dp == 1))
    keep &= ~(partial & ((full <= 0) | (full >= per_stage)))
    # the same row can come twice when two fractions round to the same layer count
    code = (((base_index * 2 + sp) * 2 + os_) * 3 + rec) * (L + 1) + full
    _, first = np.unique(np.where(keep, code, -1), return_index=True)
    chosen = np.sort(first[keep[first]])
    names = ["dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
             "num_micro_batches"]
    cols = {name: rows[chosen, i] for i, name in enumerate(names)}
    cols["sequence_parallel"] = sp[chosen].astype(bool)
    cols["optimizer_shard"] = np.where(os_[chosen] == 1, dp[chosen], 1)
    cols["recompute"] = rec[chosen]
    cols["full_layers_per_stage"] = full[chosen]
    return cols


def search(model: ModelSpec, hardware: Hardware, num_devices: int, global_batch_size: int,
           memory_limit: float | None = None, *, space: SearchSpace | None = None,
           efficiency: float = 0.5, comm_efficiency: float = 0.8,
           dp_overlap: float = 0.0, tp_overlap: float = 0.0, pp_overlap: float = 0.0,
           ep_overlap: float = 0.0, cp_overlap: float = 0.0,
           overhead_s: float = 0.0, calibration: object | None = None,
           dtype: str | None = None, static_scheme: str = "mindspore",
           memory_reserve: float = 0.1, activation_model: ActivationModel | None = None,
           activation_convention: str = "seed", causal: bool = False,
           include_rejected: bool = False,
           gradient_bytes: float | None = None) -> pd.DataFrame:
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
    efficiency, comm_efficiency, dp_overlap, tp_overlap, pp_overlap, ep_overlap, \
cp_overlap, overhead_s
        The step model's terms (see :func:`perfkit.calc.estimate_step`).
    calibration : Calibration, optional
        From :func:`perfkit.plan.calibrate`: rank with the calibrated step model
        (:func:`perfkit.calc.timing.step_times` at the fitted rates — exactly what
        :func:`perfkit.plan.predict` gives for the same layout) instead of the first-order
        one; ``efficiency``, ``comm_efficiency``, the overlaps and ``overhead_s`` are then
        ignored, the calibration's activation model is the default (its tensors at the
        size of ``dtype`` when given: :meth:`~perfkit.calc.ActivationModel.in_dtype`),
        and the frame gains
        ``recompute_s``, ``optimizer_s``, ``low_s`` and ``high_s`` (the band of
        :func:`perfkit.plan.predict`); the ``*_comm_s`` columns are then each group's
        *exposed* time.
    dtype : str, optional
        The run's type. Without a calibration: its peak where ``hardware`` lists one, else
        the hardware's default peak (:func:`perfkit.plan.run_types`), while static memory,
        the gradients and the traffic keep ``dtype``'s size either way.
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
    gradient_bytes : float, optional
        Without a calibration: bytes per gradient element of the data-parallel reduction
        (:attr:`perfkit.Job.gradient_bytes`, what the profile's reductions move), which
        sizes the reduction and the gradients in static memory; None: the scheme's size
        (:func:`~perfkit.calc.memory.scheme_gradient_bytes`). With a calibration its
        ``Rates.gradient_bytes`` counts instead.

    Returns
    -------
    DataFrame
        One row per configuration: the parallel settings, ``compute_s, bubble_s,
        tp_comm_s, dp_comm_s, pp_comm_s, ep_comm_s, cp_comm_s, exposed_comm_s,
        overhead_s, step_s, tokens_per_second_per_device, mfu, static_bytes,
        activation_bytes, memory_bytes, memory_limit_bytes, fits`` and ``rank`` (1 =
        fastest that fits; ties go to the one using less memory), sorted by rank.
    """
    eff = check_fraction("efficiency", efficiency, allow_zero=False)
    ceff = check_fraction("comm_efficiency", comm_efficiency, allow_zero=False)
    overlaps = {"dp": check_fraction("dp_overlap", dp_overlap),
                "tp": check_fraction("tp_overlap", tp_overlap),
                "pp": check_fraction("pp_overlap", pp_overlap),
                "ep": check_fraction("ep_overlap", ep_overlap),
                "cp": check_fraction("cp_overlap", cp_overlap)}
    if static_scheme not in ("mindspore", "megatron"):
        raise InvalidArgumentError("static_scheme", "must be 'mindspore' or 'megatron'",
                                   static_scheme)
    reserve = check_fraction("memory_reserve", memory_reserve)
    limit = hardware.memory_bytes * (1 - reserve) if memory_limit is None \
        else check_positive("memory_limit", memory_limit)
    cols = _candidate_columns(model, num_devices, global_batch_size, space,
                              hardware.devices_per_node)
    if cols is None:
        raise InvalidArgumentError("num_devices", f"no valid configuration of {num_devices} "
                                   f"devices for global_batch_size={global_batch_size}")
    if calibration is not None:
        rates = getattr(calibration, "rates", None)
        if not isinstance(rates, Rates):
            raise InvalidArgumentError("calibration", "must come from perfkit.plan.calibrate",
                                       type(calibration).__name__)
        job = getattr(calibration, "job", None)
        am = activation_model or getattr(job, "activation_model", None)
        if activation_model is None and am is not None:  # the run's tensors in ``dtype``
            am = am.in_dtype(dtype)
        return _evaluate_calibrated(model, hardware, cols, calibration, rates, dtype,
                                    static_scheme, limit, am, activation_convention, causal,
                                    include_rejected)
    return _evaluate(model, hardware, cols, eff, ceff, overlaps, float(overhead_s), dtype,
                     static_scheme, limit, activation_model, activation_convention, causal,
                     include_rejected, gradient_bytes)


def _lookup(keys: dict[str, np.ndarray], fn) -> np.ndarray:
    """Apply ``fn`` once per distinct row of the ``keys`` columns and broadcast back.

    Each column is factorised on its own and the codes combined into one integer per row
    (mixed radix), so that finding the distinct rows is one ``np.unique`` on integers.
    """
    columns = list(keys.values())
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        column_codes, uniques = pd.factorize(column)
        code = code * max(len(uniques), 1) + column_codes
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    values = np.array([fn(*(column[i] for column in columns)) for i in first], dtype=float)
    return values[inverse.reshape(-1)]


def _config(dp: float, tp: float, pp: float, cp: float, ep: float, etp: float,
            **kw) -> ParallelConfig:
    return ParallelConfig(dp=int(dp), tp=int(tp), pp=int(pp), cp=int(cp), ep=int(ep),
                          expert_tp=int(etp) or None, **kw)


def _evaluate(model: ModelSpec, hw: Hardware, c: dict[str, np.ndarray], eff: float,
              ceff: float, overlaps: dict[str, float], overhead: float, dtype: str | None,
              scheme: str, limit: float, activation_model: ActivationModel | None,
              convention: str, causal: bool, include_rejected: bool,
              gradient_bytes: float | None = None) -> pd.DataFrame:
    # the run's type sizes memory and traffic; its peak, or the default one where the
    # hardware lists none for it (as plan.predict and plan.calibrate resolve it)
    run_dtype = dtype
    dtype, _tensor, _said = run_types(dtype, hw)
    peak = hw.peak(dtype)
    s, h, L = model.seq_length, model.hidden_size, model.num_layers
    num = {name: c[name].astype(float) for name in
           ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
            "num_micro_batches", "full_layers_per_stage")}
    dp, tp, pp, cp, ep = num["dp"], num["tp"], num["pp"], num["cp"], num["ep"]
    etp = np.where(num["expert_tp"] == 0, tp, num["expert_tp"])
    v, mbs, m, k = num["vpp"], num["micro_batch_size"], num["num_micro_batches"], \
        num["full_layers_per_stage"]
    sp = c["sequence_parallel"]
    rec = c["recompute"]
    n = L / pp
    am = ActivationModel() if activation_model is None else activation_model
    # as estimate_step: only attention-core selective recompute costs GEMM FLOPs
    recomputes_core = am.recomputes_attention_core
    selective = np.where(rec == 1, n - k, 0.0)
    tokens = mbs * m * s / cp  # tokens each rank runs per step
    compute = _compute_seconds(model, causal, n, k, selective, tp, tokens,
                               recomputes_core) / (peak * eff)
    bubble = (pp - 1) / (v * m) * compute
    # communication volumes (calc.comm_volume's formulas) and links (calc.estimate_step's)
    shard_keys = {name: c[name] for name in ("tp", "pp", "ep", "expert_tp")}
    split = {}
    for part in ("total", "experts"):
        split[part] = _lookup(shard_keys, lambda t, p, e, x, part=part: max(
            stage_parameters(model, _config(e * (x or t), t, p, 1, e, x,
                                            num_micro_batches=int(p))),
            key=lambda st: st["total"])[part])
    dense_params = split["total"] - split["experts"]
    fp32 = full_precision(run_dtype)  # as estimate_step: 4-byte activations and gradients
    bsh = mbs * (s / cp) * h * (4.0 if fp32 else 2.0)
    # the reduction's size as the profile records it, else the scheme's (estimate_step's)
    grad_bytes = float(gradient_bytes) if gradient_bytes is not None \
        else scheme_gradient_bytes(scheme, run_dtype)
    group = dp * cp
    expert_group = tp * cp * dp / (ep * etp)
    # an all-reduce of the gradients, or (optimizer sharding) their reduce-scatter and the
    # all-gather of the updated weights in their own size
    per_param = np.where(c["optimizer_shard"] > 1, grad_bytes + (4.0 if fp32 else 2.0),
                         2 * grad_bytes)
    dp_bytes = np.where(group > 1, (group - 1) / group * dense_params * per_param, 0.0)
    dp_bytes += np.where(expert_group > 1, (expert_group - 1) / np.maximum(expert_group, 1)
                         * split["experts"] * per_param, 0.0)
    tp_bytes = np.where(tp > 1, m * (4 * n + 2 * k) * bsh * 2 * (tp - 1) / tp, 0.0)
    pp_bytes = np.where(pp > 1, 2 * m * v * bsh / tp, 0.0)  # scatter/gather over tp
    if model.is_moe:
        moe0 = n - np.minimum(model.first_dense_layers, n)
        ep_count = (4 * moe0 + 2 * np.minimum(k, moe0)) * m
        ep_bytes = np.where(ep > 1, ep_count * model.moe_top_k * bsh / np.where(sp, tp, 1.0)
                            * (ep - 1) / ep, 0.0)
    else:
        ep_bytes = np.zeros(len(dp))
    kv_width = model.num_kv_heads * (model.qk_head_dim + model.value_head_dim)
    kv_bytes = mbs * s * kv_width / tp * 2.0
    cp_bytes = np.where(cp > 1, (3 * n + k) * m * kv_bytes * (cp - 1) / cp, 0.0)
    dpn = hw.devices_per_node

    def link(span: np.ndarray) -> np.ndarray:
        return np.where(span <= dpn, hw.intra_node_bandwidth, hw.inter_node_bandwidth) * ceff

    times = {"tp": tp_bytes / link(tp), "dp": dp_bytes / link(tp * cp * dp),
             "pp": pp_bytes / link(dp * tp * pp * cp), "ep": ep_bytes / link(etp * ep),
             "cp": cp_bytes / link(tp * cp)}
    exposed = sum(times[key] * (1 - overlaps[key]) for key in times)
    step = compute + bubble + exposed + overhead
    static = _static(model, c, scheme, m, pp, run_dtype, gradient_bytes)
    activation = _activation(model, c, activation_model, convention, n, k, v)
    memory = static + activation
    per_device = dp * mbs * m * s / (step * dp * tp * pp * cp)
    fits = memory <= limit
    order = np.lexsort((memory, step, ~fits))  # fits first, then faster, then smaller
    if not include_rejected:
        order = order[fits[order]]
    out = {name: c[name][order] for name in _COLUMNS if name != "recompute"}
    out["recompute"] = _REC_NAMES[rec[order]]
    results = {"compute_s": compute, "bubble_s": bubble, "tp_comm_s": times["tp"],
               "dp_comm_s": times["dp"], "pp_comm_s": times["pp"], "ep_comm_s": times["ep"],
               "cp_comm_s": times["cp"], "exposed_comm_s": exposed,
               "overhead_s": np.full(len(dp), overhead), "step_s": step,
               "tokens_per_second_per_device": per_device,
               "mfu": flops_per_token(model, causal) * per_device / peak,
               "static_bytes": static, "activation_bytes": activation,
               "memory_bytes": memory, "memory_limit_bytes": np.full(len(dp), limit),
               "fits": fits}
    out.update({name: values[order] for name, values in results.items()})
    frame = pd.DataFrame(out, columns=_COLUMNS + list(results))
    ranked = int(frame["fits"].sum())
    frame["rank"] = pd.array(list(range(1, ranked + 1)) + [pd.NA] * (len(frame) - ranked),
                             dtype="Int64")
    return frame


def _max_stage_params(model: ModelSpec, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Dense and expert parameters per device of the most loaded stage, per candidate."""
    shard_keys = {name: c[name] for name in ("tp", "pp", "ep", "expert_tp")}
    split = {}
    for part in ("total", "experts"):
        split[part] = _lookup(shard_keys, lambda t, p, e, x, part=part: max(
            stage_parameters(model, _config(e * (x or t), t, p, 1, e, x,
                                            num_micro_batches=int(p))),
            key=lambda st: st["total"])[part])
    return {"dense": split["total"] - split["experts"], "experts": split["experts"]}


def _evaluate_calibrated(model: ModelSpec, hw: Hardware, c: dict[str, np.ndarray],
                         calibration: object, rates: Rates, dtype: str | None, scheme: str,
                         limit: float, activation_model: ActivationModel | None,
                         convention: str, causal: bool, include_rejected: bool
                         ) -> pd.DataFrame:
    """Every candidate through the calibrated step model, with the band of ``predict``.

    Without ``dtype`` the calibrating run's type sizes static memory and the gradients
    (:attr:`perfkit.plan.CalibratedJob.run_dtype`: an fp32 run on a device with no fp32
    peak keeps them fp32), and ``rates.gradient_bytes`` (the profile's reductions) sizes
    the gradient buffer as it sizes the reduction, as :func:`perfkit.plan.predict` does."""
    tensor = None if dtype is not None else getattr(getattr(calibration, "job", None),
                                                    "run_dtype", None)
    out = step_times(model, hw, rates, c, params=_max_stage_params(model, c),
                     activation_model=activation_model, dtype=dtype, static_scheme=scheme,
                     tensor_dtype=tensor)
    step = out["step_s"]
    measured = getattr(calibration, "measured", frozenset())
    terms = [np.full(len(step), float(getattr(calibration, "residual", 0.0))),
             np.full(len(step), MODEL_UNCERTAINTY)]
    for name in PART_NAMES:
        sigma = MEASURED_SIGMA if PART_RATES[name] in measured else DEFAULT_SIGMA
        terms.append(sigma * out[name] / step)
    u = np.sqrt(np.sum(np.square(terms), axis=0))
    pp, v, k = (c[name].astype(float) for name in ("pp", "vpp", "full_layers_per_stage"))
    n = model.num_layers / pp
    static = _static(model, c, scheme, c["num_micro_batches"].astype(float), pp,
                     tensor or dtype, rates.gradient_bytes)
    activation = _activation(model, c, activation_model, convention, n, k, v)
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
               "mfu": flops_per_token(model, causal) * per_device / hw.peak(dtype)}
    return _ranked(c, results, static, activation, limit, include_rejected)


def _ranked(c: dict[str, np.ndarray], results: dict[str, np.ndarray], static: np.ndarray,
            activation: np.ndarray, limit: float, include_rejected: bool) -> pd.DataFrame:
    """The result frame: fits first, then faster, then smaller; ``rank`` for those that fit."""
    memory = static + activation
    count = len(memory)
    fits = memory <= limit
    step = results["step_s"]
    order = np.lexsort((memory, step, ~fits))
    if not include_rejected:
        order = order[fits[order]]
    out = {name: c[name][order] for name in _COLUMNS if name != "recompute"}
    out["recompute"] = _REC_NAMES[c["recompute"][order]]
    results = {**results, "static_bytes": static, "activation_bytes": activation,
               "memory_bytes": memory, "memory_limit_bytes": np.full(count, limit),
               "fits": fits}
    out.update({name: values[order] for name, values in results.items()})
    frame = pd.DataFrame(out, columns=_COLUMNS + list(results))
    ranked = int(frame["fits"].sum())
    frame["rank"] = pd.array(list(range(1, ranked + 1)) + [pd.NA] * (len(frame) - ranked),
                             dtype="Int64")
    return frame


def _compute_seconds(model: ModelSpec, causal: bool, n: np.ndarray, k: np.ndarray,
                     selective: np.ndarray, tp: np.ndarray, tokens: np.ndarray,
                     recomputes_core: bool) -> np.ndarray:
    """Per-device FLOPs of the slowest stage (estimate_step's ``_stage_flops``)."""
    logits = 2.0 * model.hidden_size * model.vocab_size
    if not model.is_moe or not model.first_dense_layers:
        parts = layer_forward_flops(model, causal)
        core = parts["core"] if recomputes_core else 0.0
        per_token = 3 * n * parts["total"] + k * parts["total"] + selective * core + 3 * logits
        return tokens * per_token / tp
    dense = layer_forward_flops(model, causal, layer="dense")
    moe = layer_forward_flops(model, causal, layer="moe")
    fd, L = model.first_dense_layers, model.num_layers

    def stage(nd: np.ndarray, last: np.ndarray) -> np.ndarray:
        nm = n - nd
        work = nd * dense["total"] + nm * moe["total"]
        core = (nd * dense["core"] + nm * moe["core"]) / n if recomputes_core else 0.0
        per_token = (3 + k / n) * work + selective * core + np.where(last, 3 * logits, 0.0)
        return tokens * per_token / tp

    first = stage(np.minimum(fd, n), n == L)
    last = stage(np.maximum(0.0, fd - (L - n)), np.ones(len(n), dtype=bool))
    return np.maximum(first, last)


def _static(model: ModelSpec, c: dict[str, np.ndarray], scheme: str, m: np.ndarray,
            pp: np.ndarray, dtype: str | None,
            gradient_bytes: float | None = None) -> np.ndarray:
    """Static memory per distinct (dp, tp, pp, cp, ep, expert_tp, shard, gradient buffer),
    of a run of ``dtype`` whose reduction moves ``gradient_bytes`` per gradient element
    (``static_memory``'s; None: the scheme's size)."""
    keys = {name: c[name] for name in ("dp", "tp", "pp", "cp", "ep", "expert_tp",
                                         "optimizer_shard")}
    keys["g"] = (m > 1) | (pp > 1)
    return _lookup(keys, lambda d, t, p, cc, e, x, os_, g: static_memory(
        model, _config(d, t, p, cc, e, x, num_micro_batches=int(p), optimizer_shard=int(os_)),
        scheme, gradient_buffer=bool(g), dtype=dtype,
        gradient_bytes=gradient_bytes).total_bytes)


def _activation(model: ModelSpec, c: dict[str, np.ndarray],
                activation_model: ActivationModel | None, convention: str, n: np.ndarray,
                k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Activation bytes of the fullest stage (stage 0), as ``activation_memory``."""
    if convention != "seed":
        keys = {name: c[name] for name in
                ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
                 "num_micro_batches", "sequence_parallel", "recompute",
                 "full_layers_per_stage")}

        def total(d, t, p, cc, e, x, vv, b, mm, q, r, kk):
            name = _REC_NAMES[r]
            par = _config(d, t, p, cc, e, x, vpp=int(vv), micro_batch_size=int(b),
                          num_micro_batches=int(mm), sequence_parallel=bool(q),
                          recompute=name, recompute_layers=int(kk)
                          if name == "selective" and kk > 0 else None)
            return activation_memory(model, par, activation_model=activation_model,
                                     convention=convention).total_bytes

        return _lookup(keys, total)
    keys = {"mbs": c["micro_batch_size"], "tp": c["tp"], "sp": c["sequence_parallel"],
            "mode": c["recompute"] == 1, "cp": c["cp"]}
    per_layer = _lookup(keys, lambda b, t, q, sel, cc: activation_per_layer(
        model, int(b), int(t), bool(q), "selective" if sel else "none", activation_model,
        cp=int(cc))[0])
    del keys["mode"]
    full_bytes = _lookup(keys, lambda b, t, q, cc: activation_per_layer(
        model, int(b), int(t), bool(q), "full", activation_model, cp=int(cc))[0])
    inflight = _lookup({name: c[name] for name in ("pp", "num_micro_batches", "vpp")},
                       lambda p, mm, vv: float(
                           in_flight_micro_batches(int(p), int(mm), int(vv))[:, 0].sum()))
    return inflight * (n / v) * ((n - k) * per_layer + k * full_bytes) / n


def to_parallel_config(row: pd.Series) -> ParallelConfig:
    """The :class:`~perfkit.ParallelConfig` of one row of :func:`search`."""
    k = int(row["full_layers_per_stage"])
    rec = row["recompute"]
    expert_tp = int(row.get("expert_tp", 0) or 0)
    return ParallelConfig(
        dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), vpp=int(row["vpp"]),
        micro_batch_size=int(row["micro_batch_size"]),
        num_micro_batches=int(row["num_micro_batches"]),
        sequence_parallel=bool(row["sequence_parallel"]),
        optimizer_shard=int(row["optimizer_shard"]), recompute=rec,
        recompute_layers=k if rec == "selective" and k > 0 else None,
        cp=int(row.get("cp", 1)), ep=int(row.get("ep", 1)), expert_tp=expert_tp or None)
