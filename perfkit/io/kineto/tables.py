"""A Kineto trace read into the canonical tables: :func:`parse` and :func:`parse_trace`.

:func:`parse` decodes the file (:func:`perfkit.io.chrome.decode.read_chrome_trace`, with the
columns :data:`TRACE_COLUMNS` and the Categoricals :data:`CATEGORICAL`);
:func:`parse_trace` takes each part of the trace out once (device tasks, runtime calls,
host operators), builds each table from its module and writes the notes and the
:class:`~perfkit.profile.ProfileMeta`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...errors import ProfileError
from ...format import counted
from ...profile import ProfileMeta
from .._common import rank_from_name, with_notes
from .._common.distinct import per_distinct
from ..canonical.categories import DEVICE_KINDS
from ..canonical.comm_words import KINETO_NONE, KINETO_UNRECORDED
from ..canonical.validate import plausible_origin
from ..chrome.decode import ChromeTrace, read_chrome_trace
from ..chrome.repeats import drop_events_written_twice
from ..chrome.tables import step_spans
from .comm import _host_comm_ops, _kernel_comm_ops, named_note
from .graphs import _graph_note
from .iterations import FROM_OPTIMIZER, one_step_note, optimizer_spans
from .kernels import _kernels
from .kinds import _bool, _Kinds
from .launches import _kernel_shapes
from .memory import _memory
from .meta import _device_facts, _groups, _last_end, _vendor
from .ops import _ops
from .steps import (
    _device_marked_steps,
    _host_steps,
    _steps,
    _unknown_where_durations_missing,
    _whole_trace_span,
)

__all__ = ["looks_like_kineto", "parse", "parse_trace", "TRACE_COLUMNS", "CATEGORICAL"]


TRACE_COLUMNS = ("external_id", "correlation", "stream", "device", "input_dims", "input_type",
                 "concrete_inputs", "pg_name", "collective", "in_nelems", "out_nelems",
                 "msg_dtype", "graph_id", "group_size", "pg_ranks")
"""``args`` of complete events the tables use (launch links, streams, operator shapes, what
a collective's kernel says about it)."""

CATEGORICAL = ("name", "cat", "pid", "tid", "input_dims", "input_type", "concrete_inputs",
               "pg_name", "collective", "msg_dtype", "pg_ranks")
"""Text columns of the events read as Categoricals: a few thousand distinct values over
millions of events (:func:`parse_trace` accepts either kind of column)."""

_DEV_COLS = ("name", "cat", "pid", "tid", "ts_ns", "dur_us", "external_id", "correlation",
             "stream", "device", "pg_name", "collective", "in_nelems", "out_nelems",
             "msg_dtype", "graph_id", "group_size", "pg_ranks")

_CPU_COLS = ("name", "tid", "ts_ns", "dur_us", "external_id", "input_dims", "input_type",
             "concrete_inputs", "pg_name", "collective", "in_nelems", "out_nelems", "msg_dtype",
             "group_size", "pg_ranks")


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
    written_twice = drop_events_written_twice(trace, path.name)
    x = trace.x.drop(columns=["task_type", "op_type"], errors="ignore")
    trace.x = x  # the trace's own copy is not needed any more
    if not len(x):
        raise ProfileError(path, "no complete events (ph 'X') found; expected a profiler trace "
                           "with traceEvents")
    notes: list[str] = [*trace.notes, *written_twice]
    origin = plausible_origin(x["ts_ns"].to_numpy())
    end_ns = _last_end(x)
    kinds = _Kinds(x["cat"])
    no_cat = int(x["cat"].isna().sum())
    if no_cat:
        notes.append(f"{counted(no_cat, 'complete event')} without a category (cat), so "
                     "neither kernel, operator nor runtime call: left out of every table")
    python_functions = int(kinds.mask("python_function").sum())  # with_stack=True
    is_dev = kinds.mask(*DEVICE_KINDS)
    is_step = _bool(per_distinct(x["name"], lambda u: u.str.startswith("ProfilerStep#")))
    # the step is the host's span: Kineto also draws ProfilerStep#N on the GPU's lane
    # (gpu_user_annotation, first to last kernel of the step's host span that it saw)
    # and that shorter copy would end the step before its backward kernels are launched
    on_gpu = kinds.mask("gpu_user_annotation")
    spans = step_spans(x[is_step & ~is_dev & ~on_gpu])
    gpu_marks = step_spans(x[is_step & on_gpu])  # Kineto's device-side step markers

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
    marks = spans  # the trace's own ProfilerStep spans (meta.extra["profiler_steps"])
    span, mark = "host ProfilerStep span", None
    noted = len(notes)
    if not len(spans):
        spans, mark = optimizer_spans(cpu, runtime, notes)
        if len(spans):
            span = "iteration span"
            notes.append(
                f"steps: no ProfilerStep#N events; the {len(spans)} steps are the training "
                f"iterations inferred from {FROM_OPTIMIZER} ({mark}): each ends where the "
                "iteration's last optimizer step ends (the iterations told apart by the "
                "backward pass before each) and the next begins there, the first at the "
                "trace's first host event; what runs after the last optimizer step is in no "
                "step")
    said = len(notes) > noted  # optimizer_spans said why its annotations made no step

    kernels = _kernels(runtime, dev, spans, origin, vendor, notes)
    if len(spans) and len(gpu_marks):
        kernels["step"] = _device_marked_steps(kernels["step"].to_numpy(np.float64),
                                               dev["ts_ns"].to_numpy(), gpu_marks, notes)
    graph = _graph_note(runtime, kernels)
    if graph:
        notes.append(graph)
    steps = _steps(dev, kernels, spans)
    steps = _unknown_where_durations_missing(steps, kernels, notes)
    if not len(spans):
        notes.append(one_step_note(said))
    if len(steps):
        notes.append(f"steps: a step is its {span}; its device work is the "
                     "GPU tasks it launched (runtime call with the same correlation id), from "
                     "the first to the last of them, and the device's idle time after the last "
                     "while the span lasts is its free time; preparing is the device's wait "
                     "before the first of them, from the span's start or the previous step's "
                     "last task if later (bubble/stage are Ascend-only and left NA)" if len(spans)
                     else
                     "steps: computed from the GPU kernel intervals of the whole trace "
                     "(no step marks, so the wait before a step is not known; the pipeline "
                     "bubble and stage are Ascend's)")
    else:
        whole = spans if len(spans) else _whole_trace_span(cpu, origin)
        if len(whole):
            steps = _host_steps(cpu, whole, origin, cpu_only)
            if not len(spans):
                steps["step"] = np.nan
            notes.append("steps: no device activity in the trace; each step's wall time is "
                         f"its {span} and its host split comes from the host events"
                         + (" (a CPU-only run: the host computes; a thread's time inside a "
                            "collective is communication, not computing)" if cpu_only else
                            " (the GPUs' activity was not recorded: the parts are NA)"))
    if mark is not None and len(steps):  # what ends each step (analysis.steps.STEP_MARK)
        steps["step_mark"] = pd.array([mark] * len(steps), dtype=TEXT)
    ops = _ops(runtime, cpu, dev, spans, origin)
    if "input_shapes" in ops.columns and len(kernels):
        kernels = _kernel_shapes(runtime, cpu, dev, kernels, ops)
    split = KINETO_UNRECORDED
    comm_ops = _host_comm_ops(cpu, spans, origin) if cpu_only else \
        _kernel_comm_ops(dev, kernels, runtime, cpu, "rccl" if vendor == "amd" else "nccl")
    del runtime
    fams = ", ".join(sorted(set(comm_ops["family"].dropna()))) if len(comm_ops) else ""
    if cpu_only:
        notes.append(f"comm_ops: read from the host collectives of a CPU-only run "
                     f"({fams or 'none'}); "
                     + split)
    elif len(comm_ops):
        notes.append(f"comm_ops: read from the communication kernels ({fams}); "
                     + named_note(comm_ops) + split)
    else:
        # a GPU job whose collectives ran on the host (the gloo backend with CUDA tensors)
        comm_ops = _host_comm_ops(cpu, spans, origin)
        if len(comm_ops):
            notes.append("comm_ops: no communication kernel on the GPU; the collectives ran "
                         "on the host (" + ", ".join(sorted(set(comm_ops["family"])))
                         + "): they are read from those host spans, which the device's "
                         "step breakdown does not count; " + split)
        else:
            notes.append(KINETO_NONE)
    del cpu, dev
    memory = _memory(trace, origin, notes)
    if not len(memory):
        notes.append("memory: no allocator samples in the trace (profile_memory=False)")
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
               "device_facts": _device_facts(trace.device_properties),
               "header": dict(trace.header), "end_ns": end_ns,
               "rank_source": how or None,
               "profiler_steps": sorted(int(s) for s in marks["step"]) if len(marks) else [],
               "comm_families": families, "python_functions": python_functions},
    )
    return meta, {"kernels": kernels, "ops": ops, "steps": steps, "comm_ops": comm_ops,
                  "memory": memory}
