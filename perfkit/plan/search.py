"""Parallel-strategy search: every (dp, tp, pp, vpp, micro-batching, SP, optimizer sharding,
recompute) that fits, ranked by estimated step time.

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
    activation_per_layer,
    flops_per_token,
    in_flight_micro_batches,
    layer_forward_flops,
    parameters_per_device,
    static_memory,
)
from ..errors import InvalidArgumentError, check_fraction, check_positive, check_positive_int
from ..specs import Hardware, ModelSpec, ParallelConfig

__all__ = ["SearchSpace", "search", "candidates", "to_parallel_config"]

_REC_CODE = {"none": 0, "selective": 1, "full": 2}
_REC_NAME = {v: k for k, v in _REC_CODE.items()}


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


def _powers_of_two_dividing(n: int, limit: int) -> list[int]:
    out, t = [], 1
    while t <= min(n, limit):
        if n % t == 0:
            out.append(t)
        t *= 2
    return out


def candidates(model: ModelSpec, num_devices: int, global_batch_size: int,
               space: SearchSpace | None = None,
               devices_per_node: int = 8) -> pd.DataFrame:
    """Every valid configuration of ``space``, one row each (no estimate yet).

    Columns: ``dp, tp, pp, vpp, micro_batch_size, num_micro_batches, sequence_parallel,
    optimizer_shard, recompute, full_layers_per_stage``. Rules are those of
    :meth:`perfkit.ParallelConfig.problems`, plus ``global_batch_size`` divisible by
    ``dp × micro_batch_size``.
    """
    space = space or SearchSpace()
    n = check_positive_int("num_devices", num_devices)
    gbs = check_positive_int("global_batch_size", global_batch_size)
    L = model.num_layers
    max_tp = space.max_tp or devices_per_node
    tps = space.tp if space.tp is not None else _powers_of_two_dividing(n, max_tp)
    tps = [t for t in tps if n % t == 0 and model.num_attention_heads % t == 0
           and model.num_kv_heads % t == 0]
    base = []
    for tp in tps:
        pps = space.pp if space.pp is not None else [p for p in range(1, L + 1) if L % p == 0]
        for pp in pps:
            if (n // tp) % pp or L % pp:
                continue
            dp = n // (tp * pp)
            for mbs in space.micro_batch_size:
                if gbs % (dp * mbs):
                    continue
                m = gbs // (dp * mbs)
                if pp > 1 and m < pp:
                    continue
                for v in space.vpp:
                    if v > 1 and (pp == 1 or m % pp or L % (pp * v)):
                        continue
                    base.append((dp, tp, pp, v, mbs, m))
    if not base:
        return pd.DataFrame(columns=["dp", "tp", "pp", "vpp", "micro_batch_size",
                                     "num_micro_batches", "sequence_parallel",
                                     "optimizer_shard", "recompute", "full_layers_per_stage"])
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
    frame = pd.DataFrame(rows, columns=["dp", "tp", "pp", "vpp", "micro_batch_size",
                                        "num_micro_batches"])
    frame["sequence_parallel"] = ext[:, 0].astype(bool)
    frame["optimizer_shard"] = np.where(ext[:, 1] == 1, frame["dp"], 1)
    frame["recompute"] = ext[:, 2]
    per_stage = L // frame["pp"].to_numpy()
    full = np.where(ext[:, 2] == 2, per_stage, 0)
    fractions = np.asarray(space.full_layer_fractions, dtype=float)
    pick = ext[:, 3]
    partial = pick <= -2
    if partial.any():
        full[partial] = np.rint(fractions[-2 - pick[partial]] * per_stage[partial])
    frame["full_layers_per_stage"] = full
    keep = ~(frame["sequence_parallel"] & (frame["tp"] == 1))
    keep &= ~((ext[:, 1] == 1) & (frame["dp"] == 1))
    keep &= ~(partial & ((full <= 0) | (full >= per_stage)))
    frame = frame[keep.to_numpy()]
    frame = frame.drop_duplicates(ignore_index=True)
    frame["recompute"] = frame["recompute"].map(_REC_NAME)
    return frame


def search(model: ModelSpec, hardware: Hardware, num_devices: int, global_batch_size: int,
           memory_limit: float | None = None, *, space: SearchSpace | None = None,
           efficiency: float = 0.5, comm_efficiency: float = 0.8,
           dp_overlap: float = 0.0, tp_overlap: float = 0.0, pp_overlap: float = 0.0,
           overhead_s: float = 0.0, calibration: object | None = None,
           dtype: str | None = None, static_scheme: str = "mindspore",
           memory_reserve: float = 0.1, activation_model: ActivationModel | None = None,
           include_rejected: bool = False) -> pd.DataFrame:
    """Rank every configuration that fits by estimated step time.

    Parameters
    ----------
    model, hardware : ModelSpec, Hardware
    num_devices, global_batch_size : int
        The job: devices and sequences per step.
    memory_limit : float, optional
        Usable bytes per device; default ``hardware.memory_bytes × (1 − memory_reserve)``.
    space : SearchSpace, optional
        What to enumerate (see :class:`SearchSpace`).
    efficiency, comm_efficiency, dp_overlap, tp_overlap, pp_overlap, overhead_s
        The step model's terms (see :func:`perfkit.calc.estimate_step`).
    calibration : Calibration, optional
        From :func:`perfkit.plan.calibrate`: its efficiency, comm_efficiency and
        overhead replace the three arguments.
    static_scheme : {"mindspore", "megatron"}
        Static-memory accounting.
    activation_model : ActivationModel, optional
        Activation accounting (default: the seed's table).
    include_rejected : bool
        Keep configurations that do not fit (``fits == False``) at the bottom.

    Returns
    -------
    DataFrame
        One row per configuration: the parallel settings, ``compute_s, bubble_s,
        tp_comm_s, dp_comm_s, pp_comm_s, exposed_comm_s, overhead_s, step_s,
        tokens_per_second_per_device, mfu, static_bytes, activation_bytes, memory_bytes,
        memory_limit_bytes, fits`` and ``rank`` (1 = fastest that fits; ties go to the
        one using less memory), sorted by rank.
    """
    if calibration is not None:
        efficiency = calibration.efficiency
        comm_efficiency = calibration.comm_efficiency
        overhead_s = calibration.overhead_s
    eff = check_fraction("efficiency", efficiency, allow_zero=False)
    ceff = check_fraction("comm_efficiency", comm_efficiency, allow_zero=False)
    overlaps = {"dp": check_fraction("dp_overlap", dp_overlap),
                "tp": check_fraction("tp_overlap", tp_overlap),
                "pp": check_fraction("pp_overlap", pp_overlap)}
    if static_scheme not in ("mindspore", "megatron"):
        raise InvalidArgumentError("static_scheme", "must be 'mindspore' or 'megatron'",
                                   static_scheme)
    reserve = check_fraction("memory_reserve", memory_reserve)
    limit = hardware.memory_bytes * (1 - reserve) if memory_limit is None \
        else check_positive("memory_limit", memory_limit)
    frame = candidates(model, num_devices, global_batch_size, space, hardware.devices_per_node)
    if frame.empty:
        raise InvalidArgumentError("num_devices", f"no valid configuration of {num_devices} "
                                   f"devices for global_batch_size={global_batch_size}")
    return _evaluate(model, hardware, frame, eff, ceff, overlaps, float(overhead_s), dtype,
                     static_scheme, limit, activation_model, include_rejected)


def _lookup(keys: pd.DataFrame, fn) -> np.ndarray:
    """Apply ``fn`` once per distinct row of ``keys`` and broadcast back."""
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(keys))
    values = np.array([fn(*u) for u in uniques], dtype=float)
    return values[codes]


def _evaluate(model: ModelSpec, hw: Hardware, f: pd.DataFrame, eff: float, ceff: float,
              overlaps: dict[str, float], overhead: float, dtype: str | None,
              scheme: str, limit: float, activation_model: ActivationModel | None,
              include_rejected: bool) -> pd.DataFrame:
    peak = hw.peak(dtype)
    s, h, L = model.seq_length, model.hidden_size, model.num_layers
    dp = f["dp"].to_numpy(float)
    tp = f["tp"].to_numpy(float)
    pp = f["pp"].to_numpy(float)
    v = f["vpp"].to_numpy(float)
    mbs = f["micro_batch_size"].to_numpy(float)
    m = f["num_micro_batches"].to_numpy(float)
    sp = f["sequence_parallel"].to_numpy(bool)
    k = f["full_layers_per_stage"].to_numpy(float)
    rec = f["recompute"].to_numpy()
    n = L / pp
    parts = layer_forward_flops(model)
    am = ActivationModel() if activation_model is None else activation_model
    # as estimate_step: only attention-core selective recompute costs GEMM FLOPs
    layer_fwd = parts["total"]
    core = parts["core"] if "attention_core" in am.selective and not am.flash_attention \
        else 0.0
    selective = np.where(rec == "selective", n - k, 0.0)
    logits = 2.0 * h * model.vocab_size
    # compute: the last stage (its layers, their recompute, and the logits) sets the pace
    per_token = 3 * n * layer_fwd + k * layer_fwd + selective * core + 3 * logits
    compute = mbs * m * s * per_token / tp / (peak * eff)
    bubble = (pp - 1) / (v * m) * compute
    # communication volumes (calc.comm_volume's formulas) and links (calc.estimate_step's)
    params = _lookup(f[["tp", "pp"]], lambda t, p: parameters_per_device(
        model, ParallelConfig(tp=int(t), pp=int(p), num_micro_batches=int(p))))
    bsh = mbs * s * h * 2.0
    grad_bytes = 4.0 if scheme == "megatron" else 2.0  # as estimate_step's default
    dp_bytes = np.where(dp > 1, 2 * (dp - 1) / dp * params * grad_bytes, 0.0)
    tp_bytes = np.where(tp > 1, m * (4 * n + 2 * k) * bsh * 2 * (tp - 1) / tp, 0.0)
    pp_bytes = np.where(pp > 1, 2 * m * v * bsh / np.where(sp, tp, 1.0), 0.0)
    dpn = hw.devices_per_node

    def link(span: np.ndarray) -> np.ndarray:
        return np.where(span <= dpn, hw.intra_node_bandwidth, hw.inter_node_bandwidth) * ceff

    times = {"tp": tp_bytes / link(tp), "dp": dp_bytes / link(tp * dp),
             "pp": pp_bytes / link(dp * tp * pp)}
    exposed = sum(times[key] * (1 - overlaps[key]) for key in times)
    step = compute + bubble + exposed + overhead
    # memory: static per distinct (tp, pp, shard, gradient buffer), activations per stage 0
    grad_buffer = (m > 1) | (pp > 1)
    keys = f[["tp", "pp", "optimizer_shard"]].assign(g=grad_buffer)
    static = _lookup(keys, lambda t, p, os_, g: static_memory(
        model, ParallelConfig(dp=int(os_), tp=int(t), pp=int(p), num_micro_batches=int(p),
                              optimizer_shard=int(os_)), scheme,
        gradient_buffer=bool(g)).total_bytes)
    mode = np.where(rec == "selective", "selective", "none")
    act_keys = pd.DataFrame({"mbs": mbs, "tp": tp, "sp": sp, "mode": mode})
    per_layer = _lookup(act_keys, lambda b, t, q, md: activation_per_layer(
        model, int(b), int(t), bool(q), md, activation_model)[0])
    full_bytes = _lookup(act_keys[["mbs", "tp", "sp"]], lambda b, t, q: activation_per_layer(
        model, int(b), int(t), bool(q), "full", activation_model)[0])
    inflight = _lookup(f[["pp", "num_micro_batches", "vpp"]], lambda p, mm, vv: float(
        in_flight_micro_batches(int(p), int(mm), int(vv))[:, 0].sum()))
    activation = inflight * (n / v) * ((n - k) * per_layer + k * full_bytes) / n
    memory = static + activation
    tokens = dp * mbs * m * s / (step * dp * tp * pp)
    out = f.copy()
    for name, col in (("compute_s", compute), ("bubble_s", bubble), ("tp_comm_s", times["tp"]),
                      ("dp_comm_s", times["dp"]), ("pp_comm_s", times["pp"]),
                      ("exposed_comm_s", exposed), ("overhead_s", np.full(len(f), overhead)),
                      ("step_s", step), ("tokens_per_second_per_device", tokens),
                      ("mfu", flops_per_token(model) * tokens / peak),
                      ("static_bytes", static), ("activation_bytes", activation),
                      ("memory_bytes", memory), ("memory_limit_bytes", np.full(len(f), limit))):
        out[name] = col
    out["fits"] = memory <= limit
    if not include_rejected:
        out = out[out["fits"]]
    out = out.sort_values(["fits", "step_s", "memory_bytes"], ascending=[False, True, True],
                          kind="stable")
    out["rank"] = np.where(out["fits"], np.arange(1, len(out) + 1), pd.NA)
    return out.reset_index(drop=True)


def to_parallel_config(row: pd.Series) -> ParallelConfig:
    """The :class:`~perfkit.ParallelConfig` of one row of :func:`search`."""
    k = int(row["full_layers_per_stage"])
    rec = row["recompute"]
    return ParallelConfig(
        dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), vpp=int(row["vpp"]),
        micro_batch_size=int(row["micro_batch_size"]),
        num_micro_batches=int(row["num_micro_batches"]),
        sequence_parallel=bool(row["sequence_parallel"]),
        optimizer_shard=int(row["optimizer_shard"]), recompute=rec,
        recompute_layers=k if rec == "selective" and k > 0 else None)

