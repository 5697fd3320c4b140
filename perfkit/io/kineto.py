"""PyTorch profiler (Kineto) Chrome traces: ``.json`` / ``.json.gz``, one file per rank.

Accepted shapes: ``{"traceEvents": [...], "distributedInfo": {...}, ...}`` or a bare event
array, of every schema since PyTorch 1.8: the categories of PyTorch 1.8-1.9 (``Operator``,
``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``; the device task's operator link written
``external id``) and of PyTorch >= 1.10 (``cpu_op``, ``user_annotation``, ``cuda_runtime``,
``cuda_driver``, ``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``gpu_user_annotation``,
``python_function``, ``ac2g`` flows ...) are read as one set of kinds
(:func:`perfkit.io.categories.kineto_kind`); CUDA and ROCm/HIP traces alike (ROCm keeps the
``cuda_runtime`` category, with ``hipLaunchKernel``, ``hipExtModuleLaunchKernel``,
``hipMemcpyAsync`` ... as names).

- ``kernels``: the device tasks (kernels, memcpy, memset). Communication is every kernel of
  a communication library (:func:`perfkit.io.categories.comm_family`: NCCL, RCCL, MSCCL,
  DeepEP, NVSHMEM, symmetric-memory and custom all-reduce kernels), with its ``family``.
  GPU-side user annotations (``gpu_user_annotation``: a ``record_function`` range drawn
  over the kernels it covered, ``ProfilerStep#N`` among them) are not tasks and are left out.
- ``ops``: the host operators (``cpu_op``) and host annotations (``user_annotation``;
  ``cat`` says which), with ``self_us`` (the time not spent in an operator nested inside,
  on the same thread) and the device time each launched.
- ``steps``: a step is its host ``ProfilerStep#N`` span; its device work is the tasks
  whose runtime launch (same ``correlation`` id) ran inside that span. A task launched
  outside every span (before the trace began, between steps) belongs to no step: it
  neither stretches a step nor counts in one. The step's window runs from its first to its
  last task. A CPU-only run (no device in the trace) is split from its host events: what
  the threads compute, and the collectives (``gloo:*`` on gloo's own threads, ``c10d::*``,
  ``record_param_comms``). A trace without ``ProfilerStep`` is one step over the whole
  trace (step number NA), and a note says so.
- ``comm_ops``: the communication kernels, with the process group, collective and message
  size where the kernel's args record them (PyTorch >= 2.1); on a CPU-only run, the host
  collectives.
- ``memory``: ``[memory]`` instants. Those of a device (``Device Type`` 1 / ``Device Id``
  >= 0) are the ``allocator`` component; host allocator samples (``Device Type`` 0 /
  ``Device Id`` -1) are the ``host`` component, never the device's memory. Traces of
  PyTorch <= 1.9 record only each allocation's size: the allocated bytes are then the
  running sum since the trace began (memory held before it is not seen; a note says so).

The rank comes from ``distributedInfo.rank``, else from an explicit pattern of the file
name (:func:`perfkit.io._common.rank_from_name`), never from other digits; a note says
where. ``distributedInfo.pg_config`` becomes ``meta.groups`` and ``deviceProperties``
names the GPUs in ``meta.extra["devices"]``; ``meta.extra["vendor"]`` is ``"nvidia"`` or
``"amd"`` when the trace says (runtime and header).

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
from ..format import counted, plural
from ..profile import ProfileMeta
from ._common import rank_from_name, with_notes
from .categories import (
    DEVICE_KINDS,
    HOST_COMM_PATTERN,
    comm_family,
    host_comm_family,
    kineto_kind,
)
from .chrome import ChromeTrace, read_chrome_trace
from .distinct import codes, numeric, per_distinct, text
from .trace_tables import (
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
           "self_times", "TRACE_COLUMNS", "CATEGORICAL"]

TRACE_COLUMNS = ("external_id", "correlation", "stream", "device", "input_dims", "input_type",
                 "concrete_inputs", "pg_name", "collective", "in_nelems", "out_nelems",
                 "msg_dtype")
"""``args`` of complete events the tables use (launch links, streams, operator shapes, what
a collective's kernel says about it)."""
CATEGORICAL = ("name", "cat", "pid", "tid", "input_dims", "input_type", "concrete_inputs",
               "pg_name", "collective", "msg_dtype")
"""Text columns of the events read as Categoricals: a few thousand distinct values over
millions of events (:func:`parse_trace` accepts either kind of column)."""

_DTYPE_BYTES = {"float": 4, "float32": 4, "float64": 8, "double": 8, "half": 2, "float16": 2,
                "bfloat16": 2, "c10::bfloat16": 2, "c10::half": 2, "int": 4, "int32": 4,
                "int64": 8, "long": 8, "long int": 8, "int8": 1, "uint8": 1,
                "unsigned char": 1, "signed char": 1, "char": 1, "bool": 1, "int16": 2,
                "short": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
                "c10::float8_e5m2": 1}
"""Bytes per element of the ``dtype`` names a collective's args use (lower-cased)."""


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


class _Kinds:
    """The kind (:data:`perfkit.io.categories.KINETO_KINDS`) of every event, as masks.

    Worked out once per distinct category (a Categorical column already holds them).
    """

    def __init__(self, cat: pd.Series) -> None:
        code, uniques = codes(cat)
        self._code = code
        self._kind = kineto_kind(pd.Series(uniques, dtype="string")).fillna("").to_numpy(
            dtype=object)

    def mask(self, *kinds: str) -> np.ndarray:
        """Events of any of ``kinds``."""
        wanted = np.flatnonzero(np.isin(self._kind, list(kinds)))
        return np.isin(self._code, wanted)

    def of(self, sel: np.ndarray) -> np.ndarray:
        """The kind of the selected events (object array of text)."""
        c = self._code[sel]
        lut = np.append(self._kind, "")  # code -1 (no category) has no kind
        return lut[np.where(c < 0, len(self._kind), c)]


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
    end_ns = _last_end(x)
    kinds = _Kinds(x["cat"])
    is_dev = kinds.mask(*DEVICE_KINDS)
    is_step = _bool(per_distinct(x["name"], lambda u: u.str.startswith("ProfilerStep#")))
    # the step is the host's span: Kineto also draws ProfilerStep#N on the GPU's lane
    # (gpu_user_annotation, first to last kernel of the step's host span that it saw)
    # and that shorter copy would end the step before its backward kernels are launched
    on_gpu = kinds.mask("gpu_user_annotation")
    spans = step_spans(x[is_step & ~is_dev & ~on_gpu])

    # each part of the trace is taken out once, with only the columns its tables need
    dev = x.loc[is_dev, [c for c in _DEV_COLS if c in x.columns]]
    dev = dev.assign(kind=kinds.of(is_dev))
    is_rt = kinds.mask("runtime")
    runtime = x.loc[is_rt, ["tid", "ts_ns", "correlation", "name"]]
    host_sel = kinds.mask("cpu_op", "user_annotation") & ~is_step
    cpu = x.loc[host_sel, [c for c in _CPU_COLS if c in x.columns]]
    cpu = cpu.assign(kind=kinds.of(host_sel))
    trace.x = x = x.iloc[:0]  # let the trace's columns go before the tables are built
    vendor = _vendor(trace, runtime["name"], dev["name"])
    cpu_only = not len(dev) and not trace.device_properties and not len(runtime)

    kernels = _kernels(runtime, dev, spans, origin, vendor, notes)
    steps = _steps(dev, kernels, spans)
    steps = _unknown_where_durations_missing(steps, kernels, notes)
    if not len(spans):
        notes.append("steps: no ProfilerStep#N events (profile without schedule): "
                     "one step over the whole trace, step number NA")
    if len(steps):
        notes.append("steps: a step is its host ProfilerStep span; its device work is the "
                     "GPU tasks it launched (runtime call with the same correlation id), from "
                     "the first to the last of them (bubble/stage/preparing are Ascend-only "
                     "and left NA)" if len(spans) else
                     "steps: computed from the GPU kernel intervals of the whole trace "
                     "(bubble/stage/preparing are Ascend-only and left NA)")
    else:
        whole = spans if len(spans) else _whole_trace_span(cpu, origin)
        if len(whole):
            steps = _host_steps(cpu, whole, origin, cpu_only)
            if not len(spans):
                steps["step"] = np.nan
            notes.append("steps: no device activity in the trace; each step's wall time is "
                         "its ProfilerStep span and its host split comes from the host events"
                         + (" (a CPU-only run: the host computes; a thread's time inside a "
                            "collective is communication, not computing)" if cpu_only else
                            " (the GPUs' activity was not recorded: the parts are NA)"))
    ops = _ops(runtime, cpu, dev, spans, origin)
    if "input_shapes" in ops.columns and len(kernels):
        kernels = _kernel_shapes(runtime, cpu, dev, kernels, ops)
    del runtime
    split = ("transit/wait/sync/idle split, comm_bandwidth and comm_matrix are not "
             "recorded by Kineto")
    comm_ops = _host_comm_ops(cpu, spans, origin) if cpu_only else \
        _kernel_comm_ops(dev, kernels)
    fams = ", ".join(sorted(set(comm_ops["family"].dropna()))) if len(comm_ops) else ""
    if cpu_only:
        notes.append(f"comm_ops: the host collectives of a CPU-only run ({fams or 'none'}); "
                     + split)
    elif len(comm_ops):
        notes.append(f"comm_ops: the communication kernels ({fams}); " + split)
    else:
        # a GPU job whose collectives ran on the host (the gloo backend with CUDA tensors)
        comm_ops = _host_comm_ops(cpu, spans, origin)
        if len(comm_ops):
            notes.append("comm_ops: no communication kernel on the GPU; the collectives ran "
                         "on the host (" + ", ".join(sorted(set(comm_ops["family"])))
                         + "): comm_ops holds those host spans, which the device's step "
                         "breakdown does not count; " + split)
        else:
            notes.append("comm_ops: no communication kernel nor host collective in this "
                         "trace")
    del cpu, dev
    memory = _memory(trace, origin, notes)
    if not len(memory):
        notes.append("memory: no [memory] events (profile_memory=False)")
    notes.append("op_memory: not recorded by Kineto")
    rank, how = trace.rank, "distributedInfo.rank"
    if rank is None:
        rank = rank_from_name(path.name)
        how = "the file name" if rank is not None else ""
    notes.append(f"rank: {rank} from {how}" if rank is not None else
                 "rank: not in the trace (no distributedInfo) nor in the file name "
                 "(rank3, rank_3, worker3 ...)")
    families = sorted(set(comm_ops["family"].dropna())) if "family" in comm_ops else []
    meta = ProfileMeta(
        source_format=source_format, framework="pytorch", rank=rank,
        world_size=trace.world_size,
        device_type="cpu" if cpu_only else "gpu",
        profiler_level=None, groups=_groups(trace),
        origin_ns=origin, path=str(path), notes=notes,
        extra={"backend": trace.backend, "events": trace.n_events,
               "trace_object": trace.is_object,
               "table_files": {t: str(path) for t in ("kernels", "ops", "steps", "comm_ops",
                                                      "memory")},
               "devices": list(trace.device_names), "vendor": vendor,
               "header": dict(trace.header), "end_ns": end_ns,
               "rank_source": how or None,
               "profiler_steps": sorted(int(s) for s in spans["step"]) if len(spans) else [],
               "comm_families": families},
    )
    return meta, {"kernels": kernels, "ops": ops, "steps": steps, "comm_ops": comm_ops,
                  "memory": memory}


def _last_end(x: pd.DataFrame) -> int | None:
    """Absolute ns of the last end of a complete event (for telling runs apart)."""
    ts = x["ts_ns"].to_numpy()
    ok = ts != NA_NS
    if not ok.any():
        return None
    end = ts[ok] + np.round(np.nan_to_num(x["dur_us"].to_numpy(np.float64)[ok]) * 1000
                            ).astype(np.int64)
    return int(end.max())


def _vendor(trace: ChromeTrace, runtime_names: pd.Series, dev_names: pd.Series) -> str | None:
    """``"amd"`` or ``"nvidia"`` from the trace header, GPU names and runtime calls."""
    h = trace.header
    gpus = " ".join(trace.device_names).lower()
    _, distinct = codes(runtime_names)  # each runtime call's name once
    rt = pd.Series(distinct, dtype="string").dropna()
    if "roctracer_version" in h or "hip_runtime_version" in h or \
            re.search(r"\b(?:amd|instinct|radeon)\b|\bmi\d{3}", gpus) or \
            bool(rt.str.startswith("hip").any()):
        return "amd"
    if "cupti_version" in h or "cuda_runtime_version" in h or \
            re.search(r"nvidia|tesla|geforce|quadro|\b[ahbvlt]\d{2,3}\b", gpus) or \
            bool(rt.str.match(r"cu[A-Z]|cuda").any()):
        return "nvidia"
    return None


def _whole_trace_span(cpu: pd.DataFrame, origin: int | None) -> pd.DataFrame:
    """One window over all host events (a CPU-only trace without ProfilerStep)."""
    ts = cpu["ts_ns"].to_numpy()
    ok = ts != NA_NS
    if not ok.any():
        return pd.DataFrame(columns=["step", "start_ns", "end_ns"])
    end = ts[ok] + np.round(np.nan_to_num(cpu["dur_us"].to_numpy(np.float64)[ok]) * 1000
                            ).astype(np.int64)
    return pd.DataFrame({"step": [0], "start_ns": [int(ts[ok].min())],
                         "end_ns": [int(max(end.max(), ts[ok].min() + 1))]})


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


def _host_intervals(cpu: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, np.ndarray]:
    """(start_ns, end_ns, is_comm, is_compute, thread code) of the timed host events.

    Compute: host operators and annotations (``DistributedDataParallel.forward``, the
    optimizer step: the host runs Python there too) that are not communication;
    communication: those that are (:data:`~perfkit.io.categories.HOST_COMM_PATTERN`).
    """
    is_comm = _bool(per_distinct(cpu["name"], lambda u: u.str.contains(HOST_COMM_PATTERN,
                                                                        regex=True)))
    ts = cpu["ts_ns"].to_numpy()
    ok = ts != NA_NS
    dur = np.nan_to_num(cpu["dur_us"].to_numpy(np.float64))
    start = ts[ok]
    end = start + np.round(dur[ok] * 1000).astype(np.int64)
    (thread,) = _thread_codes(cpu["tid"])
    return start, end, is_comm[ok], ~is_comm[ok], thread[ok]


def _host_steps(cpu: pd.DataFrame, spans: pd.DataFrame, origin: int | None,
                cpu_only: bool) -> pd.DataFrame:
    """Steps of a trace without device activity, from its host events per ProfilerStep."""
    start, end, is_comm, comp, thread = _host_intervals(cpu)
    keep = is_comm | comp
    out = host_steps(start[keep], end[keep], is_comm[keep], spans, host_computes=cpu_only,
                     thread=thread[keep])
    out["step_start_us"] = rel(out.pop("step_start_ns").to_numpy(np.int64), origin)
    return out


def _host_comm_ops(cpu: pd.DataFrame, spans: pd.DataFrame, origin: int | None
                   ) -> pd.DataFrame:
    """The collectives of a CPU-only run, one row each, from the host events.

    Each collective is recorded at several levels: the ``c10d::allreduce_`` operator the
    training code called (returning early when the work is async), ``record_param_comms``
    inside it, and the backend's span where the data moves (``gloo:all_reduce`` on one of
    gloo's threads). The backend's spans are taken when the trace has them, else the
    outermost c10d operators (``record_param_comms`` where it stands alone).
    """
    fam = host_comm_family(cpu["name"])
    for family in ("gloo", "c10d", "nccl"):
        sel = fam.eq(family).fillna(False).to_numpy(bool)
        if sel.any():
            break
    else:
        return pd.DataFrame({"step": [], "name": [], "start_us": [], "elapse_us": [],
                             "family": pd.array([], dtype="string"),
                             "thread": pd.array([], dtype="Int64")})
    c = cpu[sel]
    if family == "c10d":
        c = c[_outermost(c)]
    ts = c["ts_ns"].to_numpy()
    return pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(c["name"]).array,
        "start_us": rel(ts, origin),
        "elapse_us": c["dur_us"].to_numpy(np.float64),
        "family": pd.array([family] * len(c), dtype="string"),
        "thread": pd.array(numeric(c["tid"]).astype(np.float64), dtype="Float64"
                           ).astype("Int64"),
    })


def _outermost(c: pd.DataFrame) -> np.ndarray:
    """Events not nested inside another of ``c`` on the same thread."""
    if not len(c):
        return np.zeros(0, dtype=bool)
    start = c["ts_ns"].to_numpy()
    end = start + np.round(np.nan_to_num(c["dur_us"].to_numpy(np.float64)) * 1000
                           ).astype(np.int64)
    (thread,) = _thread_codes(c["tid"])
    parent = _parents(start, end, thread)
    return parent < 0


def _kernel_comm_ops(dev: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per communication kernel, with what its args say about the collective."""
    comm = (kernels["category"] == "communication").to_numpy(bool)
    k = kernels[comm]
    out = pd.DataFrame({
        "step": k["step"].to_numpy(), "name": k["name"].to_numpy(),
        "start_us": k["start_us"].to_numpy(), "elapse_us": k["dur_us"].to_numpy(),
        "family": k["family"].array,
    })
    d = dev[comm]
    if "pg_name" in d.columns and d["pg_name"].notna().any():
        out["group"] = text(d["pg_name"]).array
    if "collective" in d.columns and d["collective"].notna().any():
        out["collective"] = text(d["collective"]).array
    if "in_nelems" in d.columns and d["in_nelems"].notna().any():
        size = per_distinct(d["msg_dtype"], lambda u: u.str.lower().map(
            _DTYPE_BYTES.get).astype("Float64")) if "msg_dtype" in d.columns else None
        per = np.nan if size is None else size.astype("float64").to_numpy()
        out["in_msg_bytes"] = d["in_nelems"].to_numpy(np.float64) * per
        if "out_nelems" in d.columns:
            out["out_msg_bytes"] = d["out_nelems"].to_numpy(np.float64) * per
    return out


_DEV_COLS = ("name", "cat", "pid", "tid", "ts_ns", "dur_us", "external_id", "correlation",
             "stream", "device", "pg_name", "collective", "in_nelems", "out_nelems",
             "msg_dtype")
_CPU_COLS = ("name", "tid", "ts_ns", "dur_us", "external_id", "input_dims", "input_type",
             "concrete_inputs")


def _bool(mask: pd.Series) -> np.ndarray:
    """A nullable boolean column as a numpy mask (NA is False)."""
    return mask.fillna(False).to_numpy(dtype=bool)


def _kernel_steps(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
                  notes: list[str] | None = None) -> np.ndarray:
    """Step of each device event: the host step of the runtime call that launched it.

    A task whose launch is not in the trace (launched before the trace began) belongs to
    no step when the trace records runtime calls; a trace without any runtime call (device
    activity only) places each task by its own start instead, and says so.
    """
    if not len(spans) or not len(dev):
        return np.full(len(dev), np.nan)
    rt = runtime[runtime["correlation"].notna()]
    launch = pd.Series(rt["ts_ns"].to_numpy(),
                       index=rt["correlation"].astype("Int64").to_numpy())
    launch = launch[~launch.index.duplicated()]
    corr = dev["correlation"].astype("Int64")
    launch_ts = launch.reindex(corr.to_numpy()).to_numpy()
    missing = pd.isna(launch_ts)
    if not len(rt):
        out = step_index(dev["ts_ns"].to_numpy(), spans)
        if notes is not None:
            notes.append("steps: the trace records no runtime launch (device activity only): "
                         "each GPU task is placed in the step its own start falls in")
        return out
    launch_ts = np.where(missing, NA_NS, launch_ts).astype(np.int64)
    out = step_index(launch_ts, spans)
    if notes is not None:
        n_before = int(missing.sum())
        n_outside = int((np.isnan(out) & ~missing).sum())
        if n_before:
            notes.append(f"steps: {n_before} GPU task(s) were launched before the trace began "
                         "(no runtime call with their correlation id in the trace): they "
                         "belong to no step")
        if n_outside:
            notes.append(f"steps: {n_outside} GPU task(s) were launched outside every "
                         "ProfilerStep span: they belong to no step")
    return out


def _kernels(runtime: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
             origin: int | None, vendor: str | None = None,
             notes: list[str] | None = None) -> pd.DataFrame:
    name = text(dev["name"])
    kind = pd.Series(dev["kind"].to_numpy(dtype=object) if "kind" in dev.columns
                     else kineto_kind(dev["cat"]).to_numpy(dtype=object),
                     index=dev.index, dtype="string")
    family = comm_family(dev["name"], vendor)
    comm = family.notna().to_numpy(bool)
    category = np.where(comm, "communication",
                        np.where(kind.isin(["gpu_memcpy", "gpu_memset"]).to_numpy(bool),
                                 "memory", "compute"))
    stream = dev["stream"] if dev["stream"].notna().any() else dev["tid"]
    return pd.DataFrame({
        "step": _kernel_steps(runtime, dev, spans, notes),
        "name": name.array,
        "type": kind.array,
        "category": category,
        "stream": numeric(stream),
        "start_us": rel(dev["ts_ns"].to_numpy(), origin),
        "dur_us": dev["dur_us"].to_numpy(),
        "device": numeric(dev["device"]) if dev["device"].notna().any() else numeric(dev["pid"]),
        "correlation": numeric(dev["correlation"]),
        "family": family.array,
    })


def _ops(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
         origin: int | None) -> pd.DataFrame:
    ts = cpu["ts_ns"].to_numpy()
    device = np.full(len(cpu), np.nan)
    if len(dev):
        device = _device_time(runtime, cpu, dev)
    end = ts + np.round(np.nan_to_num(cpu["dur_us"].to_numpy(np.float64)) * 1000
                        ).astype(np.int64)
    (thread_code,) = _thread_codes(cpu["tid"])
    out = pd.DataFrame({
        "step": step_index(ts, spans),
        "name": text(cpu["name"]).array,
        "start_us": rel(ts, origin),
        "dur_us": cpu["dur_us"].to_numpy(),
        "thread": numeric(cpu["tid"]),
        "device_dur_us": device,
        "external_id": numeric(cpu["external_id"]),
        "cat": pd.array(cpu["kind"].to_numpy(dtype=object), dtype="string"),
        "self_us": self_times(np.where(ts == NA_NS, np.iinfo(np.int64).max, ts), end,
                              thread_code, cpu["dur_us"].to_numpy(np.float64)),
    })
    if "input_dims" in cpu.columns:
        # text columns the schema does not list keep the "str" dtype (NaN when missing)
        out["input_shapes"] = shapes_text(cpu["input_dims"]).astype("str").array
        out["input_dtypes"] = list_text(cpu["input_type"]).astype("str").array \
            if "input_type" in cpu.columns else pd.NA
        if "concrete_inputs" in cpu.columns:
            out["concrete_inputs"] = list_text(cpu["concrete_inputs"]).astype("str").array
    return out


def self_times(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray,
               dur_us: np.ndarray) -> np.ndarray:
    """Self time (µs) of nested host events: duration minus the durations of the events
    directly inside it on the same thread (never below zero; NA where ``dur_us`` is).

    The events of a thread nest (an operator calls the operators it is made of); the sum
    of the self times of a thread is the union of its events, each microsecond counted once.
    """
    parent = _parents(start_ns, end_ns, thread)
    dur = np.nan_to_num(dur_us.astype(np.float64))
    child = np.zeros(len(dur))
    has = parent >= 0
    np.add.at(child, parent[has], dur[has])
    out = np.maximum(dur - child, 0.0)
    out[np.isnan(dur_us.astype(np.float64))] = np.nan
    return out


def _parents(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Row of the innermost event enclosing each event on its thread (-1: none)."""
    n = len(start_ns)
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    # per thread, by start, the enclosing event first (longer first at equal starts)
    order = np.lexsort((-end_ns, start_ns, thread))
    th, st, en = thread[order], start_ns[order], end_ns[order]
    bounds = np.flatnonzero(np.r_[True, th[1:] != th[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b - a < 2:
            continue
        pos = last_open(st[a:b], en[a:b], st[a:b], upto=np.arange(b - a), closed_end=True)
        ok = pos >= 0
        out[order[a:b][ok]] = order[a:b][pos[ok]]
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


def last_open(starts: np.ndarray, ends: np.ndarray, ts: np.ndarray,
              upto: np.ndarray | None = None, closed_end: bool = False) -> np.ndarray:
    """For each time in ``ts``, the last interval that started at or before it and is open.

    ``starts`` sorted ascending, ``ends`` alongside (int64 ns). Returns, per time ``t``, the
    largest position ``i`` with ``starts[i] <= t`` and ``ends[i] >= t``, or -1. On one
    thread operators nest, so this is the innermost operator open at ``t``.
    ``upto`` (per time): only positions below it are candidates (the events before one
    event, to find the one enclosing it); ``closed_end``: an interval ending exactly at
    ``t`` is not open (``ends[i] > t``).

    The same as walking back from the last interval that started before ``t`` until one
    is still open, but with a sparse table of running maxima of ``ends`` (``levels[k][i]``
    = the largest end among positions ``i - 2**k + 1 .. i``): each time takes at most
    log2(n) vectorised steps instead of a Python loop that can walk the whole thread.
    """
    n = len(starts)
    cur = np.searchsorted(starts, ts, side="right")  # positions < cur started by t
    if upto is not None:
        cur = np.minimum(cur, upto)
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
        ok &= (levels[k][idx] <= ts) if closed_end else (levels[k][idx] < ts)
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
        n = int(missing.sum())
        notes.append(f"steps: {counted(n, 'GPU kernel')} {plural(n, 'has', 'have')} no "
                     f"duration; the breakdown of {counted(int(hit.sum()), 'step')} holding "
                     f"{plural(n, 'it', 'them')} is unknown (NA)")
    return steps




def _memory(trace: ChromeTrace, origin: int | None, notes: list[str]) -> pd.DataFrame:
    """``[memory]`` instants: the device allocator (``allocator``) and the host (``host``)."""
    ins = trace.instants
    if not len(ins) or "bytes" not in ins:
        return pd.DataFrame()
    mem = ins[ins["name"].astype("string").eq("[memory]").fillna(False).to_numpy(bool)]
    if not len(mem):
        return pd.DataFrame()
    n = len(mem)
    dev_type = pd.to_numeric(mem["device_type"], errors="coerce").to_numpy(np.float64) \
        if "device_type" in mem else np.full(n, np.nan)
    dev_id = pd.to_numeric(mem["device_id"], errors="coerce").to_numpy(np.float64) \
        if "device_id" in mem else np.full(n, np.nan)
    # c10 DeviceType 0 is the CPU; a host sample has Device Id -1 (older traces: no type)
    host = (dev_type == 0) | (np.isnan(dev_type) & (dev_id < 0))
    component = np.where(host, "host", "allocator")
    ts = mem["ts_ns"].to_numpy()
    delta = mem["bytes"].to_numpy(np.float64)
    allocated = mem["total_allocated"].to_numpy(np.float64) if "total_allocated" in mem \
        else np.full(n, np.nan)
    reserved = mem["total_reserved"].to_numpy(np.float64) if "total_reserved" in mem \
        else np.full(n, np.nan)
    if np.isnan(allocated).all() and not np.isnan(delta).all():
        # PyTorch <= 1.9: each sample is one allocation (+) or free (-) only
        frame = pd.DataFrame({"c": component, "d": np.nan_to_num(dev_id, nan=-1.0),
                              "ts": ts, "b": np.nan_to_num(delta)})
        frame = frame.sort_values("ts", kind="stable")  # the index keeps the file order
        allocated = frame.groupby(["c", "d"], sort=False)["b"].cumsum().sort_index(
        ).to_numpy(np.float64)
        notes.append("memory: the trace records only the size of each allocation and free "
                     "(PyTorch <= 1.9, no Total Allocated): allocated_bytes is their running "
                     "sum since the trace began (memory held before it is not seen)")
    if host.any():
        n_host = int(host.sum())
        notes.append(f"memory: {counted(n_host, 'host allocator sample')} (Device Type 0 / "
                     f"Device Id -1) {plural(n_host, 'is', 'are')} the 'host' component, not "
                     "device memory")
    return pd.DataFrame({
        "component": pd.array(component, dtype="string"),
        "ts_us": rel(ts, origin),
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
        "alloc_delta_bytes": delta,
        "device": np.where(host, np.nan, dev_id),
    })
