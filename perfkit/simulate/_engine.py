"""The simulated cluster: every rank's device tasks, communication and memory, per step.

Ranks are laid out Megatron-style, tensor-parallel innermost, then data-parallel, then
pipeline: ``rank = stage·(dp·tp) + dp_index·tp + tp_index``; nodes hold
``hardware.devices_per_node`` consecutive ranks. The layout and the links are
:mod:`perfkit.simulate._engine_layout`, a rank's device tasks
:mod:`perfkit.simulate._engine_tasks`, the settings :mod:`perfkit.simulate._engine_settings`;
this module holds the results and :func:`run`, which times communication, pipeline and
memory across ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..calc.comm import comm_volume
from ..calc.gemm_rate import surface_for
from ..calc.memory import (
    activation_memory,
    parameters_per_device,
    scheme_gradient_bytes,
    static_memory,
)
from ..calc.power_limit import sustained_peak
from ..specs import Hardware, ModelSpec, ParallelConfig
from . import _kernels as K
from ._engine_layout import (  # noqa: F401 - re-exported: the old home of the layout
    Links,
    _coords,
    _find_group,
    _group_id,
    _rank_of,
    build_groups,
    link_transport,
)
from ._engine_settings import Settings
from ._engine_tasks import (  # noqa: F401 - re-exported: the old home of a rank's tasks
    _host_bound_gaps,
    _layers_of,
    _OpKernels,
    _rank_kernels,
    _Templates,
    _templates,
)
from ._schedule import stage_order, time_pipeline
from .faults import (
    DataLoadingStall,
    Fault,
    FullRecompute,
    HostBound,
    MemoryPressure,
    NoOverlap,
    SlowLink,
    SlowRank,
    UnbalancedStage,
    UnfusedOperators,
)

__all__ = ["Settings", "CommOp", "RankResult", "Simulation", "run", "reserved_bytes",
           "RESERVE_FACTOR", "BLOCK"]


EPOCH_NS = 1_763_683_200_000_000_000  # 2025-11-21T00:00:00Z: simulated profiles start here


#: The type the simulated kernels run in (``DT_BF16`` in kernel_details.csv, which is the
#: dtype :func:`perfkit.plan.calibrate` reads back): with ``Settings.static_scheme`` it
#: sizes the data-parallel gradients as :func:`perfkit.calc.estimate_step` and the step
#: model do (:func:`perfkit.calc.memory.scheme_gradient_bytes`).
RUN_DTYPE = "bf16"


@dataclass
class CommOp:
    """One HCCL operation as seen by one rank (times in µs from the simulation origin)."""

    step: int
    kind: str  # "collective" or "p2p"
    op: str  # allReduce, reduceScatter, allGather, send, receive
    group: str  # group id (hccl comm name)
    start: float
    elapse: float
    transit: float
    wait: float
    size_bytes: float
    peers: tuple[int, ...]  # global ranks this rank exchanges data with
    link_gbps: dict[int, float]  # per peer: achieved bandwidth GB/s
    transport: str


@dataclass
class RankResult:
    """Everything one rank's files are written from."""

    rank: int
    stage: int
    dp_index: int
    tp_index: int
    step: list[np.ndarray] = field(default_factory=list)
    start: list[np.ndarray] = field(default_factory=list)
    dur: list[np.ndarray] = field(default_factory=list)
    wait: list[np.ndarray] = field(default_factory=list)
    cat: list[np.ndarray] = field(default_factory=list)
    comm: list[CommOp] = field(default_factory=list)
    host_steps: list[tuple[int, float, float]] = field(default_factory=list)
    mem_t: list[np.ndarray] = field(default_factory=list)
    mem_alloc: list[np.ndarray] = field(default_factory=list)
    allocs: list[tuple[str, float, float, float]] = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        """Compute kernels of all steps, concatenated and sorted by start."""
        out = {k: np.concatenate(getattr(self, k)) if getattr(self, k) else np.zeros(0)
               for k in ("step", "start", "dur", "wait", "cat")}
        order = np.argsort(out["start"], kind="stable")
        return {k: v[order] for k, v in out.items()}


@dataclass
class Simulation:
    """The simulated job."""

    model: ModelSpec
    parallel: ParallelConfig
    hardware: Hardware
    settings: Settings
    catalog: list[K.Kernel]
    groups: dict[str, dict[str, object]]
    ranks: list[RankResult]
    static_bytes: float
    reserved_peak: dict[int, float]
    launch_us: float | None = None
    seed: int = 0


def _faults_of(faults: tuple[Fault, ...], kind: type) -> list:
    return [f for f in faults if isinstance(f, kind)]


def effective_parallel(parallel: ParallelConfig, faults: tuple[Fault, ...]) -> ParallelConfig:
    """The configuration that runs: full recompute of every layer with :class:`FullRecompute`."""
    if _faults_of(faults, FullRecompute):
        return parallel.replace(recompute="full", recompute_layers=None)
    return parallel


def reserved_bytes(alloc_peak: float) -> float:
    """Reserved memory the writer records for an allocated peak: +3 %, whole 2 MiB blocks."""
    return float(np.ceil(alloc_peak * RESERVE_FACTOR / BLOCK) * BLOCK)


#: The caching allocator reserves this much more than it hands out (fragmentation).
RESERVE_FACTOR = 1.03
#: Reserved memory comes in blocks of this size.
BLOCK = 2.0**21


def run(model: ModelSpec, parallel: ParallelConfig, hardware: Hardware, steps: int,
        faults: tuple[Fault, ...], seed: int, settings: Settings,
        runtime_bytes: float = 0.0) -> Simulation:
    """Simulate ``steps`` training steps of every rank.

    ``runtime_bytes`` is device memory outside the framework's allocator that the profile
    reports on top of it (torch_npu's ``APP`` component); :class:`MemoryPressure` targets
    ``fraction`` of the device for the total, so the allocator gets that much less.
    """
    par = effective_parallel(parallel, faults)
    p, d, t, v, m = par.pp, par.dp, par.tp, par.vpp, par.num_micro_batches
    world = par.world_size
    for f in faults:
        for attr in ("rank", "src", "dst"):
            r = getattr(f, attr, None)
            if r is not None and r >= world:
                raise ValueError(f"{type(f).__name__}.{attr}={r} is outside the job "
                                 f"(world size {world})")
        if isinstance(f, UnbalancedStage) and f.stage >= p:
            raise ValueError(f"UnbalancedStage.stage={f.stage} but pp={p}")
    links = Links(hardware, settings.comm_efficiency, _faults_of(faults, SlowLink))
    unfused: tuple[str, ...] = tuple(sorted({o for f in _faults_of(faults, UnfusedOperators)
                                             for o in f.ops}))
    selective = par.recompute == "selective"
    # matrix products on the hardware's measured GEMM surface where perfkit has one, as the
    # step model prices them (the simulated run is 16-bit)
    costs = K.KernelCosts(sustained_peak(hardware), settings.efficiency, hardware.memory_bandwidth,
                          settings.memory_efficiency, surface=surface_for(hardware.name),
                          hardware_name=hardware.name,
                          multiprocessors=hardware.multiprocessors)
    tpl = _templates(model, par, costs, unfused, selective, settings.recompute_style)
    groups = build_groups(par)
    orders = [stage_order(p, m, v, s) for s in range(p)]
    host = _faults_of(faults, HostBound)
    launch_us = max(f.launch_us for f in host) if host else None
    pressure = _faults_of(faults, MemoryPressure)
    realloc_us = max((f.realloc_us for f in pressure), default=0.0)
    stalls = _faults_of(faults, DataLoadingStall)
    no_overlap = bool(_faults_of(faults, NoOverlap))

    # communication sizes from the calculators
    # gradients reduce in the job's scheme's size (4 bytes under Megatron-LM in bf16)
    grad_element = scheme_gradient_bytes(settings.static_scheme, RUN_DTYPE)
    volume = comm_volume(model, par, gradient_bytes=grad_element)
    dp_items = [i for i in volume.items if i.kind == "dp"]
    pp_items = [i for i in volume.items if i.kind == "pp"]
    pp_msg = pp_items[0].message_bytes if pp_items else 0.0
    sharded = par.optimizer_shard > 1 or par.zero_stage >= 1
    params = parameters_per_device(model, par)
    grad_bytes = params * grad_element  # the reduced gradient buffer
    weight_bytes = params * 2.0  # the updated 16-bit weights a sharded optimizer gathers

    # per rank constants
    compute_factor = np.ones(world)
    for f in _faults_of(faults, SlowRank):
        compute_factor[f.rank] *= f.factor
    for f in _faults_of(faults, UnbalancedStage):
        for r in range(world):
            if _coords(par, r)[0] == f.stage:
                compute_factor[r] *= f.factor
    tp_us_per_byte = np.zeros(world)
    if t > 1:
        for r in range(world):
            gid = _find_group(groups, "tp", r)
            ranks = list(groups[gid]["global_ranks"])  # type: ignore[arg-type]
            tp_us_per_byte[r] = 2 * (t - 1) / t / links.group_bandwidth(ranks) * 1e6

    # memory model
    am = settings.activation_model
    static = static_memory(model, par, settings.static_scheme).total_bytes
    act = activation_memory(model, par, activation_model=am)
    from ..calc.pipeline import in_flight_micro_batches
    inflight = in_flight_micro_batches(p, m, v).sum(axis=0) / v
    per_chunk_mb = np.array([act.per_stage_bytes[s] / max(inflight[s] * v, 1e-9)
                             for s in range(p)])

    results = [RankResult(r, *_coords(par, r)) for r in range(world)]
    rngs = [np.random.default_rng([seed, r]) for r in range(world)]
    opt = K.optimizer_kernel(params, par.optimizer_shard)
    opt_id = len(tpl.catalog)
    tpl.catalog.append(opt)
    opt_nominal = float(costs.duration_us([opt], 0.0)[0])

    t0 = 0.0
    for si in range(steps):
        step = settings.first_step + si
        prep = np.empty(world)
        for r in range(world):
            prep[r] = settings.preparing_us * rngs[r].uniform(0.6, 1.4)
            for f in stalls:
                if f.hits(r, si):
                    prep[r] += f.stall_us
        ker = [_rank_kernels(tpl, orders[results[r].stage], results[r].stage, rngs[r],
                             settings, compute_factor[r], tp_us_per_byte[r], launch_us,
                             realloc_us) for r in range(world)]
        # tensor-parallel members wait for each other inside their all-reduces
        unit_dur: dict[tuple[int, int], np.ndarray] = {}
        unit_ready: dict[tuple[int, int], float] = {}
        for s in range(p):
            for di in range(d):
                members = [_rank_of(par, s, di, ti) for ti in range(t)]
                unit_dur[(s, di)] = np.max([ker[r].op_sum for r in members], axis=0)
                unit_ready[(s, di)] = t0 + max(prep[r] for r in members)
        # pipeline timing per data-parallel replica
        timings = []
        for di in range(d):
            xfer = np.zeros((p, p))
            for a in range(p):
                for b in range(p):
                    if a != b:
                        ra, rb = _rank_of(par, a, di, 0), _rank_of(par, b, di, 0)
                        xfer[a, b] = pp_msg / links.bandwidth(ra, rb) * 1e6 + 15.0
            timings.append(time_pipeline(orders, [unit_dur[(s, di)] for s in range(p)],
                                         [unit_ready[(s, di)] for s in range(p)], xfer, v))
        # data-parallel gradient reduction, per (stage, tp index) group
        step_end_dev = np.zeros(world)
        dp_done: dict[int, float] = {}
        for s in range(p):
            for ti in range(t):
                members = [_rank_of(par, s, di, ti) for di in range(d)]
                last_start = np.array([timings[di].start[s][-1] for di in range(d)])
                last_end = np.array([timings[di].end[s][-1] for di in range(d)])
                if d == 1 or not dp_items:
                    for r, e in zip(members, last_end, strict=True):
                        dp_done[r] = float(e)
                    continue
                gid = _find_group(groups, "dp", members[0])
                # the gradients' all-reduce, or their reduce-scatter now (the weights'
                # all-gather comes after the update)
                total_bytes = sum(i.message_bytes * i.ring_factor for i in dp_items
                                  if i.collective.endswith("gradients)"))
                nb = max(1, settings.dp_buckets)
                # each member moves its data at the pace of its own slowest link; the
                # operator ends for everyone when the slowest member is done
                own_x = np.array([total_bytes / nb / links.member_bandwidth(q, members) * 1e6
                                  for q in members]) + 20.0
                x = float(own_x.max())
                prev_end = -np.inf
                own_prev = np.full(d, -np.inf)
                for b in range(nb):
                    if no_overlap:
                        launch = last_end.copy()
                    else:
                        frac = (b + 1) / nb
                        launch = last_start + frac * (last_end - last_start)
                    own_start = np.maximum(launch, own_prev)
                    begin = max(float(own_start.max()), prev_end)
                    end = begin + x
                    for j, r in enumerate(members):
                        results[r].comm.append(CommOp(
                            step, "collective", "reduceScatter" if sharded else "allReduce",
                            gid, float(own_start[j]), end - own_start[j], own_x[j] - 20.0,
                            begin - own_start[j], grad_bytes / nb,
                            tuple(q for q in members if q != r),
                            {q: links.bandwidth(r, q) / 1e9 for q in members if q != r},
                            links.group_transport(r, members)))
                    own_prev = np.full(d, end)
                    prev_end = end
                for r in members:
                    dp_done[r] = prev_end
        # place kernels, receives, sends, optimizer
        for r in range(world):
            res = results[r]
            s, di, ti = res.stage, res.dp_index, res.tp_index
            tm = timings[di]
            k = ker[r]
            op_start = tm.start[s]
            unit = unit_dur[(s, di)]
            # extra wait of this tp member goes into its last tp all-reduce of each op
            extra = unit - k.op_sum
            within = np.cumsum(k.dur + k.gap) - (k.dur + k.gap)
            base = within - within[k.op_first][k.op_id]
            starts = op_start[k.op_id] + base + k.gap
            dur = k.dur.copy()
            tp_mask = tpl.is_tp[k.cat]
            if t > 1 and tp_mask.any():
                last_tp = np.full(len(op_start), -1)
                idx = np.nonzero(tp_mask)[0]
                last_tp[k.op_id[idx]] = idx  # later indices overwrite: the last one wins
                has = last_tp >= 0
                dur[last_tp[has]] += extra[has]
                gid = _find_group(groups, "tp", r)
                members = list(groups[gid]["global_ranks"])  # type: ignore[arg-type]
                peers = tuple(q for q in members if q != r)
                xfer_t = k.dur[idx]
                for j, i in enumerate(idx):
                    res.comm.append(CommOp(
                        step, "collective", K.collective_op(tpl.catalog[k.cat[i]]), gid,
                        float(starts[i]), float(dur[i]),
                        float(xfer_t[j]), float(dur[i] - xfer_t[j]),
                        tpl.catalog[k.cat[i]].amount, peers,
                        {q: links.bandwidth(r, q) / 1e9 for q in peers},
                        links.group_transport(r, list(peers))))
            keep = ~tp_mask
            # pipeline receives and sends
            if p > 1:
                gid = _find_group(groups, "pp", r)
                for rv in tm.recv[s]:
                    if rv is None:
                        continue
                    a, b, src_stage = rv
                    peer = _rank_of(par, src_stage, di, ti)
                    x = pp_msg / links.bandwidth(peer, r) * 1e6
                    res.comm.append(CommOp(step, "p2p", "receive", gid, a, b - a, x, b - a - x,
                                           pp_msg, (peer,),
                                           {peer: links.bandwidth(peer, r) / 1e9},
                                           links.transport(peer, r)))
                for _kk, a, b, dst_stage in tm.sends[s]:
                    peer = _rank_of(par, dst_stage, di, ti)
                    x = pp_msg / links.bandwidth(r, peer) * 1e6
                    res.comm.append(CommOp(step, "p2p", "send", gid, a, b - a, x,
                                           max(b - a - x, 0.0), pp_msg, (peer,),
                                           {peer: links.bandwidth(r, peer) / 1e9},
                                           links.transport(r, peer)))
            # optimizer update, then the all-gather of sharded parameters
            ostart = max(float(tm.end[s][-1]), dp_done[r]) + rngs[r].uniform(5, 15)
            odur = opt_nominal * rngs[r].lognormal(0, settings.noise) * compute_factor[r]
            end = ostart + odur
            if sharded and d > 1:
                members = [_rank_of(par, s, q, ti) for q in range(d)]
                gid = _find_group(groups, "dp", r)
                volume_b = weight_bytes * (d - 1) / d
                x = volume_b / links.group_bandwidth(members) * 1e6 + 20.0
                own = volume_b / links.member_bandwidth(r, members) * 1e6
                res.comm.append(CommOp(step, "collective", "allGather", gid, end + 3.0, x, own,
                                       0.0, weight_bytes, tuple(q for q in members if q != r),
                                       {q: links.bandwidth(r, q) / 1e9 for q in members
                                        if q != r},
                                       links.group_transport(r, members)))
                end += 3.0 + x
            res.step.append(np.full(int(keep.sum()) + 1, step, dtype=np.int64))
            res.start.append(np.concatenate([starts[keep], [ostart]]))
            res.dur.append(np.concatenate([dur[keep], [odur]]))
            res.wait.append(np.concatenate([k.gap[keep], [ostart - tm.end[s][-1]]]))
            res.cat.append(np.concatenate([k.cat[keep], [opt_id]]))
            step_end_dev[r] = end
            # memory: static + activations of the micro-batches in flight
            fwd = np.array([op.forward for op in orders[s]])
            live = np.cumsum(np.where(fwd, 1, -1))
            tmem = np.concatenate([[t0 + prep[r]], tm.end[s], [end]])
            alloc = static + per_chunk_mb[s] * np.concatenate([[0], live, [0]]) \
                + 0.02 * static * rngs[r].random(len(tmem))
            res.mem_t.append(tmem)
            res.mem_alloc.append(alloc)
            if si == 0:
                res.allocs.append(("aten::empty", static, t0 + prep[r], np.nan))
            bstart = {op.mb * v + op.chunk: tm.end[s][j] for j, op in enumerate(orders[s])
                      if not op.forward}
            for j, op in enumerate(orders[s]):
                if op.forward:
                    rel = bstart[op.mb * v + op.chunk]
                    res.allocs.append(("npu::npu_fusion_attention", 0.25 * per_chunk_mb[s],
                                       float(tm.start[s][j]), float(rel)))
                    res.allocs.append(("aten::mm", 0.75 * per_chunk_mb[s],
                                       float(tm.start[s][j]), float(rel)))
        for r in range(world):
            results[r].host_steps.append((step, t0, float(step_end_dev.max())))
        t0 = float(step_end_dev.max()) + settings.step_gap_us

    reserved_peak = {}
    for res in results:
        peak = max(float(a.max()) for a in res.mem_alloc)
        reserved_peak[res.rank] = peak
    if pressure:
        frac = max(f.fraction for f in pressure)
        # reserved (allocated x 1.03, rounded up to a block) + runtime = fraction x capacity
        target = max(frac * hardware.memory_bytes - runtime_bytes - BLOCK, BLOCK)
        for res in results:
            scale = target / (reserved_peak[res.rank] * RESERVE_FACTOR)
            res.mem_alloc = [a * scale for a in res.mem_alloc]
            res.allocs = [(n, sz * scale, a, b) for n, sz, a, b in res.allocs]
            reserved_peak[res.rank] *= scale
    return Simulation(model, par, hardware, settings, tpl.catalog, groups, results, static,
                      reserved_peak, launch_us, seed)
