"""The search's pieces around its step model: a calculator applied once per distinct
input (:func:`lookup`), static and activation memory per candidate, the parameters of the
most loaded stage, and the ranked frame (fits first, then faster, then smaller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..calc import (
    ActivationModel,
    activation_memory,
    activation_per_layer,
    in_flight_micro_batches,
    static_memory,
)
from ..calc.memory import stage_parameters, zero_stage_scheme
from ..specs import ModelSpec, ParallelConfig
from .candidates import COLUMNS, REC_NAMES

__all__ = ["lookup", "config", "max_stage_params", "static_bytes", "activation_bytes",
           "ranked"]


def lookup(keys: dict[str, np.ndarray], fn: Callable[..., float]) -> np.ndarray:
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


def config(dp: float, tp: float, pp: float, cp: float, ep: float, etp: float,
           **kw: Any) -> ParallelConfig:
    """The :class:`~perfkit.ParallelConfig` of one candidate's sizes (``etp`` 0: as tp)."""
    return ParallelConfig(dp=int(dp), tp=int(tp), pp=int(pp), cp=int(cp), ep=int(ep),
                          expert_tp=int(etp) or None, **kw)


def max_stage_params(model: ModelSpec, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Dense and expert parameters per device of the most loaded stage, per candidate."""
    shard_keys = {name: c[name] for name in ("tp", "pp", "ep", "expert_tp")}
    split = {}
    for part in ("total", "experts"):
        split[part] = lookup(shard_keys, lambda t, p, e, x, part=part: max(
            stage_parameters(model, config(e * (x or t), t, p, 1, e, x,
                                           num_micro_batches=int(p))),
            key=lambda st: st["total"])[part])
    return {"dense": split["total"] - split["experts"], "experts": split["experts"]}


def ranked(c: dict[str, np.ndarray], results: dict[str, np.ndarray], static: np.ndarray,
           activation: np.ndarray, limit: float, include_rejected: bool) -> pd.DataFrame:
    """The result frame: fits first, then faster, then smaller; ``rank`` for those that fit."""
    memory = static + activation
    count = len(memory)
    fits = memory <= limit
    step = results["step_s"]
    order = np.lexsort((memory, step, ~fits))
    if not include_rejected:
        order = order[fits[order]]
    out = {name: c[name][order] for name in COLUMNS if name != "recompute"}
    out["recompute"] = REC_NAMES[c["recompute"][order]]
    results = {**results, "static_bytes": static, "activation_bytes": activation,
               "memory_bytes": memory, "memory_limit_bytes": np.full(count, limit),
               "fits": fits}
    out.update({name: values[order] for name, values in results.items()})
    frame = pd.DataFrame(out, columns=COLUMNS + list(results))
    fitting = int(frame["fits"].sum())
    frame["rank"] = pd.array(list(range(1, fitting + 1)) + [pd.NA] * (len(frame) - fitting),
                             dtype="Int64")
    return frame


def static_bytes(model: ModelSpec, c: dict[str, np.ndarray], scheme: str, m: np.ndarray,
                 pp: np.ndarray, dtype: str | None,
                 gradient_bytes: float | None = None) -> np.ndarray:
    """Static memory per distinct (dp, tp, pp, cp, ep, expert_tp, shard, ZeRO stage,
    gradient buffer), of a run of ``dtype`` whose reduction moves ``gradient_bytes`` per
    gradient element (``static_memory``'s; None: the scheme's size); a ZeRO-2/3 row under
    the scheme :func:`~perfkit.calc.memory.zero_stage_scheme` gives it, as
    :func:`perfkit.plan.predict` counts it."""
    keys = {name: c[name] for name in ("dp", "tp", "pp", "cp", "ep", "expert_tp",
                                        "optimizer_shard")}
    keys["z"] = c["zero_stage"] if "zero_stage" in c else np.zeros(len(m), dtype=np.int64)
    keys["g"] = (m > 1) | (pp > 1)

    def one(d, t, p, cc, e, x, os_, z, g) -> float:
        own = zero_stage_scheme(scheme, int(z))
        return static_memory(
            model, config(d, t, p, cc, e, x, num_micro_batches=int(p),
                          optimizer_shard=int(os_), zero_stage=int(z)),
            own, gradient_buffer=bool(g), dtype=dtype,
            gradient_bytes=gradient_bytes).total_bytes

    return lookup(keys, one)


def activation_bytes(model: ModelSpec, c: dict[str, np.ndarray],
                     activation_model: ActivationModel | None, convention: str,
                     n: np.ndarray, k: np.ndarray, v: np.ndarray,
                     recompute_ops: tuple[str, ...] | None = None) -> np.ndarray:
    """Activation bytes of the fullest stage (stage 0), as ``activation_memory``
    (``recompute_ops``: what the selective layers rerun, op by op); under a convention
    other than the seed's, NaN for a split the layers do not divide (counted by
    :func:`perfkit.plan.search_uneven.uneven_activation_bytes`)."""
    if convention != "seed":
        keys = {name: c[name] for name in
                ("dp", "tp", "pp", "cp", "ep", "expert_tp", "vpp", "micro_batch_size",
                 "num_micro_batches", "sequence_parallel", "recompute",
                 "full_layers_per_stage")}

        def total(d, t, p, cc, e, x, vv, b, mm, q, r, kk):
            name = REC_NAMES[r]
            par = config(d, t, p, cc, e, x, vpp=int(vv), micro_batch_size=int(b),
                         num_micro_batches=int(mm), sequence_parallel=bool(q),
                         recompute=name, recompute_layers=int(kk)
                         if name == "selective" and kk > 0 else None,
                         recompute_ops=recompute_ops if name == "selective" else None)
            return activation_memory(model, par, activation_model=activation_model,
                                     convention=convention).total_bytes

        # an uneven split's rows are counted on its own split (perfkit.plan.search_uneven)
        even = model.num_layers % (c["pp"] * c["vpp"]) == 0
        out = np.full(len(n), np.nan)
        if even.any():
            out[even] = lookup({name: values[even] for name, values in keys.items()}, total)
        return out
    keys = {"mbs": c["micro_batch_size"], "tp": c["tp"], "sp": c["sequence_parallel"],
            "mode": c["recompute"] == 1, "cp": c["cp"]}
    per_layer = lookup(keys, lambda b, t, q, sel, cc: activation_per_layer(
        model, int(b), int(t), bool(q), "selective" if sel else "none", activation_model,
        cp=int(cc), recompute_ops=recompute_ops if sel else None)[0])
    del keys["mode"]
    full_bytes = lookup(keys, lambda b, t, q, cc: activation_per_layer(
        model, int(b), int(t), bool(q), "full", activation_model, cp=int(cc))[0])
    inflight = lookup({name: c[name] for name in ("pp", "num_micro_batches", "vpp")},
                      lambda p, mm, vv: float(
                          in_flight_micro_batches(int(p), int(mm), int(vv))[:, 0].sum()))
    return inflight * (n / v) * ((n - k) * per_layer + k * full_bytes) / n

