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
from .trace_tables import (
    HOST_COMM_PATTERN,
    NA_NS,
    host_steps,
    overlap_breakdown,
    rel,
    step_index,
    step_spans,
)
from .validate import plausible_origin

__all__ = ["looks_like_kineto", "parse", "parse_trace", "shapes_text", "list_text"]

_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
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
    trace = read_chrome_trace(path, "a PyTorch profiler (Kineto) trace: JSON with traceEvents")
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
    cat = x["cat"].fillna("").to_numpy()
    is_step = x["name"].str.startswith("ProfilerStep#").fillna(False).to_numpy(dtype=bool)
    spans = step_spans(x[is_step & ~np.isin(cat, _DEVICE_CATS)])

    dev = x[np.isin(cat, _DEVICE_CATS)]
    kernels = _kernels(x, dev, spans, origin)
    ops = _ops(x, dev, spans, origin)
    if "input_shapes" in ops.columns and len(kernels):
        kernels = _kernel_shapes(x, dev, kernels, ops)
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
        steps = _host_steps(x, spans, origin, cpu_only)
        notes.append("steps: no device activity in the trace; each step's wall time is its "
                     "ProfilerStep span and its host split comes from the host events"
                     + (" (a CPU-only run: the host computes)" if cpu_only else
                        " (the GPUs' activity was not recorded: the parts are NA)"))
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


def _kernel_steps(x: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """Step of each device event: the host step of the runtime call that launched it."""
    if not len(spans) or not len(dev):
        return np.full(len(dev), np.nan)
    runtime = x[x["cat"].isin(["cuda_runtime", "cuda_driver"])]
    runtime = runtime[runtime["correlation"].notna()]
    launch = pd.Series(runtime["ts_ns"].to_numpy(),
                       index=runtime["correlation"].astype("Int64").to_numpy())
    launch = launch[~launch.index.duplicated()]
    corr = dev["correlation"].astype("Int64")
    launch_ts = launch.reindex(corr.to_numpy()).to_numpy()
    missing = pd.isna(launch_ts)
    launch_ts = np.where(missing, dev["ts_ns"].to_numpy(), launch_ts).astype(np.int64)
    return step_index(launch_ts, spans)


def _kernels(x: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
             origin: int | None) -> pd.DataFrame:
    name = dev["name"].astype("string")
    cat = dev["cat"].astype("string")
    category = np.where(name.str.contains(_NCCL).fillna(False).to_numpy(), "communication",
                        np.where(cat.isin(["gpu_memcpy", "gpu_memset"]).to_numpy(), "memory",
                                 "compute"))
    stream = dev["stream"] if dev["stream"].notna().any() else dev["tid"]
    return pd.DataFrame({
        "step": _kernel_steps(x, dev, spans),
        "name": name.to_numpy(),
        "type": cat.to_numpy(),
        "category": category,
        "stream": pd.to_numeric(stream, errors="coerce").to_numpy(),
        "start_us": rel(dev["ts_ns"].to_numpy(), origin),
        "dur_us": dev["dur_us"].to_numpy(),
        "device": pd.to_numeric(dev["device"], errors="coerce").to_numpy()
        if dev["device"].notna().any() else pd.to_numeric(dev["pid"], errors="coerce").to_numpy(),
        "correlation": pd.to_numeric(dev["correlation"], errors="coerce").to_numpy(),
    })


def _ops(x: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
         origin: int | None) -> pd.DataFrame:
    cpu = x[x["cat"] == "cpu_op"]
    cpu = cpu[~cpu["name"].fillna("").str.startswith("ProfilerStep#")]
    ts = cpu["ts_ns"].to_numpy()
    device = np.full(len(cpu), np.nan)
    if len(dev):
        device = _device_time(x, cpu, dev)
    out = pd.DataFrame({
        "step": step_index(ts, spans),
        "name": cpu["name"].to_numpy(),
        "start_us": rel(ts, origin),
        "dur_us": cpu["dur_us"].to_numpy(),
        "thread": pd.to_numeric(cpu["tid"], errors="coerce").to_numpy(),
        "device_dur_us": device,
        "external_id": pd.to_numeric(cpu["external_id"], errors="coerce").to_numpy(),
    })
    if "input_dims" in cpu.columns:
        out["input_shapes"] = shapes_text(cpu["input_dims"]).to_numpy()
        out["input_dtypes"] = list_text(cpu["input_type"]).to_numpy() \
            if "input_type" in cpu.columns else pd.NA
        if "concrete_inputs" in cpu.columns:
            out["concrete_inputs"] = list_text(cpu["concrete_inputs"]).to_numpy()
    return out


def shapes_text(dims: pd.Series) -> pd.Series:
    """Kineto ``Input Dims`` JSON (``[[4, 64], [], [64]]``) as ``"4,64;;64"``.

    A nested list (a TensorList argument) keeps its inner brackets.
    """
    t = dims.astype("string").str.replace(r"\s+", "", regex=True)
    t = t.str.replace(r"^\[|\]$", "", regex=True)          # the outer list
    t = t.str.replace(r"\],\[", ";", regex=True)            # between inputs
    return t.str.replace(r"^\[|\]$", "", regex=True)       # first and last input


def list_text(values: pd.Series) -> pd.Series:
    """A Kineto JSON list of strings (``["float", "", "True"]``) as ``"float;;True"``."""
    t = values.astype("string").str.strip()
    t = t.str.replace(r'^\[\s*"?|"?\s*\]$', "", regex=True)
    return t.str.replace(r'"\s*,\s*"', ";", regex=True)


def _kernel_shapes(x: pd.DataFrame, dev: pd.DataFrame, kernels: pd.DataFrame,
                   ops: pd.DataFrame) -> pd.DataFrame:
    """Give each GPU kernel the name, shapes and dtypes of the operator that launched it."""
    cpu = x[x["cat"] == "cpu_op"]
    cpu = cpu[~cpu["name"].fillna("").str.startswith("ProfilerStep#")]
    pos = _launching_op(x, cpu, dev)
    ok = pos >= 0
    take = np.where(ok, pos, 0)
    out = kernels.copy()
    for col, src in (("op_name", "name"), ("input_shapes", "input_shapes"),
                     ("input_dtypes", "input_dtypes"), ("concrete_inputs", "concrete_inputs"),
                     ("op_id", "external_id")):
        if src not in ops.columns:
            continue
        vals = ops[src].to_numpy()[take] if len(ops) else np.full(len(out), pd.NA)
        out[col] = pd.Series(vals, index=out.index).where(ok)
    return out


def _launching_op(x: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
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
    runtime = x[x["cat"].isin(["cuda_runtime", "cuda_driver"]) & x["correlation"].notna()]
    if not len(runtime):
        return out
    rt = pd.DataFrame({"corr": runtime["correlation"].astype("Int64").to_numpy(),
                       "tid": runtime["tid"].astype("string").to_numpy(),
                       "ts": runtime["ts_ns"].to_numpy()}).drop_duplicates("corr")
    k = pd.DataFrame({"corr": dev["correlation"].astype("Int64").to_numpy(),
                      "i": np.arange(len(dev))}).merge(rt, on="corr", how="inner")
    starts = cpu["ts_ns"].to_numpy()
    ends = starts + np.round(np.nan_to_num(cpu["dur_us"].to_numpy()) * 1000).astype(np.int64)
    tids = cpu["tid"].astype("string").to_numpy()
    for tid, grp in k.groupby("tid", sort=False):
        sel = np.nonzero(tids == tid)[0]
        if not len(sel):
            continue
        order = sel[np.argsort(starts[sel], kind="stable")]
        s, e = starts[order], ends[order]
        ts = grp["ts"].to_numpy()
        # the last operator that started before the launch and is still open is the
        # innermost one (ops nest on a thread)
        j = np.searchsorted(s, ts, side="right") - 1
        hit = np.full(len(ts), -1, dtype=np.int64)
        for n, (jj, t) in enumerate(zip(j, ts, strict=True)):
            while jj >= 0 and e[jj] < t:
                jj -= 1
            hit[n] = order[jj] if jj >= 0 else -1
        out[grp["i"].to_numpy()] = hit
    return out


def _device_time(x: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame) -> np.ndarray:
    """GPU time launched by each cpu_op.

    Newer traces give kernels the ``External id`` of their op; older ones only link a kernel
    to its runtime launch (``correlation``), which is then placed in the last op that started
    before it on the same thread and is still open (searchsorted per thread).
    """
    ext_ops = set(cpu["external_id"].dropna().astype("int64"))
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
    runtime = x[x["cat"].isin(["cuda_runtime", "cuda_driver"]) & x["correlation"].notna()]
    if not len(runtime) or not len(cpu):
        return np.full(len(cpu), np.nan)
    corr_key = dev["correlation"].astype("Int64")
    per_corr = dev.groupby(corr_key)["dur_us"].sum()
    unknown = dev["dur_us"].isna().groupby(corr_key).any()
    per_corr[unknown] = np.inf  # marks ops that launched a kernel without a duration
    launch = pd.DataFrame({"tid": runtime["tid"].astype("string").to_numpy(),
                           "ts": runtime["ts_ns"].to_numpy(),
                           "gpu": per_corr.reindex(runtime["correlation"].astype("Int64")
                                                   .to_numpy()).to_numpy(np.float64)})
    launch = launch[~np.isnan(launch["gpu"].to_numpy())]
    ops = pd.DataFrame({"tid": cpu["tid"].astype("string").to_numpy(),
                        "start": cpu["ts_ns"].to_numpy(),
                        "end": cpu["ts_ns"].to_numpy()
                        + np.round(np.nan_to_num(cpu["dur_us"].to_numpy()) * 1000)
                        .astype(np.int64),
                        "pos": np.arange(len(cpu))})
    total = np.zeros(len(cpu))
    for tid, grp in ops.groupby("tid", sort=False):
        lsel = launch[launch["tid"] == tid]
        if not len(lsel):
            continue
        g = grp.sort_values("start", kind="stable")
        i = np.searchsorted(g["start"].to_numpy(), lsel["ts"].to_numpy(), side="right") - 1
        ok = i >= 0
        ic = np.clip(i, 0, len(g) - 1)
        ok &= g["end"].to_numpy()[ic] >= lsel["ts"].to_numpy()
        np.add.at(total, g["pos"].to_numpy()[ic[ok]], lsel["gpu"].to_numpy()[ok])
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
    rows = []
    cat = kernels["category"].to_numpy()
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
