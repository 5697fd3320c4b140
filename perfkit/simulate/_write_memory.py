"""The memory files of a simulated rank: ``memory_record.csv`` (allocated and reserved over
time), ``operator_memory.csv`` and ``op_statistic.csv``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ._engine import RankResult
from ._write_headers import APP_RUNTIME_BYTES, _abs_ns

__all__: list[str] = []


def _memory(res: RankResult, device_id: int, framework: str,
            peak: float) -> tuple[list[list[Any]], np.ndarray, np.ndarray, np.ndarray]:
    t = np.concatenate(res.mem_t)
    alloc = np.concatenate(res.mem_alloc)
    order = np.argsort(t, kind="stable")
    t, alloc = t[order], alloc[order]
    scale = peak / max(alloc.max(), 1.0)
    reserved = np.ceil(np.maximum.accumulate(alloc) * 1.03 * scale / 2**21) * 2**21
    reserved = np.maximum(reserved, alloc)
    mb = 2**20 if framework == "pytorch" else 1024.0 * 1000.0
    dev = f"NPU:{device_id}"
    ns = _abs_ns(t)
    rows = []
    for i in range(len(t)):
        stamp = f"{ns[i] // 1000}.{ns[i] % 1000:03d}\t"
        a, r = alloc[i] / mb, reserved[i] / mb
        if framework == "pytorch":
            rows.append(["APP", stamp, "", (reserved[i] + APP_RUNTIME_BYTES) / mb, "", "", dev])
            rows.append(["PTA", stamp, a, r, a, "187651203245152", dev])
        else:
            rows.append(["MindSpore", stamp, a, r, a, dev])
    return rows, t, alloc, reserved


def _op_memory(res: RankResult, t: np.ndarray, alloc: np.ndarray, reserved: np.ndarray,
               device_id: int) -> list[list[Any]]:
    rows = []
    mb = 2**20

    def at(x: float) -> tuple[float, float]:
        i = max(int(np.searchsorted(t, x, side="right")) - 1, 0)
        return alloc[i] / mb, reserved[i] / mb

    def stamp(us: float) -> str:
        ns = int(_abs_ns(us)[0])
        return f"{ns // 1000}.{ns % 1000:03d}\t"

    for name, size, a, b in res.allocs:
        aa, ar = at(a)
        if np.isnan(b):
            rows.append([name, round(size / 1024, 3), stamp(a), "", "", "", "", aa, ar, aa,
                         "", "", "", "187651203245152", f"NPU:{device_id}"])
            continue
        ra, rr = at(b)
        d = f"{b - a:.3f}\t"
        rows.append([name, round(size / 1024, 3), stamp(a), stamp(b), stamp(b), d, d, aa, ar,
                     aa, ra, rr, ra, "187651203245152", f"NPU:{device_id}"])
    return rows


def _op_statistic(kern: pd.DataFrame, device_id: int, framework: str) -> list[list[Any]]:
    g = kern.groupby(["type", "core"], sort=False)["dur"]
    stat = pd.DataFrame({"count": g.size(), "total": g.sum(), "min": g.min(), "avg": g.mean(),
                         "max": g.max()}).reset_index()
    total = stat["total"].sum()
    stat = stat.sort_values("total", ascending=False, kind="stable")
    rows = []
    for r in stat.itertuples(index=False):
        row = [r.type, r.core, int(r.count), round(r.total, 3), round(r.min, 3),
               round(r.avg, 3), round(r.max, 3), round(100 * r.total / total, 3)]
        rows.append(([device_id] if framework == "pytorch" else []) + row)
    return rows
