"""The device-task files of a simulated rank: ``kernel_details.csv`` (one row per task,
with the PMU columns of its core) and the per-step figures of ``step_trace_time.csv``,
computed from the tasks the way torch_npu computes them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import _kernels as K
from ._engine import CommOp, RankResult, Simulation
from ._text import fixed3, join, overlap, runs, us_to_ns, write_lines
from ._write_headers import (
    _SHAPES,
    COMPUTE_STREAM,
    KERNEL_HEADER_MS,
    KERNEL_HEADER_PT,
    MODEL_ID,
    PMU,
    _abs_ns,
)

__all__: list[str] = []


_PMU_AIC = (0.74, 0.08, 0.31, 0.45, 0.09)
_PMU_AIV = (0.52, 0.11, 0.58, 0.29)


def _static_parts(catalog: list[K.Kernel], framework: str) -> tuple[list[str], list[str]]:
    a, b = [], []
    for k in catalog:
        a.append(f"{COMPUTE_STREAM},{k.name},{k.type},dynamic,{k.core}")
        hf32 = "NO" if k.work == K.VEC else "YES" if k.type.startswith("MatMul") else "NO"
        mix = "20" if k.core.startswith("MIX") else "0"
        b.append(f"{k.block},{mix},{hf32},{k.in_shapes and _q(k.in_shapes)},{k.in_dtypes},"
                 f"{k.in_formats},{k.out_shapes and _q(k.out_shapes)},{k.out_dtypes},"
                 f"{k.out_formats},N/A")
    return a, b


def _q(shape: str) -> str:
    """CSV-quote a shape that carries its own quotes, as torch_npu writes it."""
    return '"' + shape.replace('"', '""') + '"'


def _pmu_columns(catalog: list[K.Kernel], cat: np.ndarray, dur: np.ndarray) -> pa.Array:
    """PipeUtilization counters consistent with each kernel's duration."""
    cores = np.array([k.core for k in catalog])[cat]
    aic = (cores == "AI_CORE") | (cores == "MIX_AIC")
    aiv = (cores == "AI_VECTOR_CORE") | (cores == "MIX_AIC")
    busy = dur * 0.97
    zero_t, zero_c = pa.scalar("0.0"), pa.scalar("0")

    def t(x: np.ndarray, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), fixed3(us_to_ns(x)), zero_t)

    def c(x: np.ndarray, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), pc.cast(pa.array(np.rint(x).astype(np.int64)),
                                                  pa.string()), zero_c)

    def r(value: float, mask: np.ndarray) -> pa.Array:
        return pc.if_else(pa.array(mask), pa.scalar(f"{value:.3f}"), zero_t)

    cols: list[pa.Array | str] = [t(busy, aic), c(busy * 1800, aic)]
    for ratio in _PMU_AIC:
        cols += [t(busy * ratio, aic), r(ratio, aic)]
    cols += [r(0.002, aic), t(busy, aiv), c(busy * 1800, aiv)]
    for ratio in _PMU_AIV:
        cols += [t(busy * ratio, aiv), r(ratio, aiv)]
    cols += [r(0.001, aiv), pc.if_else(pa.array(aic), pa.scalar("71.204"), pa.scalar("0"))]
    return join(cols)


def _comm_name(op: CommOp, group_hash: str, index: int) -> str:
    return f"hcom_{op.op}__{group_hash[-3:]}_{index}_1"


def _kernel_file(path: Path, sim: Simulation, res: RankResult, comm_names: list[str],
                 framework: str, device_id: int, pmu: bool) -> pd.DataFrame:
    arr = res.arrays()
    n = len(arr["start"])
    a_parts, b_parts = _static_parts(sim.catalog, framework)
    cat = arr["cat"].astype(np.int64)
    start_ns = _abs_ns(arr["start"])
    comm = res.comm
    c_start = np.array([c.start for c in comm]) if comm else np.zeros(0)
    c_ns = _abs_ns(c_start) if comm else np.zeros(0, dtype=np.int64)
    # Task IDs: one running counter over compute tasks in start order
    task = pc.cast(pa.array(np.arange(n, dtype=np.int64) + 1000), pa.string())
    step_txt = pc.cast(pa.array(arr["step"].astype(np.int64)), pa.string())
    lead = [step_txt, str(device_id), MODEL_ID] if framework == "pytorch" \
        else [step_txt, MODEL_ID]
    cols: list[pa.Array | str] = [*lead, task,
                                  pc.take(pa.array(a_parts), pa.array(cat)),
                                  fixed3(start_ns - 0, tab=True),
                                  fixed3(us_to_ns(arr["dur"])),
                                  fixed3(us_to_ns(arr["wait"])),
                                  pc.take(pa.array(b_parts), pa.array(cat))]
    if pmu:
        cols.append(_pmu_columns(sim.catalog, cat, arr["dur"]))
    lines = join(cols) if n else pa.array([], pa.string())
    # HCCL rows
    na_tail = ",".join(["N/A"] * (len(_SHAPES) + 2 + (len(PMU) if pmu else 0)))
    c_lines = []
    for c, name, ns in zip(comm, comm_names, c_ns, strict=True):
        lead_txt = f"{c.step},{device_id},{MODEL_ID}" if framework == "pytorch" \
            else f"{c.step},{MODEL_ID}"
        c_lines.append(f"{lead_txt},N/A,N/A,{name},hcom_{c.op}_,N/A,HCCL,"
                       f"{ns // 1000}.{ns % 1000:03d}\t,{c.elapse:.3f},0,0,{na_tail}")
    all_lines = pa.concat_arrays([lines, pa.array(c_lines, pa.string())])
    order = np.argsort(np.concatenate([start_ns, c_ns]), kind="stable")
    all_lines = pc.take(all_lines, pa.array(order))
    header = KERNEL_HEADER_PT if framework == "pytorch" else KERNEL_HEADER_MS
    if pmu:
        header = header + PMU
    write_lines(path, ",".join(header), all_lines, "\r\n")
    types = np.array([k.type for k in sim.catalog])[cat]
    cores = np.array([k.core for k in sim.catalog])[cat]
    return pd.DataFrame({"type": types, "core": cores, "dur": arr["dur"]})


def _step_rows(res: RankResult, merge_us: float = 0.0) -> tuple[list[dict[str, float]],
                                         list[tuple[str, np.ndarray, np.ndarray]]]:
    """Per-step figures computed from the device tasks like torch_npu does, and the
    Overlap Analysis events (gaps shorter than ``merge_us`` closed in those tracks only)."""
    arr = res.arrays()
    rows, events = [], []
    for step, host_start, _ in res.host_steps:
        sel = arr["step"] == step
        cs, ce = arr["start"][sel], arr["start"][sel] + arr["dur"][sel]
        ops = [c for c in res.comm if c.step == step]
        ms = np.array([c.start for c in ops])
        me = ms + np.array([c.elapse for c in ops]) if ops else np.zeros(0)
        bounds, in_c, in_m = overlap(cs, ce, ms, me)
        seg = np.diff(bounds)
        first = min(cs.min() if len(cs) else np.inf, ms.min() if len(ms) else np.inf)
        last = max(ce.max() if len(ce) else -np.inf, me.max() if len(me) else -np.inf)
        span = last - first
        computing = float(seg[in_c].sum())
        communication = float(seg[in_m].sum())
        not_ov = float(seg[in_m & ~in_c].sum())
        busy = float(seg[in_m | in_c].sum())
        bubble = float(sum(c.elapse for c in ops if c.op == "receive"))
        rows.append({"Step": step, "Computing": computing,
                     "Communication(Not Overlapped)": not_ov,
                     "Overlapped": communication - not_ov, "Communication": communication,
                     "Free": span - busy, "Stage": span - bubble, "Bubble": bubble,
                     "Communication(Not Overlapped and Exclude Receive)": max(not_ov - bubble,
                                                                              0.0),
                     "Preparing": float(first - host_start)})
        for track, flag in (("Computing", in_c), ("Communication", in_m),
                            ("Communication(Not Overlapped)", in_m & ~in_c),
                            ("Free", ~(in_m | in_c))):
            b, e = runs(bounds, flag)
            if merge_us > 0 and len(b):
                if track == "Free":
                    keep = (e - b) >= merge_us
                    b, e = b[keep], e[keep]
                else:  # close gaps shorter than merge_us
                    cut = np.concatenate([[True], (b[1:] - e[:-1]) >= merge_us])
                    ends = np.concatenate([e[np.nonzero(cut)[0][1:] - 1], e[-1:]])
                    b, e = b[cut], ends
            events.append((track, b, e - b))
    return rows, events
