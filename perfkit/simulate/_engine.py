"""The simulated cluster: every rank's device tasks, communication and memory, per step.

Ranks are laid out Megatron-style, tensor-parallel innermost, then data-parallel, then
pipeline: ``rank = stage·(dp·tp) + dp_index·tp + tp_index``; nodes hold
``hardware.devices_per_node`` consecutive ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..calc.comm import comm_volume
from ..calc.memory import (
    ActivationModel,
    activation_memory,
    parameters_per_device,
    scheme_gradient_bytes,
    static_memory,
)
from ..specs import Hardware, ModelSpec, ParallelConfig
from . import _kernels as K
from ._schedule import Op, stage_order, time_pipeline
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


@dataclass(frozen=True)
class Settings:
    """Knobs of the simulation that are not part of the model or the parallel layout."""

    efficiency: float = 0.62
    memory_efficiency: float = 0.7
    comm_efficiency: float = 0.8
    noise: float = 0.03
    launch_gap_us: tuple[float, float] = (0.5, 2.5)
    preparing_us: float = 300.0
    step_gap_us: float = 800.0
    dp_buckets: int = 4
    recompute_style: str = field(default="all", metadata={"omit_when_default": True})
    static_scheme: str = "mindspore"
    activation_model: ActivationModel = field(default_factory=ActivationModel.mindformers)
    first_step: int = 1


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


# ----------------------------------------------------------------------------- layout

def _rank_of(parallel: ParallelConfig, stage: int, dp_index: int, tp_index: int) -> int:
    return stage * parallel.dp * parallel.tp + dp_index * parallel.tp + tp_index


def _coords(parallel: ParallelConfig, rank: int) -> tuple[int, int, int]:
    stage, rest = divmod(rank, parallel.dp * parallel.tp)
    dp_index, tp_index = divmod(rest, parallel.tp)
    return stage, dp_index, tp_index


def _group_id(kind: str, index: int, ranks: list[int]) -> str:
    """An HCCL communicator name in the style torch_npu records (host IP, port, counter)."""
    return f"192.168.{ranks[0] // 8}.{10 + ranks[0] % 8}%enp189s0f0_{60000 + index}_" \
           f"{len(ranks)}_{kind}"


def build_groups(parallel: ParallelConfig) -> dict[str, dict[str, object]]:
    """Communication groups ``{group_id: {group_name, global_ranks}}`` (dp, tp, pp)."""
    groups: dict[str, dict[str, object]] = {}
    p, d, t = parallel.pp, parallel.dp, parallel.tp
    n = 0
    if d > 1:
        for s in range(p):
            for ti in range(t):
                ranks = [_rank_of(parallel, s, di, ti) for di in range(d)]
                groups[_group_id("dp", n, ranks)] = {"group_name": "dp", "global_ranks": ranks}
                n += 1
    if t > 1:
        for s in range(p):
            for di in range(d):
                ranks = [_rank_of(parallel, s, di, ti) for ti in range(t)]
                groups[_group_id("tp", n, ranks)] = {"group_name": "tp", "global_ranks": ranks}
                n += 1
    if p > 1:
        for di in range(d):
            for ti in range(t):
                ranks = [_rank_of(parallel, s, di, ti) for s in range(p)]
                groups[_group_id("pp", n, ranks)] = {"group_name": "pp", "global_ranks": ranks}
                n += 1
    return groups


def _find_group(groups: dict[str, dict[str, object]], name: str, rank: int) -> str:
    for gid, g in groups.items():
        if g["group_name"] == name and rank in g["global_ranks"]:  # type: ignore[operator]
            return gid
    raise KeyError(name)


# ----------------------------------------------------------------------------- links

def link_transport(hardware: Hardware, a: int, b: int) -> str:
    """The transport between ranks ``a`` and ``b``: LOCAL on one device, HCCS between two
    devices of one node, RDMA between nodes (``hardware.devices_per_node`` per node)."""
    if a == b:
        return "LOCAL"
    per = hardware.devices_per_node
    return "HCCS" if a // per == b // per else "RDMA"


class Links:
    """Bandwidth between two ranks (bytes/s achieved) with slow links applied."""

    def __init__(self, hardware: Hardware, comm_efficiency: float, slow: list[SlowLink]):
        self.hw = hardware
        self.eff = comm_efficiency
        self.slow = slow

    def node(self, rank: int) -> int:
        return rank // self.hw.devices_per_node

    def transport(self, a: int, b: int) -> str:
        """The transport of the link from ``a`` to ``b`` (:func:`link_transport`)."""
        return link_transport(self.hw, a, b)

    def group_transport(self, rank: int, peers: list[int]) -> str:
        """The transport that paces ``rank``'s part of a collective with ``peers``: RDMA
        when any peer sits on another node (its slowest link crosses the network), else
        HCCS."""
        kinds = {self.transport(rank, q) for q in peers if q != rank}
        return "RDMA" if "RDMA" in kinds else ("HCCS" if kinds else "LOCAL")

    def factor(self, a: int, b: int) -> float:
        f = 1.0
        for s in self.slow:
            if s.touches(a, b):
                f *= s.bandwidth_factor
        return f

    def bandwidth(self, a: int, b: int) -> float:
        base = self.hw.intra_node_bandwidth if self.node(a) == self.node(b) \
            else self.hw.inter_node_bandwidth
        return base * self.eff * self.factor(a, b)

    def member_bandwidth(self, rank: int, ranks: list[int]) -> float:
        """Slowest link from ``rank`` to the other members of its group."""
        return min((self.bandwidth(rank, q) for q in ranks if q != rank), default=float("inf"))

    def group_bandwidth(self, ranks: list[int]) -> float:
        """A collective runs at the pace of its slowest link."""
        if len(ranks) < 2:
            return float("inf")
        return min(self.bandwidth(a, b) for a in ranks for b in ranks if a != b)


# ----------------------------------------------------------------------------- templates

@dataclass
class _Templates:
    catalog: list[K.Kernel]
    ops: dict[tuple[int, int, bool], np.ndarray]  # (stage, chunk, forward) -> catalog ids
    nominal: np.ndarray
    is_tp: np.ndarray
    is_compute: np.ndarray


def _layers_of(parallel: ParallelConfig, model: ModelSpec, stage: int, chunk: int) -> list[int]:
    """Stage-local indices of the layers of ``chunk`` on ``stage``."""
    per_stage = parallel.layers_per_stage(model)[stage]
    per_chunk = per_stage // parallel.vpp
    return list(range(chunk * per_chunk, (chunk + 1) * per_chunk))


def _templates(model: ModelSpec, parallel: ParallelConfig, costs: K.KernelCosts,
               unfused: tuple[str, ...], selective: bool,
               recompute_style: str = "all") -> _Templates:
    catalog: list[K.Kernel] = []
    ids: dict[K.Kernel, int] = {}

    def add(p: K.Pass) -> list[int]:
        out = []
        for k in p.kernels:
            if k not in ids:
                ids[k] = len(catalog)
                catalog.append(k)
            out.append(ids[k])
        return out

    fwd = add(K.layer_pass(model, parallel, "fwd", unfused))
    bwd = add(K.layer_pass(model, parallel, "bwd", unfused))
    rfull = add(K.layer_pass(model, parallel, "recompute_full" if recompute_style == "all"
                             else "recompute_needed", unfused))
    rsel = add(K.layer_pass(model, parallel, "recompute_selective", unfused))
    emb_f, emb_b = add(K.embedding_pass(model, parallel, False)), \
        add(K.embedding_pass(model, parallel, True))
    head_f, head_b = add(K.head_pass(model, parallel, False)), \
        add(K.head_pass(model, parallel, True))
    full = parallel.full_recompute_layers_per_stage(model)
    p, v = parallel.pp, parallel.vpp
    ops: dict[tuple[int, int, bool], np.ndarray] = {}
    for s in range(p):
        for c in range(v):
            layers = _layers_of(parallel, model, s, c)
            f_ids = (emb_f if s == 0 and c == 0 else []) + fwd * len(layers) \
                + (head_f if s == p - 1 and c == v - 1 else [])
            b_ids = list(head_b if s == p - 1 and c == v - 1 else [])
            for layer in reversed(layers):
                if layer < full[s]:
                    b_ids += rfull
                elif selective:
                    b_ids += rsel
                b_ids += bwd
            b_ids += emb_b if s == 0 and c == 0 else []
            ops[(s, c, True)] = np.asarray(f_ids, dtype=np.int64)
            ops[(s, c, False)] = np.asarray(b_ids, dtype=np.int64)
    nominal = costs.duration_us(catalog, 0.0)
    is_tp = np.array([k.work == K.TP_COMM for k in catalog], dtype=bool)
    return _Templates(catalog, ops, nominal, is_tp, ~is_tp)


# ----------------------------------------------------------------------------- per rank

@dataclass
class _OpKernels:
    cat: np.ndarray
    op_id: np.ndarray
    dur: np.ndarray
    gap: np.ndarray
    op_sum: np.ndarray
    op_first: np.ndarray


def _host_bound_gaps(dur: np.ndarray, op_id: np.ndarray, first: np.ndarray,
                     launch_us: float) -> np.ndarray:
    """Idle time before each kernel when the host launches one every ``launch_us``.

    Within an operation the host starts launching at the operation's start; kernel ``i``
    starts at ``max(end of i-1, i·L)``, i.e. ``C_i + max_{j<=i}(j·L − C_j)`` with ``C`` the
    exclusive cumulative duration.
    """
    n = len(dur)
    local = np.arange(n) - first[op_id]
    csum = np.cumsum(dur) - dur
    c_local = csum - csum[first[op_id]]
    x = local * launch_us - c_local
    big = (np.abs(x).max() + 1.0) * 4 if n else 0.0
    cm = np.maximum.accumulate(x + op_id * big) - op_id * big
    start = c_local + cm
    prev_end = np.concatenate([[0.0], (start + dur)[:-1]])
    prev_end[first] = 0.0
    return np.maximum(start - prev_end, 0.0)


def _rank_kernels(tpl: _Templates, order: list[Op], stage: int, rng: np.random.Generator,
                  settings: Settings, compute_factor: float, tp_us_per_byte: float,
                  launch_us: float | None, realloc_us: float) -> _OpKernels:
    parts = [tpl.ops[(stage, op.chunk, op.forward)] for op in order]
    lens = np.array([len(x) for x in parts], dtype=np.int64)
    cat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    op_id = np.repeat(np.arange(len(order)), lens)
    first = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    noise = rng.lognormal(0.0, settings.noise, len(cat))
    dur = tpl.nominal[cat] * noise
    tp = tpl.is_tp[cat]
    dur[~tp] *= compute_factor
    if tp.any():
        amounts = np.array([k.amount * K.wire_share(k) if k.work == K.TP_COMM else k.amount
                            for k in tpl.catalog])
        dur[tp] = amounts[cat[tp]] * tp_us_per_byte + 8.0 * noise[tp]
    lo, hi = settings.launch_gap_us
    gap = rng.uniform(lo, hi, len(cat))
    if launch_us is not None:
        gap = np.maximum(gap, _host_bound_gaps(dur, op_id, first, launch_us))
    if realloc_us > 0:
        # the allocator retries when the forward pass allocates its first activations:
        # after the pass's first kernel, so the stall lies inside the step
        fwd = np.array([op.forward for op in order], dtype=bool)
        at = np.minimum(first[fwd] + 1, np.append(first[1:], len(cat))[fwd] - 1)
        gap[at] += realloc_us
    op_sum = np.bincount(op_id, weights=dur + gap, minlength=len(order))
    return _OpKernels(cat, op_id, dur, gap, op_sum, first)


# ----------------------------------------------------------------------------- main

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
    costs = K.KernelCosts(hardware.peak(), settings.efficiency, hardware.memory_bandwidth,
                          settings.memory_efficiency)
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
