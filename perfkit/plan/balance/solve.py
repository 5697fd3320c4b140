"""The integer program that places layers and recompute per stage (:func:`balance_pipeline`).

Given per-layer-type forward times and memories per recompute mode, choose how many layers
of each type, with which recompute mode, go to each (virtual chunk, stage) so that the
pipeline time is minimal and every stage fits its memory.

Model (scipy ``milp`` / HiGHS):

* integer ``x[t, r, v, s] >= 0``: layers of type ``t`` with recompute ``r`` in chunk ``v``
  of stage ``s``; ``Σ_{r,v,s} x[t,r,v,s] = count_t``; every chunk holds at least one layer;
* per stage, work per micro-batch ``W_s = Σ_{t,r,v} x·(fwd_t + bwd_{t,r})`` plus the head
  (first stage) and tail (last stage); ``bwd_{t,r} = (1 + coef_r)·2·fwd_t`` unless given
  (SAPP ``compute_internal_time``, ``backward_default_ratio = 2``);
* ``M >= W_s`` for every stage and ``K >= w_{s,c}`` (forward + backward of one chunk)
  for every chunk; pipeline time ``T >= m·M + (p − 1)·K``: ``m`` steady slots of the
  slowest stage plus ``p − 1`` warm-up/cool-down slots of the slowest chunk — for equal
  stages and chunks ``T = t·(m + (p−1)/v)``, the 1F1B / interleaved schedule length of
  Narayanan et al. 2021;
* memory of stage ``s``: ``Σ x·(mem_param_t + mem_act_{t,r}·n[v,s]) + head/tail + constant
  <= memory_limit`` with ``n[v,s]`` SAPP's in-flight micro-batch counts
  (:func:`perfkit.calc.in_flight_micro_batches`);
* minimise ``T`` (plus ``1e-4 ×`` the total work, so that stages off the critical path
  do not recompute for nothing).

SAPP (``toolkit/pipeline_balance/sapp/sapp_solver.py``, approach B) minimises a per-slot
stage time (forward of one chunk plus backward of any chunk); the schedule length above
balances the same quantities and also prices the warm-up and cool-down.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...calc import in_flight_micro_batches
from ...errors import InvalidArgumentError, check_positive
from ...errors import check_positive_int as _check_int
from .layers import RECOMPUTE_TYPES, BalanceError, LayerType
from .result import BalancePlan, _per_stage_list

__all__ = ["balance_pipeline"]


def balance_pipeline(layers: Sequence[LayerType], pp: int, vpp: int, num_micro_batches: int,
                     memory_limit: float, constant_memory: float = 0.0,
                     less_memory: bool = False, time_limit_s: float = 60.0) -> BalancePlan:
    """Place layers and recompute per stage to minimise pipeline time under a memory limit.

    Parameters
    ----------
    layers : sequence of LayerType
        Body layer types and at most one head and one tail (see
        :func:`~perfkit.plan.balance.layers_from_model` and
        :func:`~perfkit.plan.balance.read_sapp_layers`).
    pp, vpp, num_micro_batches : int
        Stages, virtual chunks per stage, micro-batches per step (``m >= pp``).
    memory_limit : float
        Usable memory per device, in the unit of the layers' memories.
    constant_memory : float
        Memory every stage holds besides the layers (workspace, buffers).
    less_memory : bool
        SAPP's less-memory interleaved schedule (in-flight counts).
    time_limit_s : float
        Solver time limit.

    Raises
    ------
    BalanceError
        When no placement fits (the message says the smallest memory found possible).
    """
    p, v, m = _check_int("pp", pp), _check_int("vpp", vpp), _check_int("num_micro_batches",
                                                                        num_micro_batches)
    check_positive("memory_limit", memory_limit)
    if p > 1 and m < p:
        raise InvalidArgumentError("num_micro_batches", f"must be >= pp={p}", m)
    body = [lt for lt in layers if lt.kind == "body"]
    heads = [lt for lt in layers if lt.kind == "head"]
    tails = [lt for lt in layers if lt.kind == "tail"]
    if not body:
        raise InvalidArgumentError("layers", "need at least one body layer type")
    if len(heads) > 1 or len(tails) > 1:
        raise InvalidArgumentError("layers", "at most one head and one tail")
    total_body = sum(lt.count for lt in body)
    if total_body < p * v:
        raise InvalidArgumentError("layers", f"{total_body} body layers cannot fill "
                                   f"pp*vpp={p * v} chunks")
    from scipy.optimize import Bounds, LinearConstraint, milp

    inflight = in_flight_micro_batches(p, m, v, less_memory).astype(float)  # (v, p)
    index = [(ti, r, c, s) for ti, lt in enumerate(body) for r in lt.recompute_types
             for c in range(v) for s in range(p)]
    nx = len(index)
    n_var = nx + 3  # + M (max stage work) + K (max chunk work) + T (pipeline time)
    iM, iK, iT = nx, nx + 1, nx + 2
    work = np.array([body[ti].forward_time + body[ti].backward_time[r]
                     for ti, r, _, _ in index])
    chunk_fixed = np.zeros((v, p))
    fixed_mem = np.full(p, float(constant_memory))
    for lt, stage, chunk in [(h, 0, 0) for h in heads] + [(t, p - 1, v - 1) for t in tails]:
        chunk_fixed[chunk, stage] += lt.forward_time + lt.backward_time["none"]
        fixed_mem[stage] += lt.memory_parameter + lt.memory_activation["none"] \
            * inflight[chunk, stage]
    head_work = chunk_fixed.sum(axis=0)

    rows, lo, hi = [], [], []

    def add(coefs: dict[int, float], low: float, high: float) -> None:
        row = np.zeros(n_var)
        for k, val in coefs.items():
            row[k] += val
        rows.append(row)
        lo.append(low)
        hi.append(high)

    for ti, lt in enumerate(body):  # every layer placed
        add({k: 1.0 for k, idx in enumerate(index) if idx[0] == ti}, lt.count, lt.count)
    for c in range(v):  # every chunk non-empty; K >= chunk work
        for s in range(p):
            members = [k for k, idx in enumerate(index) if idx[2] == c and idx[3] == s]
            add({k: 1.0 for k in members}, 1, np.inf)
            add({**{k: work[k] for k in members}, iK: -1.0}, -np.inf, -chunk_fixed[c, s])
    for s in range(p):  # M >= W_s ; memory
        coefs = {k: work[k] for k, idx in enumerate(index) if idx[3] == s}
        coefs[iM] = -1.0
        add(coefs, -np.inf, -head_work[s])
        mem = {k: body[idx[0]].memory_parameter + body[idx[0]].memory_activation[idx[1]]
               * inflight[idx[2], s] for k, idx in enumerate(index) if idx[3] == s}
        add(mem, -np.inf, memory_limit - fixed_mem[s])
    add({iM: float(m), iK: float(p - 1), iT: -1.0}, -np.inf, 0.0)  # T >= m M + (p-1) K

    c_obj = np.zeros(n_var)
    c_obj[iT] = 1.0
    c_obj[:nx] = 1e-4 * work  # tie-break: no recompute where it buys nothing
    integrality = np.zeros(n_var)
    integrality[:nx] = 1
    ub = np.array([body[ti].count for ti, *_ in index] + [np.inf] * 3, dtype=float)
    start = time.perf_counter()
    res = milp(c_obj, constraints=LinearConstraint(np.array(rows), lo, hi),
               integrality=integrality, bounds=Bounds(np.zeros(n_var), ub),
               options={"time_limit": float(time_limit_s)})
    elapsed = time.perf_counter() - start
    if res.x is None:
        raise BalanceError(f"no pipeline placement fits memory_limit={memory_limit:g} "
                           f"(solver: {res.message}); raise the limit, add stages or allow "
                           "more recompute types")
    x = np.rint(res.x[:nx]).astype(int)
    records = [(s, c, body[ti].name, r, n) for (ti, r, c, s), n in zip(index, x, strict=True)
               if n > 0]
    assignment = pd.DataFrame(records, columns=["stage", "chunk", "layer", "recompute",
                                                "layers"]).sort_values(["stage", "chunk"])
    per_chunk = np.zeros((v, p), dtype=int)
    recompute = {r: np.zeros((v, p), dtype=int) for r in RECOMPUTE_TYPES if r != "none"}
    chunk_time = chunk_fixed.copy()
    stage_memory = fixed_mem.copy()
    for (ti, r, c, s), n in zip(index, x, strict=True):
        per_chunk[c, s] += n
        if r != "none":
            recompute[r][c, s] += n
        lt = body[ti]
        chunk_time[c, s] += n * (lt.forward_time + lt.backward_time[r])
        stage_memory[s] += n * (lt.memory_parameter + lt.memory_activation[r] * inflight[c, s])
    stage_time = chunk_time.sum(axis=0)
    recompute = {r: a for r, a in recompute.items() if a.any()}
    # MindFormers' offset is relative to an even split, which exists only when the chunks
    # divide the layers (integer arithmetic: no float comparison)
    nominal, uneven = divmod(int(total_body), p * v)
    offset = _per_stage_list(per_chunk - nominal) if not uneven else _per_stage_list(per_chunk)
    pipeline_time = m * stage_time.max() + (p - 1) * chunk_time.max()
    ideal_stage = (sum(lt.count * (lt.forward_time + lt.backward_time["none"]) for lt in body)
                   + head_work.sum()) / p
    ideal = ideal_stage * (m + (p - 1) / v)
    return BalancePlan(p, v, m, assignment.reset_index(drop=True), per_chunk, recompute,
                       offset, stage_time, chunk_time, stage_memory, float(pipeline_time),
                       float(ideal),
                       elapsed)
