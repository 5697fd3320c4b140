"""Pipeline stage balancing as an integer program, in the manner of MindFormers SAPP.

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

import json
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..calc import (
    ActivationModel,
    activation_per_layer,
    in_flight_micro_batches,
    layer_forward_flops,
)
from ..errors import (
    ConfigFileError,
    InvalidArgumentError,
    PerfkitError,
    PerfkitWarning,
    check_positive,
)
from ..errors import check_positive_int as _check_int
from ..specs import Hardware, ModelSpec, ParallelConfig

__all__ = [
    "RECOMPUTE_TYPES",
    "DEFAULT_RECOMPUTE_COEF",
    "LayerType",
    "BalanceError",
    "BalancePlan",
    "balance_pipeline",
    "layers_from_model",
    "read_sapp_layers",
    "decompose_memory",
]

#: Recompute types in SAPP's order (none, select, comm, both, full) and their YAML keys.
RECOMPUTE_TYPES = ("none", "selective", "comm", "both", "full")
#: SAPP ``DEFAULT_COEF`` (``utils/recompute.py``): backward = (1 + coef) × 2 × forward.
DEFAULT_RECOMPUTE_COEF = {"none": 0.0, "selective": 0.04, "comm": 0.125, "both": 0.165,
                          "full": 0.5}
_SAPP_MEMORY_KEYS = {"none": "memory_activation", "selective": "memory_select_rec",
                     "comm": "memory_select_comm", "both": "memory_both_comm_select",
                     "full": "memory_recompute"}
_SAPP_TIME_KEYS = {"none": "backward_time", "selective": "select_rec_time",
                   "comm": "select_comm_time", "both": "both_comm_select_time",
                   "full": "recompute_time"}
_YAML_KEYS = {"selective": "select_recompute", "comm": "select_comm_recompute",
              "both": "both_comm_select_recompute", "full": "recompute"}


class BalanceError(PerfkitError):
    """The integer program has no solution (for example, nothing fits the memory limit)."""


@dataclass(frozen=True)
class LayerType:
    """One kind of layer for the balancer (SAPP's ``layers_description`` entry).

    Parameters
    ----------
    name : str
    kind : {"body", "head", "tail"}
        Body layers are placed by the solver; the head sits on the first stage's first
        chunk (embedding), the tail on the last stage's last chunk (output head, loss).
    count : int
        Number of layers of this type (``nb_layer``); 1 for head and tail.
    forward_time : float
        Forward time of one layer for one micro-batch (any unit; the plan uses it).
    memory_parameter : float
        Static memory of one layer (weights, gradients, optimizer share).
    memory_activation : mapping
        Activation memory of one layer for one micro-batch, per recompute type
        (keys from :data:`RECOMPUTE_TYPES`; ``"none"`` is required). Only the types given
        are offered to the solver.
    backward_time : mapping, optional
        Backward time per recompute type; default ``(1 + coef)·2·forward_time``.
    """

    name: str
    kind: str
    count: int
    forward_time: float
    memory_parameter: float
    memory_activation: Mapping[str, float] = field(hash=False)
    backward_time: Mapping[str, float] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in ("body", "head", "tail"):
            raise InvalidArgumentError("kind", "must be 'body', 'head' or 'tail'", self.kind)
        _check_int("count", self.count)
        check_positive("forward_time", self.forward_time)
        if self.memory_parameter < 0:
            raise InvalidArgumentError("memory_parameter", "must be >= 0", self.memory_parameter)
        mem = dict(self.memory_activation)
        if "none" not in mem:
            raise InvalidArgumentError("memory_activation", "needs the 'none' entry", mem)
        for key, value in mem.items():
            if key not in RECOMPUTE_TYPES:
                raise InvalidArgumentError("memory_activation",
                                           f"keys must be among {RECOMPUTE_TYPES}", key)
            if value < 0:
                raise InvalidArgumentError(f"memory_activation[{key!r}]", "must be >= 0", value)
        object.__setattr__(self, "memory_activation", mem)
        bwd = {r: (1 + DEFAULT_RECOMPUTE_COEF[r]) * 2 * self.forward_time for r in mem}
        if self.backward_time:
            bwd.update({k: float(v) for k, v in self.backward_time.items() if k in mem})
        object.__setattr__(self, "backward_time", bwd)

    @property
    def recompute_types(self) -> tuple[str, ...]:
        """Recompute types this layer can take, in SAPP order."""
        return tuple(r for r in RECOMPUTE_TYPES if r in self.memory_activation)


@dataclass(frozen=True)
class BalancePlan:
    """Result of :func:`balance_pipeline`.

    Attributes
    ----------
    pp, vpp, num_micro_batches : int
    assignment : DataFrame
        One row per (stage, chunk, layer type, recompute type) with ``layers > 0``.
    layers : ndarray, shape (vpp, pp)
        Body layers per chunk and stage.
    recompute : dict of str to ndarray (vpp, pp)
        Per recompute type (not "none"), layers with that type per chunk and stage.
    offset : list
        MindFormers ``offset``: layers minus the even share ``L/(pp·vpp)``, a list per
        stage (``vpp = 1``) or a list of lists per chunk.
    stage_time : ndarray (pp,)
        Forward + backward work of one micro-batch on each stage.
    stage_memory : ndarray (pp,)
        Peak memory of each stage.
    chunk_time : ndarray (vpp, pp)
        Forward + backward work of one micro-batch on each chunk.
    pipeline_time : float
        The objective: ``m·max stage time + (p − 1)·max chunk time``.
    ideal_time : float
        The same for a perfectly balanced split without recompute, for comparison.
    solve_seconds : float
    """

    pp: int
    vpp: int
    num_micro_batches: int
    assignment: pd.DataFrame
    layers: np.ndarray
    recompute: dict[str, np.ndarray]
    offset: list
    stage_time: np.ndarray
    chunk_time: np.ndarray
    stage_memory: np.ndarray
    pipeline_time: float
    ideal_time: float
    solve_seconds: float

    def recompute_config(self) -> dict[str, Any]:
        """MindFormers ``recompute_config`` entries: per-stage counts (per chunk if vpp>1)."""
        out: dict[str, Any] = {}
        for rtype, counts in self.recompute.items():
            key = _YAML_KEYS[rtype]
            out[key] = _per_stage_list(counts)
        return out

    def to_yaml(self) -> str:
        """The MindFormers YAML snippet: ``offset`` and the recompute lists per stage."""
        import yaml

        doc = {"parallel_config": {"pipeline_stage": self.pp,
                                   "micro_batch_num": self.num_micro_batches},
               "model": {"model_config": {"offset": self.offset}},
               "recompute_config": self.recompute_config()}
        if self.vpp > 1:
            doc["parallel_config"]["virtual_pipeline_model_parallel_size"] = self.vpp
        return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def _per_stage_list(per_chunk: np.ndarray) -> list:
    rows = [[int(x) for x in row] for row in per_chunk]
    return rows[0] if len(rows) == 1 else rows


def balance_pipeline(layers: Sequence[LayerType], pp: int, vpp: int, num_micro_batches: int,
                     memory_limit: float, constant_memory: float = 0.0,
                     less_memory: bool = False, time_limit_s: float = 60.0) -> BalancePlan:
    """Place layers and recompute per stage to minimise pipeline time under a memory limit.

    Parameters
    ----------
    layers : sequence of LayerType
        Body layer types and at most one head and one tail (see :func:`layers_from_model`
        and :func:`read_sapp_layers`).
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


def layers_from_model(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware,
                      efficiency: float = 0.5, dtype: str | None = None,
                      static_bytes_per_param: float = 10.0,
                      unit_bytes: float = 2**20,
                      activation_model: ActivationModel | None = None) -> list[LayerType]:
    """Head, body and tail layer types from perfkit's own models (no measurement needed).

    Forward time of a decoder layer = its forward GEMM FLOPs for one micro-batch / tp /
    (efficiency · peak), in milliseconds. Memory in ``unit_bytes`` (default MiB, as SAPP):
    parameters × ``static_bytes_per_param`` / tp (routed experts / ``ep × expert_tp``, the
    average of dense and MoE layers for a MoE model; 10 = the seed's MindSpore scheme without
    optimizer sharding; divide yourself for sharding), activation per recompute type from
    :func:`perfkit.calc.activation_per_layer` under ``activation_model`` ("none",
    "selective" as that model defines it, "full" = layer input only). The head is the
    embedding, the tail the output head and its fp32 logits.
    """
    check_positive("efficiency", efficiency)
    peak = hardware.peak(dtype) * efficiency
    tokens = parallel.micro_batch_size * model.seq_length
    fwd_flops = layer_forward_flops(model)["total"] * tokens / parallel.tp
    b = model.parameter_breakdown()
    mem = {r: activation_per_layer(model, parallel.micro_batch_size, parallel.tp,
                                   parallel.sequence_parallel, r, activation_model)[0]
           / unit_bytes
           for r in ("none", "selective", "full")}
    ms = 1e3 / peak
    if model.is_moe:  # routed experts split ep × expert_tp ways; the average layer
        moe = ((b["attention"] + b["shared_mlp"]) / parallel.tp + b["router"] + b["norms"]
               + b["mlp"] / (parallel.ep * parallel.expert_tp_size))
        dense = (b["attention"] + b["dense_mlp"]) / parallel.tp + b["norms"]
        layer_params = (b["moe_layers"] * moe + b["dense_layers"] * dense) / model.num_layers
    else:
        layer_params = b["layer"] / parallel.tp
    body = LayerType("decoder", "body", model.num_layers, fwd_flops * ms,
                     layer_params * static_bytes_per_param / unit_bytes, mem)
    logits = 2.0 * model.hidden_size * model.vocab_size * tokens / parallel.tp
    sbh = tokens * model.hidden_size
    head = LayerType("embedding", "head", 1, max(sbh / peak * 1e3, 1e-9),
                     b["embedding"] * static_bytes_per_param / parallel.tp / unit_bytes,
                     {"none": 2.0 * sbh / unit_bytes})
    tail = LayerType("output", "tail", 1, logits * ms,
                     (b["output"] + b["final_norm"]) * static_bytes_per_param / parallel.tp
                     / unit_bytes,
                     {"none": (2.0 * sbh + 4.0 * tokens * model.vocab_size / parallel.tp)
                      / unit_bytes})
    return [head, body, tail]


def read_sapp_layers(path_or_data: str | Path | Sequence[Mapping[str, Any]]) -> list[LayerType]:
    """Read SAPP's layer description JSON (``layers_description`` list, or a file of it).

    Keys per entry: ``name``, ``type`` (HEAD/BODY/TAIL), ``nb_layer``, ``time`` (or
    ``forward_time``), ``memory_parameter``, ``memory_activation``, ``memory_select_rec``,
    ``memory_select_comm``, ``memory_both_comm_select``, ``memory_recompute`` and the
    optional times ``backward_time``, ``select_rec_time``, ``select_comm_time``,
    ``both_comm_select_time``, ``recompute_time``.
    """
    source = "<data>"
    data: Any = path_or_data
    if isinstance(path_or_data, (str, Path)):
        source = str(path_or_data)
        try:
            data = json.loads(Path(path_or_data).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigFileError(source, f"cannot read file ({exc.strerror or exc})") from exc
        except json.JSONDecodeError as exc:
            raise ConfigFileError(source, f"not valid JSON at line {exc.lineno}: {exc.msg}") \
                from exc
    if isinstance(data, Mapping):
        data = data.get("layers_description", data.get("layers"))
    if not isinstance(data, list):
        raise ConfigFileError(source, "expected a list of layer descriptions")
    out = []
    for i, entry in enumerate(data):
        try:
            mem = {r: float(entry[k]) for r, k in _SAPP_MEMORY_KEYS.items() if k in entry}
            times = {r: float(entry[k]) for r, k in _SAPP_TIME_KEYS.items() if k in entry}
            kind = str(entry.get("type", "BODY")).lower()
            out.append(LayerType(
                name=str(entry.get("name", f"layer{i}")), kind=kind,
                count=int(entry.get("nb_layer", 1)),
                forward_time=float(entry.get("forward_time", entry["time"])),
                memory_parameter=float(entry.get("memory_parameter", 0.0)),
                memory_activation=mem, backward_time=times or None))
        except KeyError as exc:
            raise ConfigFileError(source, f"entry {i}: missing key {exc.args[0]!r}") from exc
        except (TypeError, ValueError, InvalidArgumentError) as exc:
            raise ConfigFileError(source, f"entry {i}: {exc}") from exc
    return out


def decompose_memory(observations: pd.DataFrame | Sequence[Mapping[str, Any]],
                     recompute_types: Sequence[str] = ("none", "full"),
                     fit_constant: bool | None = None,
                     underdetermined: str = "raise") -> dict[str, float | bool]:
    """Per-layer memories from measured stage peaks (SAPP ``compute_memory``).

    Each observation is one stage of a dry run: ``pp``, ``stage`` (0-based), ``layers``
    (body layers on the stage) and, per recompute type ``r``, ``layers_<r>`` (how many of
    them use it; the rest use "none"), plus ``peak`` (measured peak memory). SAPP's model::

        peak = layers·mem_param + (pp − stage)·Σ_r layers_r·mem_act_r [+ constant]
               (+ head if stage == 0) (+ tail if stage == pp − 1)

    **The constant** is fitted only when SAPP fits it (``ComputeMemory.
    _compute_memories_layers_`` in ``toolkit/pipeline_balance/utils/compute_memory.py``):
    with at least ``len(recompute_types) + 4`` observed stages ("Enabled const memory
    component because enough stages were given") and layer counts that are not all equal
    ("The number of layer per stage cannot be the same for all stages when const
    component is enabled"). Otherwise it is 0 and, as in SAPP, the head and the tail
    absorb it. ``fit_constant=True``/``False`` overrides the rule.

    **The system is checked before it is solved**: when its rank is below the number of
    unknowns — too few stages, a recompute type no stage uses, equal layer counts with a
    constant, ``pp = 1`` (head and tail on one stage) — the unknowns it cannot separate
    are named. ``underdetermined="raise"`` (default) raises
    :class:`~perfkit.errors.InvalidArgumentError`; ``"warn"`` issues a
    :class:`~perfkit.errors.PerfkitWarning` and returns NaN for those unknowns and the
    exact values of the others. A full-rank system is solved exactly
    (``numpy.linalg.solve``) when square, in the least-squares sense otherwise.

    Returns ``mem_param``, ``mem_act_<r>`` per type, ``constant``, ``head``, ``tail``,
    ``residual`` (the root-mean-square misfit) and ``constant_fitted``.
    """
    if underdetermined not in ("raise", "warn"):
        raise InvalidArgumentError("underdetermined", "must be 'raise' or 'warn'",
                                   underdetermined)
    frame = pd.DataFrame(list(observations)) if not isinstance(observations, pd.DataFrame) \
        else observations
    needed = {"pp", "stage", "layers", "peak"}
    missing = needed - set(frame.columns)
    if missing:
        raise InvalidArgumentError("observations", f"missing columns {sorted(missing)}")
    if fit_constant is None:
        fit_constant = (len(frame) >= len(recompute_types) + 4
                        and frame["layers"].nunique() > 1)
    names = ["mem_param", *[f"mem_act_{r}" for r in recompute_types],
             *(["constant"] if fit_constant else []), "head", "tail"]
    rows = []
    for _, o in frame.iterrows():
        inflight = o["pp"] - o["stage"]
        counts = {r: float(o.get(f"layers_{r}", 0.0) or 0.0) for r in recompute_types
                  if r != "none"}
        counts["none"] = o["layers"] - sum(counts.values())
        rows.append([o["layers"], *[inflight * counts.get(r, 0.0) for r in recompute_types],
                     *([1.0] if fit_constant else []),
                     float(o["stage"] == 0), float(o["stage"] == o["pp"] - 1)])
    a = np.array(rows, dtype=float)
    y = frame["peak"].to_numpy(dtype=float)
    rank = int(np.linalg.matrix_rank(a))
    sol = np.linalg.lstsq(a, y, rcond=None)[0]
    if rank < a.shape[1]:
        vt = np.linalg.svd(a)[2]
        null = vt[rank:]  # directions the observations cannot see
        free = [name for name, weight in zip(names, np.abs(null).max(axis=0), strict=True)
                if weight > 1e-9]
        message = (f"{len(frame)} stage observations determine only {rank} of the "
                   f"{a.shape[1]} unknowns ({', '.join(names)}); not determined: "
                   f"{', '.join(free)}. Add dry-run stages (different stage ids, layer "
                   "counts and recompute mixes), or drop recompute types that no stage "
                   "uses.")
        if underdetermined == "raise":
            raise InvalidArgumentError("observations", message)
        warnings.warn(PerfkitWarning(message), stacklevel=2)
        sol = np.where(np.isin(names, free), np.nan, sol)
    elif a.shape[0] == a.shape[1]:
        sol = np.linalg.solve(a, y)
    out: dict[str, float | bool] = dict(zip(names, map(float, sol), strict=True))
    if not fit_constant:
        out["constant"] = 0.0
    known = ~np.isnan(sol)
    fitted = a[:, known] @ sol[known]
    out["residual"] = float(np.sqrt(np.mean((fitted - y) ** 2))) if known.all() \
        else float("nan")
    out["constant_fitted"] = bool(fit_constant)
    return out
