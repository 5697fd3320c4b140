"""Faults that :func:`perfkit.simulate` can plant in a simulated profile.

Each fault is a small frozen dataclass. Pass any number of them in ``faults=(...)``; they
compose (two slow ranks, a slow link plus a data stall, ...). Each one changes the
simulated timeline the way the real problem does, so that the symptom appears in the
files exactly where a tuning engineer would look for it (see docs/simulate.md for the
table of symptoms).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgumentError

__all__ = [
    "Fault",
    "SlowRank",
    "SlowLink",
    "UnbalancedStage",
    "DataLoadingStall",
    "UnfusedOperators",
    "HostBound",
    "NoOverlap",
    "MemoryPressure",
    "FullRecompute",
]


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgumentError(name, "must be a number > 0", value)


def _rank(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(name, "must be a whole number >= 0", value)


@dataclass(frozen=True)
class Fault:
    """Base class of every simulated fault (no behaviour of its own)."""


@dataclass(frozen=True)
class SlowRank(Fault):
    """One device computes slower than its peers (thermal throttling, a bad card).

    Every compute kernel of ``rank`` lasts ``factor`` times longer. Symptom: that rank's
    ``Computing`` time is an outlier; its data-parallel peers wait for it inside the
    gradient all-reduce, so *their* communication wait time grows instead.

    Parameters
    ----------
    rank : int
        Global rank that is slow.
    factor : float
        Slow-down of its compute kernels (> 1 is slower).
    """

    rank: int
    factor: float = 1.3

    def __post_init__(self) -> None:
        _rank("rank", self.rank)
        _positive("factor", self.factor)


@dataclass(frozen=True)
class SlowLink(Fault):
    """The link between two devices runs at a fraction of its nominal bandwidth.

    Collectives of every group that holds both ranks are paced by the slow link (ring and
    mesh algorithms wait for their slowest link), and point-to-point transfers between
    the two ranks slow down. Symptom: in ``communication_matrix.json`` the ``src-dst``
    link shows a bandwidth far below the others of its group; transit times grow.

    Parameters
    ----------
    src, dst : int
        Global ranks at the two ends (the order does not matter).
    bandwidth_factor : float
        Achieved share of the normal link bandwidth, in (0, 1].
    """

    src: int
    dst: int
    bandwidth_factor: float = 0.2

    def __post_init__(self) -> None:
        _rank("src", self.src)
        _rank("dst", self.dst)
        if self.src == self.dst:
            raise InvalidArgumentError("dst", "must differ from src", self.dst)
        _positive("bandwidth_factor", self.bandwidth_factor)
        if self.bandwidth_factor > 1:
            raise InvalidArgumentError("bandwidth_factor", "must be <= 1",
                                       self.bandwidth_factor)

    def touches(self, a: int, b: int) -> bool:
        """True when the link joins global ranks ``a`` and ``b``."""
        return {a, b} == {self.src, self.dst}


@dataclass(frozen=True)
class UnbalancedStage(Fault):
    """One pipeline stage has more work than the others (a bad layer split).

    The layers of ``stage`` take ``factor`` times longer (as if it held that many more
    layers, or the embedding / output head on top of its share). Symptom: the other
    stages wait for it in ``hcom_receive`` (``Bubble`` grows on them) while its own
    ``Computing`` is the largest.

    Parameters
    ----------
    stage : int
        Pipeline stage (0-based).
    factor : float
        Work multiplier of that stage's layers.
    """

    stage: int
    factor: float = 1.5

    def __post_init__(self) -> None:
        _rank("stage", self.stage)
        _positive("factor", self.factor)


@dataclass(frozen=True)
class DataLoadingStall(Fault):
    """The host waits for the data loader at the start of some steps.

    No kernel is launched while the host waits, so the device idles before the step's
    first task. Symptom: ``Preparing`` (first device task minus the framework's step
    start) jumps on the affected steps; the step wall time grows by the same amount.

    Parameters
    ----------
    stall_us : float
        Wait per affected step, in microseconds.
    every : int
        Stall on every ``every``-th step (1 = every step), counted from the first.
    ranks : tuple of int, optional
        Ranks whose loader stalls (default: all).
    """

    stall_us: float = 50_000.0
    every: int = 1
    ranks: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _positive("stall_us", self.stall_us)
        if isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1:
            raise InvalidArgumentError("every", "must be a whole number >= 1", self.every)
        if self.ranks is not None:
            object.__setattr__(self, "ranks", tuple(self.ranks))
            for r in self.ranks:
                _rank("ranks", r)

    def hits(self, rank: int, step_index: int) -> bool:
        """True when ``rank`` stalls on the ``step_index``-th simulated step (0-based)."""
        return step_index % self.every == 0 and (self.ranks is None or rank in self.ranks)


UNFUSABLE = ("rms_norm", "rotary", "swiglu")


@dataclass(frozen=True)
class UnfusedOperators(Fault):
    """Fused kernels are replaced by chains of small element-wise kernels.

    ``"rms_norm"``: RmsNorm becomes Cast, Pow, ReduceMean, Add, Rsqrt, Mul, Mul;
    ``"rotary"``: RotaryMul becomes Slice, Neg, ConcatD, Mul, Mul, Add per tensor;
    ``"swiglu"``: the gate's SiLU becomes Sigmoid and Mul. Each small kernel reads and
    writes the whole tensor and pays a fixed launch cost. Symptom: many short
    AI_VECTOR_CORE kernels in ``op_statistic.csv``; vector time rises.

    Parameters
    ----------
    ops : tuple of {"rms_norm", "rotary", "swiglu"}
    """

    ops: tuple[str, ...] = UNFUSABLE

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        for op in self.ops:
            if op not in UNFUSABLE:
                raise InvalidArgumentError("ops", f"entries must be among {UNFUSABLE}", op)


@dataclass(frozen=True)
class HostBound(Fault):
    """The host cannot launch kernels as fast as the device runs them.

    The host issues one kernel every ``launch_us`` microseconds; a kernel starts no
    earlier than its launch. Short kernels then leave the device idle between them.
    Symptom: ``Free`` time spread through the step in many small gaps, large
    ``Wait Time(us)`` on kernels.

    Parameters
    ----------
    launch_us : float
        Host time per kernel launch.
    """

    launch_us: float = 40.0

    def __post_init__(self) -> None:
        _positive("launch_us", self.launch_us)


@dataclass(frozen=True)
class NoOverlap(Fault):
    """Gradient communication is not overlapped with the backward pass.

    Normally the data-parallel gradient reduction runs in buckets while the last
    backward pass still computes; with this fault every bucket starts after it. Symptom:
    ``Communication(Not Overlapped)`` equals ``Communication`` (``Overlapped`` near 0).
    """


@dataclass(frozen=True)
class MemoryPressure(Fault):
    """Device memory runs close to its limit.

    The caching allocator holds ``fraction`` of the device memory at the peak (extra
    workspace and fragmentation on top of the modelled static + activation memory), and
    it has to free and re-allocate cached blocks once per micro-batch, which stalls the
    device for ``realloc_us`` after the first kernel of every forward pass. Symptom:
    ``memory_record.csv`` peak device memory (torch_npu's ``APP`` component, MindSpore's
    pool) at ``fraction`` of the capacity, and extra ``Free`` time inside the step.

    Parameters
    ----------
    fraction : float
        Peak device memory the profile reports as a share of device memory, in (0, 1]
        (within 1 %).
    realloc_us : float
        Device idle time per micro-batch caused by allocator retries.
    """

    fraction: float = 0.97
    realloc_us: float = 300.0

    def __post_init__(self) -> None:
        _positive("fraction", self.fraction)
        if self.fraction > 1:
            raise InvalidArgumentError("fraction", "must be <= 1", self.fraction)
        if self.realloc_us < 0:
            raise InvalidArgumentError("realloc_us", "must be >= 0", self.realloc_us)


@dataclass(frozen=True)
class FullRecompute(Fault):
    """Every layer is fully recomputed although selective recompute would fit.

    Overrides the configuration's recompute setting with full recompute of every layer:
    each backward pass first repeats the layer's whole forward pass. Symptom: forward
    kernels (MatMul, FlashAttentionScore, ...) appear twice per layer and micro-batch,
    ``Computing`` grows by about a third, and memory stays far below the limit.
    """
