"""PyTorch profiler (Kineto) Chrome traces: ``.json`` / ``.json.gz``, one file per rank.

Accepted shapes: ``{"traceEvents": [...], "distributedInfo": {...}, ...}`` or a bare event
array. The rank comes from ``distributedInfo.rank``, else from the file name
(``rank3``, ``..._3.json``). GPU kernels (``kernel``, ``gpu_memcpy``, ``gpu_memset``) become
``kernels``; NCCL kernels (name ``nccl...``) are the communication; ``cpu_op`` events are
``ops``; ``ProfilerStep#N`` host spans define the steps — from the GPU kernels of each
step, or, in a trace without device activity, from the host events inside each span
(:func:`~perfkit.io.trace_tables.host_steps`); ``[memory]`` instants give ``memory``.
``distributedInfo.pg_config`` becomes ``meta.groups`` and ``deviceProperties`` names the
GPUs in ``meta.extra["devices"]``.

With ``record_shapes=True`` every ``cpu_op`` carries ``Input Dims``, ``Input type`` and
``Concrete Inputs``; they become the ops' ``input_shapes`` / ``input_dtypes`` /
``concrete_inputs`` in the Ascend notation (``"4,64,64;64"``: dimensions joined by ``,``,
inputs by ``;``, an empty field for a non-tensor argument), and each GPU kernel gets those
of the operator that launched it (``op_name``, same ``External id``, else the innermost
operator open on the launching thread when its runtime call ran).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ProfileError
from ..profile import ProfileMeta
from ._common import rank_from_name, with_notes
from .chrome import ChromeTrace, read_chrome_trace
from .distinct import numeric, per_distinct, text
from .trace_tables import (
    HOST_COMM_PATTERN,
    NA_NS,
    grouped_breakdown,
    host_steps,
    overlap_breakdown,
    rel,
    step_index,
    step_spans,
)
from .validate import plausible_origin

__all__ = ["looks_like_kineto", "parse", "parse_trace", "shapes_text", "list_text", "last_open",
           "TRACE_COLUMNS", "CATEGORICAL"]

_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
TRACE_COLUMNS = ("external_id", "correlation", "stream", "device", "input_dims", "input_type",
                 "concrete_inputs")
"""``args`` of complete events the tables use (launch links, streams, operator shapes)."""
CATEGORICAL = ("name", "cat", "pid", "tid", "input_dims", "input_type", "concrete_inputs")
"""Text columns of the events read as Categoricals: a few thousand distinct values over
millions of events (:func:`parse_trace` accepts either kind of column)."""
_NCCL = re.compile(r"^nccl|ncclKernel|ncclDevKernel", re.IGNORECASE)


def looks_like_kineto(path: Path) -> bool:
    """True for a file named like a Kineto trace (``*.json``, ``*.json.gz``)."""
    name = path.name.lower()
    return path.is_file() and (name.endswith(".json") or name.endswith(".json.gz"))


@with_notes
def parse(path: Path) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read one Kineto trace file into the canonical tables.

    Raises
    ------
    ProfileError
        The file is not a readable trace, or holds no complete (``ph: X``) event.
    """
    trace = read_chrome_trace(path, "a PyTorch profiler (Kineto) trace: JSON with traceEvents",
                              TRACE_COLUMNS, CATEGORICAL)
    return parse_trace(path, trace, source_format="kineto")


def parse_trace(path: Path, trace: ChromeTrace, source_format: str
                ) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Canonical tables of a decoded GPU trace (see :func:`parse`)."""
    x = trace.x.drop(columns=["task_type", "op_type"], errors="ignore")
    trace.x = x  # the trace's own copy is not needed any more
    if not len(x):
        raise ProfileError(path, "no complete events (ph 'X') found; expected a profiler trace "
                           "with traceEvents")
    notes: list[str] = list(trace.notes)
    origin = plausible_origin(x["ts_ns"].to_numpy())
    is_dev = _isin(x["cat"], _DEVICE_CATS)
    is_step = _bool(per_distinct(x["name"], lambda u: u.str.startswith("ProfilerStep#")))
    # the step is the host's span: Kineto also draws ProfilerStep#N on the GPU's lane
    # (cat gpu_user_annotation, first to last kernel of the step's host span that it saw)
    # and that shorter copy would end the step before its backward kernels are launched
    on_gpu = _isin(x["cat"], ("gpu_user_annotation",))
    spans = step_spans(x[is_step & ~is_dev & ~on_gpu])

    # each part of the trace is taken out once, with only the columns its tables need
    dev = x.loc[is_dev, [c for c in _DEV_COLS if c in x.columns]]
    runtime = x.loc[_isin(x["cat"], _RUNTIME_CATS), ["tid", "ts_ns", "correlation"]]
    cpu = x.loc[_bool(x["cat"] == "cpu_op") & ~is_step,
                [c for c in _CPU_COLS if c in x.columns]]
    # the host events are only needed for the steps of a trace without device steps
    host = None
    if _host_only(runtime, dev, spans):
        host = x[["cat", "name", "ts_ns", "dur_us"]].assign(cat=text(x["cat"]),
                                                           name=text(x["name"]))
    trace.x = x = x.iloc[:0]  # let the trace's columns go before the tables are built
    kernels = _kernels(runtime, dev, spans, origin)
    if not len(spans):
        notes.append("steps: no ProfilerStep#N events (profile without schedule): "
                     "one step over the whole trace, step number NA")
    steps = _steps(dev, kernels, spans)
    steps = _unknown_where_durations_missing(steps, kernels, notes)
    if len(steps):
        notes.append("steps: computed from GPU kernel intervals per ProfilerStep "
                     "(bubble/stage/preparing are Ascend-only and left NA)")
    elif len(spans):
        cpu_only = not trace.device_properties
        steps = _host_steps(host, spans, origin, cpu_only)
        notes.append("steps: no device activity in the trace; each step's wall time is its "
                     "ProfilerStep span and its host split comes from the host events"
                     + (" (a CPU-only run: the host computes)" if cpu_only else
                        " (the GPUs' activity was not recorded: the parts are NA)"))
    del host
    ops = _ops(runtime, cpu, dev, spans, origin)
    if "input_shapes" in ops.columns and len(kernels):
        kernels = _kernel_shapes(runtime, cpu, dev, kernels, ops)
    del cpu, runtime
    comm = kernels[kernels["category"] == "communication"]
    comm_ops = pd.DataFrame({
        "step": comm["step"].to_numpy(), "name": comm["name"].to_numpy(),
        "start_us": comm["start_us"].to_numpy(), "elapse_us": comm["dur_us"].to_numpy(),
    })
    notes.append("comm_ops: NCCL kernels only; transit/wait/sync/idle split, group, "
                 "comm_bandwidth and comm_matrix are not recorded by Kineto")
    memory = _memory(trace, origin)
    if not len(memory):
        notes.append("memory: no [memory] events (profile_memory=False)")
    notes.append("op_memory: not recorded by Kineto")
    rank = trace.rank
    if rank is None:
        rank = rank_from_name(path.name)
        notes.append("rank: no distributedInfo in the trace; "
                     + (f"taken from the file name ({rank})" if rank is not None else "unknown"))
    meta = ProfileMeta(
        source_format=source_format, framework="pytorch", rank=rank,
        world_size=trace.world_size,
        device_type="gpu" if len(dev) or trace.device_properties else "cpu",
        profiler_level=None, groups=_groups(trace),
        origin_ns=origin, path=str(path), notes=notes,
        extra={"backend": trace.backend, "events": trace.n_events,
               "trace_object": trace.is_object,
               "table_files": {t: str(path) for t in ("kernels", "ops", "steps", "comm_ops",
                                                      "memory")},
               "devices": list(trace.device_names)},
    )
    return meta, {"kernels": kernels, "ops": ops, "steps": steps, "comm_ops": comm_ops,
                  "memory": memory}


def _groups(trace: ChromeTrace) -> dict[str, dict[str, object]]:
    """``meta.groups`` from ``distributedInfo.pg_config`` (process groups and their ranks)."""
    out: dict[str, dict[str, object]] = {}
    for pg in trace.process_groups:
        ranks = pg.get("ranks")
        if not isinstance(ranks, list):
            continue
        name = str(pg.get("pg_name", len(out)))
        out[name] = {"group_name": str(pg.get("pg_desc") or name),
                     "global_ranks": [int(r) for r in ranks if isinstance(r, int)],
                     "backend": pg.get("backend_config")}
    return out


def _host_only(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame) -> bool:
    """Whether the steps will come from host events (:func:`_host_steps`).

    Device steps (:func:`_steps`) are empty when there is no device event, or when there
    are ProfilerStep spans but no kernel was launched inside one.
    """
    if not len(dev):
        return True
    return bool(len(spans)) and bool(np.isnan(_kernel_steps(runtime, dev, spans)).all())


def _host_steps(x: pd.DataFrame, spans: pd.DataFrame, origin: int | None,
                cpu_only: bool) -> pd.DataFrame:
    """Steps of a trace without device activity, from its host events per ProfilerStep."""
    cat = x["cat"].fillna("").to_numpy()
    name = x["name"].astype("string").fillna("")
    is_comm = name.str.contains(HOST_COMM_PATTERN, regex=True).fillna(False).to_numpy(bool)
    host = ((cat == "cpu_op") | ((cat == "user_annotation") & is_comm)) \
        & ~name.str.startswith("ProfilerStep#").to_numpy(bool)
    ts = x["ts_ns"].to_numpy()
    host &= ts != NA_NS
    dur = np.nan_to_num(x["dur_us"].to_numpy(np.float64))
    start = ts[host]
    end = start + np.round(dur[host] * 1000).astype(np.int64)
    out = host_steps(start, end, is_comm[host], spans, host_computes=cpu_only)
    out["step_start_us"] = rel(out.pop("step_start_ns").to_numpy(np.int64), origin)
    return out


_RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
_DEV_COLS = ("name", "cat", "pid", "tid", "ts_ns", "dur_us", "external_id", "correlation",
             "stream", "device")
_CPU_COLS = ("name", "tid", "ts_ns", "dur_us", "external_id", "input_dims", "input_type",
             "concrete_inputs")


def _bool(mask: pd.Series) -> np.ndarray:
    """A nullable boolean column as a numpy mask (NA is False)."""
    return mask.fillna(False).to_numpy(dtype=bool)


def _isin(values: pd.Series, wanted: tuple[str, ...]) -> np.ndarray:
    """``values.isin(wanted)`` as a numpy mask (NA is not in it)."""
    return values.isin(list(wanted)).to_numpy(dtype=bool)


def _kernel_steps(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """Step of each device event: the host step of the runtime call that launched it."""
    if not len(spans) or not len(dev):
        return np.full(len(dev), np.nan)
    runtime = runtime[runtime["correlation"].notna()]
    launch = pd.Series(runtime["ts_ns"].to_numpy(),
                       index=runtime["correlation"].astype("Int64").to_numpy())
    launch = launch[~launch.index.duplicated()]
    corr = dev["correlation"].astype("Int64")
    launch_ts = launch.reindex(corr.to_numpy()).to_numpy()
    missing = pd.isna(launch_ts)
    launch_ts = np.where(missing, dev["ts_ns"].to_numpy(), launch_ts).astype(np.int64)
    return step_index(launch_ts, spans)


def _kernels(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
             origin: int | None) -> pd.DataFrame:
    nccl = per_distinct(dev["name"], lambda u: u.str.contains(_NCCL))
    name = text(dev["name"])
    cat = text(dev["cat"])
    category = np.where(nccl.fillna(False).to_numpy(bool), "communication",
                        np.where(cat.isin(["gpu_memcpy", "gpu_memset"]).to_numpy(), "memory",
                                 "compute"))
    stream = dev["stream"] if dev["stream"].notna().any() else dev["tid"]
    return pd.DataFrame({
        "step": _kernel_steps(runtime, dev, spans),
        "name": name.array,
        "type": cat.array,
        "category": category,
        "stream": numeric(stream),
        "start_us": rel(dev["ts_ns"].to_numpy(), origin),
        "dur_us": dev["dur_us"].to_numpy(),
        "device": numeric(dev["device"]) if dev["device"].notna().any() else numeric(dev["pid"]),
        "correlation": numeric(dev["correlation"]),
    })


def _ops(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
         origin: int | None) -> pd.DataFrame:
    ts = cpu["ts_ns"].to_numpy()
    device = np.full(len(cpu), np.nan)
    if len(dev):
        device = _device_time(runtime, cpu, dev)
    out = pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(cpu["name"]).array,
        "start_us": rel(ts, origin),
        "dur_us": cpu["dur_us"].to_numpy(),
        "thread": numeric(cpu["tid"]),
        "device_dur_us": device,
        "external_id": numeric(cpu["external_id"]),
    })
    if "input_dims" in cpu.columns:
        # text columns the schema does not list keep the "str" dtype (NaN when missing)
        out["input_shapes"] = shapes_text(cpu["input_dims"]).astype("str").array
        out["input_dtypes"] = list_text(cpu["input_type"]).astype("str").array \
            if "input_type" in cpu.columns else pd.NA
        if "concrete_inputs" in cpu.columns:
            out["concrete_inputs"] = list_text(cpu["concrete_inputs"]).astype("str").array
    return out


def shapes_text(dims: pd.Series) -> pd.Series:
    """Kineto ``Input Dims`` JSON (``[[4, 64], [], [64]]``) as ``"4,64;;64"``.

    A nested list (a TensorList argument) keeps its inner brackets.
    """
    return per_distinct(dims, _shapes_text)


def list_text(values: pd.Series) -> pd.Series:
    """A Kineto JSON list of strings (``["float", "", "True"]``) as ``"float;;True"``."""
    return per_distinct(values, _list_text)


def _shapes_text(dims: pd.Series) -> pd.Series:
    t = dims.astype("string").str.replace(r"\s+", "", regex=True)
    t = t.str.replace(r"^\[|\]$", "", regex=True)          # the outer list
    t = t.str.replace(r"\],\[", ";", regex=True)            # between inputs
    return t.str.replace(r"^\[|\]$", "", regex=True)       # first and last input


def _list_text(values: pd.Series) -> pd.Series:
    t = values.astype("string").str.strip()
    t = t.str.replace(r'^\[\s*"?|"?\s*\]$', "", regex=True)
    return t.str.replace(r'"\s*,\s*"', ";", regex=True)


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
            got = pd.Series(ops[src].astype("str").array.take(np.where(ok, pos, -1),
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
    operator carries; otherwise the innermost operator still open on the thread of the
    kernel's runtime launch (``correlation``) when the launch ran.
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
    if ext_dev.notna().any() and ext_dev.isin(ext_cpu.index).mean() > 0.5:
        got = ext_cpu.reindex(ext_dev.to_numpy()).to_numpy()
        return np.where(pd.isna(got), -1, got).astype(np.int64)
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


def _thread_codes(*tids: pd.Series) -> tuple[np.ndarray, ...]:
    """The threads of several frames as shared integer codes (-1 where unknown).

    Threads are compared as text (an int tid and the same number written as text are one
    thread), as ``astype("string")`` equality would.
    """
    text = pd.concat([t.astype("string").reset_index(drop=True) for t in tids],
                     ignore_index=True)
    codes, _ = pd.factorize(text)
    bounds = np.cumsum([0] + [len(t) for t in tids])
    return tuple(codes[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True))


def last_open(starts: np.ndarray, ends: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """For each time in ``ts``, the last interval that started at or before it and is open.

    ``starts`` sorted ascending, ``ends`` alongside (int64 ns). Returns, per time ``t``, the
    largest position ``i`` with ``starts[i] <= t`` and ``ends[i] >= t``, or -1. On one
    thread operators nest, so this is the innermost operator open at ``t``.

    The same as walking back from the last interval that started before ``t`` until one
    is still open, but with a sparse table of running maxima of ``ends`` (``levels[k][i]``
    = the largest end among positions ``i - 2**k + 1 .. i``): each time takes at most
    log2(n) vectorised steps instead of a Python loop that can walk the whole thread.
    """
    n = len(starts)
    cur = np.searchsorted(starts, ts, side="right")  # positions < cur started by t
    if not n or not len(ts):
        return cur - 1
    levels = [ends]
    while (1 << len(levels)) <= n:
        prev, span = levels[-1], 1 << (len(levels) - 1)
        nxt = prev.copy()
        np.maximum(prev[span:], prev[:-span], out=nxt[span:])
        levels.append(nxt)
    # invariant: every position in cur .. (last started) has ended before t
    for k in range(len(levels) - 1, -1, -1):
        cand = cur - (1 << k)
        ok = cand >= 0
        idx = np.where(ok, cur - 1, 0)
        ok &= levels[k][idx] < ts
        cur = np.where(ok, cand, cur)
    return cur - 1


def _device_time(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
    """GPU time launched by each cpu_op.

    Newer traces give kernels the ``External id`` of their op; older ones only link a kernel
    to its runtime launch (``correlation``), which is then placed in the last op that started
    before it on the same thread and is still open (searchsorted per thread).
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
        return np.where(ids.isin(per.index).to_numpy(), out, 0.0)
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


def _steps(dev: pd.DataFrame, kernels: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    if not len(dev):
        return pd.DataFrame()
    start = dev["ts_ns"].to_numpy()
    end = start + np.round(np.nan_to_num(dev["dur_us"].to_numpy()) * 1000).astype(np.int64)
    step = kernels["step"].to_numpy()
    if not len(spans):
        whole = pd.DataFrame({"step": [0], "start_ns": [start.min()], "end_ns": [end.max() + 1]})
        out = overlap_breakdown(start, end, kernels["category"].to_numpy(), whole)
        out["step"] = np.nan
        return out
    # windows follow the device: from the first to the last kernel launched in each step
    known = ~np.isnan(step)
    frame = pd.DataFrame({"step": step[known], "s": start[known], "e": end[known]})
    win = frame.groupby("step").agg(start_ns=("s", "min"), end_ns=("e", "max")).reset_index()
    win = win.sort_values("start_ns").reset_index(drop=True)
    win["end_ns"] = np.maximum(win["end_ns"].to_numpy(), win["start_ns"].to_numpy() + 1)
    win["step"] = win["step"].astype(np.int64)
    cat = kernels["category"].to_numpy()
    fast = grouped_breakdown(start[known], end[known], cat[known] == "communication",
                             step[known], win)
    if fast is not None:
        return fast
    rows = []
    for st in win["step"].to_numpy():
        sel = step == st
        one = win[win["step"] == st]
        rows.append(overlap_breakdown(start[sel], end[sel], cat[sel], one))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _unknown_where_durations_missing(steps: pd.DataFrame, kernels: pd.DataFrame,
                                     notes: list[str]) -> pd.DataFrame:
    """Steps holding a kernel without a (plausible) duration: their breakdown is unknown.

    A missing ``dur`` is not a zero-length kernel: the step's computing, communication,
    overlap and free time are set to NA rather than computed without it (with a note).
    """
    missing = kernels["dur_us"].isna().to_numpy()
    if not missing.any() or not len(steps):
        return steps
    cols = [c for c in steps.columns if c.endswith("_us")]
    if steps["step"].isna().all():  # one whole-trace row
        hit = np.ones(len(steps), dtype=bool)
    else:
        bad = set(pd.unique(kernels["step"].to_numpy()[missing]))
        hit = steps["step"].isin(bad).to_numpy()
    if hit.any():
        steps = steps.copy()
        steps.loc[hit, cols] = np.nan
        notes.append(f"steps: {int(missing.sum())} GPU kernel(s) have no duration; the "
                     f"breakdown of {int(hit.sum())} step(s) holding them is unknown (NA)")
    return steps


def _memory(trace: ChromeTrace, origin: int | None) -> pd.DataFrame:
    ins = trace.instants
    if not len(ins) or "total_allocated" not in ins:
        return pd.DataFrame()
    mem = ins[ins["name"] == "[memory]"]
    return pd.DataFrame({
        "component": pd.Series(["allocator"] * len(mem), dtype="string"),
        "ts_us": rel(mem["ts_ns"].to_numpy(), origin),
        "allocated_bytes": mem["total_allocated"].to_numpy(),
        "reserved_bytes": mem["total_reserved"].to_numpy(),
        "alloc_delta_bytes": mem["bytes"].to_numpy(),
        "device": pd.to_numeric(mem["device_id"], errors="coerce").to_numpy(),
    })
