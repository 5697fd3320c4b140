"""The candidates of the parallel-strategy search: every (dp, tp, pp, cp, ep, vpp,
micro-batching, SP, optimizer sharding, recompute) of a job that the layout rules allow,
as numpy columns (:func:`candidate_columns`) or a DataFrame (:func:`candidates`), and the
:class:`~perfkit.ParallelConfig` of one ranked row (:func:`to_parallel_config`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from ..calc.pipeline import split_layers
from ..errors import InvalidArgumentError, check_positive_int
from ..specs import ModelSpec, ParallelConfig

__all__ = ["SearchSpace", "candidates", "candidate_columns", "to_parallel_config", "COLUMNS",
           "REC_NAMES", "SHARDING", "split_of"]

_REC_CODE = {"none": 0, "selective": 1, "full": 2}
#: The layout columns of a candidate, in the order of :func:`candidates` and of the
#: search's frame.
COLUMNS = ["dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
           "num_micro_batches", "sequence_parallel", "optimizer_shard", "zero_stage",
           "recompute", "full_layers_per_stage"]
#: :class:`SearchSpace`'s ``optimizer_shard`` entries, by their code in the candidates.
SHARDING = {"off": 0, "dp": 1, "fsdp": 2}
#: The recompute mode of each code of :func:`candidate_columns`' ``recompute`` column.
REC_NAMES = np.array(["none", "selective", "full"], dtype=object)


@dataclass(frozen=True)
class SearchSpace:
    """What :func:`search` enumerates.

    Parameters
    ----------
    tp, pp, vpp, micro_batch_size : sequences of int, optional
        Allowed values; ``None`` = every power of two dividing the device count (tp at
        most ``max_tp``), for pp every divisor of the layers and every power of two
        dividing the device count (stages the layers do not divide are split as
        :func:`perfkit.plan.predict` splits them: :func:`split_of`), (1, 2, 4) for vpp and
        (1, 2, 4, 8) for the micro-batch size. Fewer micro-batches than stages are
        searched too (plain 1F1B runs them, at a larger bubble); interleaving needs a
        multiple of pp.
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
    optimizer_shard : sequence of {"off", "dp", "fsdp"}
        Optimizer sharding off; over the whole data-parallel group (ZeRO-1, Megatron's
        distributed optimizer); or ``"fsdp"``: the weights, gradients and optimizer
        state sharded over it (``zero_stage=3``: PyTorch FSDP's ``FULL_SHARD``, FSDP2,
        DeepSpeed ZeRO-3), whose static memory is counted sharded
        (:func:`perfkit.calc.memory.zero_stage_scheme`) and whose traffic the step model
        prices as :func:`perfkit.plan.predict` does, one gather of the weights per step.
        Default ``("off", "dp")``.
    recompute : sequence of {"none", "selective", "full"}
    full_layer_fractions : sequence of float
        Partial full recompute: besides ``recompute="selective"`` on every layer, try
        ``round(f · layers per stage)`` fully recomputed layers per stage for each ``f``.
    recompute_ops : str or sequence of str, optional
        What a selectively recomputed layer reruns, op by op
        (:attr:`perfkit.ParallelConfig.recompute_ops`: op names or a framework preset such
        as ``"torchtitan-op-sac"``); None: the activation model's ``selective`` kinds.
        Only the step model prices it.
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
    recompute_ops: str | Sequence[str] | None = None


def _powers_of_two_dividing(n: int, limit: int) -> list[int]:
    out, t = [], 1
    while t <= min(n, limit):
        if n % t == 0:
            out.append(t)
        t *= 2
    return out


@lru_cache(maxsize=4096)
def split_of(num_layers: int, pp: int, vpp: int = 1) -> tuple[int, ...] | None:
    """Decoder layers per pipeline rank: ``()`` where ``pp · vpp`` divides the layers (the
    even split), torchtitan's split (:func:`perfkit.calc.pipeline.split_layers`, what
    :func:`perfkit.plan.predict` assumes) where it does not, None where no split leaves
    every stage a layer."""
    if num_layers % (pp * vpp) == 0:
        return ()
    try:
        return split_layers(num_layers, pp, vpp)
    except InvalidArgumentError:
        return None


def _pp_values(space: SearchSpace, num_layers: int, num_devices: int) -> list[int]:
    """``space.pp``, else every divisor of the layers and every power of two dividing the
    devices that splits the layers unevenly (:func:`split_of`)."""
    if space.pp is not None:
        return [check_positive_int("pp", p) for p in space.pp]
    even = {p for p in range(1, num_layers + 1) if num_layers % p == 0}
    powers = {p for p in _powers_of_two_dividing(num_devices, num_layers)
              if split_of(num_layers, p)}
    return sorted(even | powers)


def _empty() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


def candidates(model: ModelSpec, num_devices: int, global_batch_size: int,
               space: SearchSpace | None = None,
               devices_per_node: int = 8) -> pd.DataFrame:
    """Every valid configuration of ``space``, one row each (no estimate yet).

    Columns: ``dp, tp, pp, cp, ep, expert_tp, vpp, micro_batch_size, num_micro_batches,
    sequence_parallel, optimizer_shard, zero_stage, recompute, full_layers_per_stage``
    (``expert_tp`` 0 means "same as tp"; ``zero_stage`` 3 for the ``"fsdp"`` rows). Rules
    are those of :meth:`perfkit.ParallelConfig.problems`, plus ``global_batch_size``
    divisible by ``dp × micro_batch_size``.
    """
    cols = candidate_columns(model, num_devices, global_batch_size, space, devices_per_node)
    if cols is None:
        return _empty()
    frame = pd.DataFrame({name: cols[name] for name in COLUMNS if name != "recompute"})
    frame.insert(COLUMNS.index("recompute"), "recompute", REC_NAMES[cols["recompute"]])
    return frame


def candidate_columns(model: ModelSpec, num_devices: int, global_batch_size: int,
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
    pps = _pp_values(space, L, n)
    etps = [0 if e is None else check_positive_int("expert_tp", e) for e in space.expert_tp]
    eps_all = (space.ep if space.ep is not None
               else _powers_of_two_dividing(model.num_experts, model.num_experts)) \
        if model.is_moe else (1,)
    base = []
    for tp, cp, pp in itertools.product(tps, cps, pps):
        if n % (tp * cp * pp) or split_of(L, pp) is None:
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
            for v in space.vpp:
                if v > 1 and (pp == 1 or m % pp or split_of(L, pp, v) is None):
                    continue
                base.extend((dp, tp, pp, cp, ep, etp, v, mbs, m) for ep, etp in expert)
    if not base:
        return None
    b = np.array(base, dtype=np.int64)
    extras = []
    for sp, os_, rec in itertools.product(space.sequence_parallel, space.optimizer_shard,
                                          space.recompute):
        if os_ not in SHARDING:
            raise InvalidArgumentError("optimizer_shard", "entries must be 'off', 'dp' or "
                                       "'fsdp'", os_)
        if rec not in _REC_CODE:
            raise InvalidArgumentError("recompute", "entries must be none/selective/full", rec)
        extras.append((int(sp), SHARDING[os_], _REC_CODE[rec], -1))
        if rec == "selective":
            extras.extend((int(sp), SHARDING[os_], 1, -2 - i)
                          for i in range(len(space.full_layer_fractions)))
    e = np.array(extras, dtype=np.int64)
    rows = np.repeat(b, len(e), axis=0)
    ext = np.tile(e, (len(b), 1))
    base_index = np.repeat(np.arange(len(b)), len(e))
    dp, tp, pp = rows[:, 0], rows[:, 1], rows[:, 2]
    sp, os_, rec, pick = ext[:, 0], ext[:, 1], ext[:, 2], ext[:, 3]
    per_stage = _fewest_layers(L, pp, rows[:, 6])
    full = np.where(rec == 2, per_stage, 0)
    fractions = np.asarray(space.full_layer_fractions, dtype=float)
    partial = pick <= -2
    if partial.any():
        full[partial] = np.rint(fractions[-2 - pick[partial]] * per_stage[partial])
    keep = ~((sp == 1) & (tp == 1))
    keep &= ~((os_ >= 1) & (dp == 1))
    keep &= ~(partial & ((full <= 0) | (full >= per_stage)))
    # the same row can come twice when two fractions round to the same layer count
    code = (((base_index * 2 + sp) * 3 + os_) * 3 + rec) * (L + 1) + full
    _, first = np.unique(np.where(keep, code, -1), return_index=True)
    chosen = np.sort(first[keep[first]])
    names = ["dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
             "num_micro_batches"]
    cols = {name: rows[chosen, i] for i, name in enumerate(names)}
    cols["sequence_parallel"] = sp[chosen].astype(bool)
    cols["optimizer_shard"] = np.where(os_[chosen] >= 1, dp[chosen], 1)
    cols["zero_stage"] = np.where(os_[chosen] == 2, 3, 0)
    cols["recompute"] = rec[chosen]
    cols["full_layers_per_stage"] = full[chosen]
    return cols


def _fewest_layers(num_layers: int, pp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """The layers of each candidate's lightest pipeline rank: ``L / pp`` for an even
    split, the fewest of :func:`split_of`'s for an uneven one (so that a partial
    recompute's layer count fits every stage)."""
    out = num_layers // pp
    uneven = num_layers % (pp * vpp) != 0
    if uneven.any():
        keys, inverse = np.unique(np.stack([pp[uneven], vpp[uneven]], axis=1), axis=0,
                                  return_inverse=True)
        fewest = np.array([min(split_of(num_layers, int(p), int(v)) or (0,))
                           for p, v in keys])
        out[uneven] = fewest[inverse.reshape(-1)]
    return out


def to_parallel_config(row: pd.Series) -> ParallelConfig:
    """The :class:`~perfkit.ParallelConfig` of one row of :func:`search`."""
    k = int(row["full_layers_per_stage"])
    rec = row["recompute"]
    ops = row.get("recompute_ops") or None
    expert_tp = int(row.get("expert_tp", 0) or 0)
    return ParallelConfig(
        dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), vpp=int(row["vpp"]),
        micro_batch_size=int(row["micro_batch_size"]),
        num_micro_batches=int(row["num_micro_batches"]),
        sequence_parallel=bool(row["sequence_parallel"]),
        optimizer_shard=int(row["optimizer_shard"]), zero_stage=int(row.get("zero_stage", 0)),
        recompute=rec,
        recompute_layers=k if rec == "selective" and k > 0 else None,
        cp=int(row.get("cp", 1)), ep=int(row.get("ep", 1)), expert_tp=expert_tp or None,
        recompute_ops=tuple(ops.split(",")) if ops and rec == "selective" else None)
