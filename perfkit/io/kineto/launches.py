"""Host operators and the device tasks they launched.

A device task is linked to the operator that launched it by its ``External id`` where
most tasks carry one that an operator carries, else by its runtime launch
(``correlation``): the innermost operator still open on the launching thread when the
launch ran. :func:`_launching_op` finds that operator for every task,
:func:`_kernel_shapes` gives each kernel its operator's name, shapes and dtypes, and
:func:`_device_time` sums the device time each operator launched.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._common.distinct import str_array
from .nesting import _thread_codes, last_open

__all__: list[str] = []  # private to the Kineto reader


def _kernel_shapes(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame,
                   kernels: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Give each GPU kernel the name, shapes and dtypes of the operator that launched it."""
    pos = _launching_op(runtime, cpu, dev)
    ok = pos >= 0
    take = np.where(ok, pos, 0)
    out = kernels
    for col, src in (("op_name", "name"), ("input_shapes", "input_shapes"),
                     ("input_dtypes", "input_dtypes"), ("concrete_inputs", "concrete_inputs"),
                     ("op_id", "external_id")):
        if src not in ops.columns:
            continue
        got = None
        if len(ops) and isinstance(ops[src].dtype, pd.StringDtype):
            # text stays in Arrow (no Python string per kernel); "str" is the dtype a list
            # of Python strings would be given
            got = pd.Series(str_array(ops[src]).take(np.where(ok, pos, -1),
                                                     allow_fill=True),
                            index=out.index)
            if not got.notna().any():
                got = None  # all missing: the dtype is the one inferred below
        if got is None:
            vals = ops[src].to_numpy()[take] if len(ops) else np.full(len(out), pd.NA)
            got = pd.Series(vals, index=out.index).where(ok)
        out[col] = got
    return out


def _launching_op(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
    """Row position in ``cpu`` of the operator that launched each kernel (-1: unknown).

    The operator with the kernel's ``External id`` when most kernels have one that an
    operator carries; otherwise, and for the kernels whose ``External id`` no operator
    carries (those a graph launch ran, where the profiler left them without one), the
    innermost operator still open on the thread of the kernel's runtime launch
    (``correlation``) when the launch ran.
    """
    out = np.full(len(dev), -1, dtype=np.int64)
    if not len(cpu) or not len(dev):
        return out
    ext_cpu = pd.Series(np.arange(len(cpu)), index=cpu["external_id"].astype("Int64"))
    ext_cpu = ext_cpu[ext_cpu.index.notna()]
    # the innermost operator of an External id is the last one (ops nest and share ids
    # only in old traces); keep the last position per id
    ext_cpu = ext_cpu[~ext_cpu.index.duplicated(keep="last")]
    ext_dev = dev["external_id"].astype("Int64")
    rest = np.ones(len(dev), dtype=bool)
    if ext_dev.notna().any() and ext_dev.isin(ext_cpu.index).mean() > 0.5:
        got = ext_cpu.reindex(ext_dev.to_numpy()).to_numpy()
        out = np.where(pd.isna(got), -1, got).astype(np.int64)
        rest = out < 0
        if not rest.any():
            return out
    by_launch = _op_of_launch(runtime, cpu, dev)
    out[rest] = by_launch[rest]
    return out


def _op_of_launch(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
    """Row in ``cpu`` of the innermost operator open on the launching thread (-1: none)."""
    out = np.full(len(dev), -1, dtype=np.int64)
    runtime = runtime[runtime["correlation"].notna()]
    if not len(runtime):
        return out
    cpu_tid, rt_tid = _thread_codes(cpu["tid"], runtime["tid"])
    rt = pd.DataFrame({"corr": runtime["correlation"].astype("Int64").to_numpy(),
                       "tid": rt_tid,
                       "ts": runtime["ts_ns"].to_numpy()}).drop_duplicates("corr")
    k = pd.DataFrame({"corr": dev["correlation"].astype("Int64").to_numpy(),
                      "i": np.arange(len(dev))}).merge(rt, on="corr", how="inner")
    starts = cpu["ts_ns"].to_numpy()
    ends = starts + np.round(np.nan_to_num(cpu["dur_us"].to_numpy()) * 1000).astype(np.int64)
    k_tid, k_ts, k_i = k["tid"].to_numpy(), k["ts"].to_numpy(), k["i"].to_numpy()
    for tid in pd.unique(k_tid[k_tid >= 0]):
        sel = np.flatnonzero(cpu_tid == tid)
        if not len(sel):
            continue
        mine = k_tid == tid
        order = sel[np.argsort(starts[sel], kind="stable")]
        hit = last_open(starts[order], ends[order], k_ts[mine])
        out[k_i[mine]] = np.where(hit >= 0, order[hit], -1)
    return out


def _device_time(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
    """GPU time launched by each cpu_op.

    Newer traces give kernels the ``External id`` of their op; older ones only link a kernel
    to its runtime launch (``correlation``), which is then placed in the last op that started
    before it on the same thread and is still open (searchsorted per thread). In a trace of
    the first kind, a kernel whose ``External id`` no op carries (one a graph launch ran,
    left without it) is placed by its runtime launch too.
    """
    ext_ops = cpu["external_id"].dropna().astype("int64").unique()
    ext_dev = dev["external_id"].dropna().astype("int64")
    if len(ext_dev) and ext_dev.isin(ext_ops).mean() > 0.5:
        key = dev["external_id"].astype("Int64")
        per = dev.groupby(key)["dur_us"].sum()
        # an op whose kernels include one without a duration has an unknown device time
        per[dev["dur_us"].isna().groupby(key).any()] = np.nan
        ids = cpu["external_id"].astype("Int64")
        out = per.reindex(ids.to_numpy()).to_numpy(np.float64)
        # ops that launched nothing on the device have zero device time
        out = np.where(ids.isin(per.index).to_numpy(), out, 0.0)
        rest = ~key.isin(ext_ops).to_numpy(bool)
        if rest.any() and runtime["correlation"].notna().any():
            out = out + _time_by_launch(runtime, cpu, dev[rest])  # NA stays unknown
        return out
    return _time_by_launch(runtime, cpu, dev)


def _time_by_launch(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame
                    ) -> np.ndarray:
    """GPU time of ``dev`` per cpu_op, each kernel in the op open around its launch."""
    runtime = runtime[runtime["correlation"].notna()]
    if not len(runtime) or not len(cpu):
        return np.full(len(cpu), np.nan)
    corr_key = dev["correlation"].astype("Int64")
    per_corr = dev.groupby(corr_key)["dur_us"].sum()
    unknown = dev["dur_us"].isna().groupby(corr_key).any()
    per_corr[unknown] = np.inf  # marks ops that launched a kernel without a duration
    cpu_tid, rt_tid = _thread_codes(cpu["tid"], runtime["tid"])
    gpu = per_corr.reindex(runtime["correlation"].astype("Int64").to_numpy()).to_numpy(np.float64)
    known = ~np.isnan(gpu)
    l_tid, l_ts, l_gpu = rt_tid[known], runtime["ts_ns"].to_numpy()[known], gpu[known]
    start = cpu["ts_ns"].to_numpy()
    end = start + np.round(np.nan_to_num(cpu["dur_us"].to_numpy()) * 1000).astype(np.int64)
    total = np.zeros(len(cpu))
    for tid in pd.unique(cpu_tid[cpu_tid >= 0]):
        mine = l_tid == tid
        if not mine.any():
            continue
        g = np.flatnonzero(cpu_tid == tid)
        g = g[np.argsort(start[g], kind="stable")]
        ts, add = l_ts[mine], l_gpu[mine]
        i = np.searchsorted(start[g], ts, side="right") - 1
        ok = i >= 0
        ic = np.clip(i, 0, len(g) - 1)
        ok &= end[g][ic] >= ts
        np.add.at(total, g[ic[ok]], add[ok])
    return np.where(np.isinf(total), np.nan, total)
