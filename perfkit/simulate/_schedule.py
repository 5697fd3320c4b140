"""Pipeline schedules (1F1B and interleaved 1F1B) and their timing with point-to-point waits.

The order of forward (F) and backward (B) chunks on each stage follows Megatron-LM's
``forward_backward_pipelining_without_interleaving`` (warm-up ``p - s - 1`` forwards, then
one forward / one backward, then the cool-down backwards) and, for ``vpp > 1``,
``..._with_interleaving`` (warm-up ``2(p - s - 1) + (v - 1)p`` chunks, micro-batches taken
in groups of ``p``). Timing is an event simulation: an operation starts when its stage is
free and its input has arrived; a stage that waits posts an ``hcom_receive`` that lasts
until the data is there, which is how the bubble shows up in a real profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["Op", "stage_order", "Timing", "time_pipeline"]


@dataclass(frozen=True)
class Op:
    """One chunk pass on a stage: forward or backward of micro-batch ``mb``, model chunk
    ``chunk``."""

    forward: bool
    mb: int
    chunk: int


def stage_order(pp: int, num_micro_batches: int, vpp: int, stage: int) -> list[Op]:
    """Order in which ``stage`` runs its forward and backward chunk passes."""
    p, m, v = pp, num_micro_batches, vpp
    total = m * v
    if v == 1:
        fwd = [Op(True, i, 0) for i in range(m)]
        bwd = [Op(False, i, 0) for i in range(m)]
        warm = min(p - stage - 1, m)
    else:
        if m % p:
            raise InvalidArgumentError("num_micro_batches", f"must be a multiple of pp={p} "
                                       "for the interleaved schedule", m)

        def chunk_of(k: int) -> int:
            return (k // p) % v

        def mb_of(k: int) -> int:
            return (k // (p * v)) * p + k % p

        fwd = [Op(True, mb_of(k), chunk_of(k)) for k in range(total)]
        bwd = [Op(False, mb_of(k), v - 1 - chunk_of(k)) for k in range(total)]
        warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
    order = fwd[:warm]
    fi, bi = warm, 0
    while fi < total:
        order.append(fwd[fi])
        fi += 1
        order.append(bwd[bi])
        bi += 1
    order.extend(bwd[bi:])
    return order


def _dependency(op: Op, stage: int, pp: int, vpp: int) -> tuple[Op, int] | None:
    """The (op, stage) whose output ``op`` on ``stage`` needs, or None."""
    if op.forward:
        if stage > 0:
            return Op(True, op.mb, op.chunk), stage - 1
        if op.chunk > 0:
            return Op(True, op.mb, op.chunk - 1), pp - 1
        return None
    if stage < pp - 1:
        return Op(False, op.mb, op.chunk), stage + 1
    if op.chunk < vpp - 1:
        return Op(False, op.mb, op.chunk + 1), 0
    return Op(True, op.mb, op.chunk), stage


@dataclass
class Timing:
    """Times (µs) of one pipeline replica.

    ``start[s]``/``end[s]``: arrays over the stage's operations in order;
    ``recv[s]``: per operation ``(start, end)`` of its receive or ``None``;
    ``sends[s]``: list of ``(op index, start, end, peer stage)`` of the sends the stage makes.
    """

    start: list[np.ndarray]
    end: list[np.ndarray]
    recv: list[list[tuple[float, float, int] | None]]
    sends: list[list[tuple[int, float, float, int]]]


def time_pipeline(orders: list[list[Op]], durations: list[np.ndarray], ready: list[float],
                  transfer_us: np.ndarray, vpp: int) -> Timing:
    """Time one pipeline replica.

    Parameters
    ----------
    orders : per stage, the operations in order (:func:`stage_order`)
    durations : per stage, the duration of each operation (µs)
    ready : per stage, when the stage can start (µs)
    transfer_us : array (pp, pp): time to send one activation from stage i to stage j
    vpp : virtual stages
    """
    p = len(orders)
    index = [{op: k for k, op in enumerate(order)} for order in orders]
    start = [np.zeros(len(o)) for o in orders]
    end = [np.zeros(len(o)) for o in orders]
    done = [np.zeros(len(o), dtype=bool) for o in orders]
    recv: list[list[tuple[float, float, int] | None]] = [[None] * len(o) for o in orders]
    sends: list[list[tuple[int, float, float, int]]] = [[] for _ in orders]
    ptr = [0] * p
    free = list(ready)
    remaining = sum(len(o) for o in orders)
    while remaining:
        progress = False
        for s in range(p):
            while ptr[s] < len(orders[s]):
                k = ptr[s]
                op = orders[s][k]
                dep = _dependency(op, s, p, vpp)
                t0 = free[s]
                if dep is not None:
                    dop, ds = dep
                    j = index[ds][dop]
                    if not done[ds][j]:
                        break
                    if ds == s:
                        t0 = max(t0, end[ds][j])
                    else:
                        x = float(transfer_us[ds, s])
                        arrive = max(free[s], end[ds][j]) + x
                        recv[s][k] = (free[s], arrive, ds)
                        sends[ds].append((j, end[ds][j], arrive, s))
                        t0 = arrive
                start[s][k] = t0
                end[s][k] = t0 + durations[s][k]
                done[s][k] = True
                free[s] = end[s][k]
                ptr[s] += 1
                remaining -= 1
                progress = True
        if not progress:  # pragma: no cover - the schedules above cannot deadlock
            raise RuntimeError("pipeline schedule deadlocked")
    return Timing(start, end, recv, sends)
