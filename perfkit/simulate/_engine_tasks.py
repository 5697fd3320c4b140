"""The device tasks of one simulated rank: the kernel templates of a stage's layers
(forward, backward, recompute, from :mod:`perfkit.simulate._kernels`), laid along the
pipeline schedule's operations with seeded noise and the host-bound gaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..specs import ModelSpec, ParallelConfig
from . import _kernels as K
from ._engine_settings import Settings
from ._schedule import Op

__all__: list[str] = []


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
