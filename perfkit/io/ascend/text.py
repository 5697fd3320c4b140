"""Ascend text export of one rank: torch_npu ``*_ascend_pt`` and MindSpore ``*_ascend_ms``.

The rank folder holds ``profiler_info[_{rank}].json``, optionally ``profiler_metadata.json``,
and ``ASCEND_PROFILER_OUTPUT/`` with the analysed files. Which tables can be filled
depends on the profiler level (communication files only from Level1). Header variants of
every torch_npu / MindSpore release in reference/formats.md are accepted.

Sources per table: ``kernels`` kernel_details.csv; ``ops`` trace_view.json (host
``cpu_op`` events, device time through the ``async_npu`` flows); ``steps`` step_trace_time.csv;
``comm_ops`` / ``comm_bandwidth`` communication.json; ``comm_matrix`` communication_matrix.json;
``memory`` memory_record.csv + npu_module_mem.csv; ``op_memory`` operator_memory.csv.
A task that ``kernel_details.csv`` records twice (same stream, Task ID and start) is kept
once, with a note (:mod:`perfkit.io.ascend.repeated_tasks`). ``steps.tasks_recorded`` is False
for a step whose tasks in kernel_details.csv cover less than half its busy time in
step_trace_time.csv (a file cut short, :mod:`perfkit.io.ascend.recorded`).

This module's one job is assembling a rank: it runs the readers of the files, each in a
sibling module (the rank folder and its JSON side files, :mod:`perfkit.io.ascend.rank`;
the two CSV files, :mod:`perfkit.io.ascend.csv`; the HCCL files,
:mod:`perfkit.io.ascend.hccl`; the memory files, :mod:`perfkit.io.ascend.memory`; the
tables of trace_view.json, :mod:`perfkit.io.ascend.trace`), reads trace_view.json on a
thread of its own meanwhile, and puts every table on the rank's origin (:func:`_assemble`).
Where someone listens (:mod:`perfkit.io.preview.tables_first`), the small files and the job's
columns of ``kernel_details.csv`` are read first and handed over, assembled by the same
code without the trace, and the trace is decoded once the listener is done with them.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...errors import ProfileError, file_boundary
from ...profile import ProfileMeta
from .._common import collecting_notes, read_json, rel_us, with_notes
from ..canonical.categories import category
from ..canonical.comm_words import ASCEND_NO_COMM_JSON
from ..canonical.validate import plausible_origin
from ..chrome import tables as trace_tables
from ..chrome.decode import read_chrome_trace
from ..mindspore import cpu as mindspore_cpu
from ..preview import tables_first
from . import trace as ascend_trace

# the CSV files, the HCCL files and the rank's side files: modules of their own, every name
# still importable from here
from .csv import (
    JOB_COLUMNS,
    _kernels,
    _steps,
)
from .excerpt import mark_excerpt
from .facts import _copies, _RankFacts
from .hccl import (
    _communication,
    _matrix,
    _name_groups,
    bandwidth_fields,
    link_fields,
    time_fields,
)
from .memory import memory_record, npu_module_mem, operator_memory, other_run_files
from .rank import (
    OUTPUT_DIR,
    WORLD_FROM_GROUPS,
    _dict,
    _framework,
    _groups,
    _info_files,
    _json_kind,
    _level,
    _level_said,
    _simulated_scheme,
    _world_size,
    is_bare_output,
    is_rank_dir,
    metadata_notes,
    rank_dir_of,
    read_rank_id,
)
from .recorded import mark_recorded
from .repeated_tasks import drop_repeated

__all__ = ["OUTPUT_DIR", "TRACE_COLUMNS", "is_rank_dir", "is_bare_output", "rank_dir_of",
           "read_rank_id", "parse", "read_tables_first", "read_step_trace",
           "WORLD_FROM_GROUPS", "parse_trace_view", "category", "time_fields",
           "bandwidth_fields", "link_fields"]

TRACE_COLUMNS = ("task_type",)
"""``args`` of trace_view.json events the tables use (the task type of device tasks)."""


@with_notes
def parse(path: Path) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read one rank of an Ascend text export.

    Parameters
    ----------
    path : Path
        The rank folder (``*_ascend_pt`` / ``*_ascend_ms``) or its ``ASCEND_PROFILER_OUTPUT``.

    Returns
    -------
    (ProfileMeta, dict of DataFrame)
        Tables with times relative to ``meta.origin_ns`` (the earliest plausible timestamp,
        :func:`perfkit.io.canonical.validate.plausible_origin`); missing sources noted.

    Raises
    ------
    ProfileError
        A file that exists but cannot be read (naming it), or no known file at all.
    """
    facts, raw, mem_parts, ns, files, notes, read = _read_small(path)
    out, rank_dir = facts.out, facts.rank_dir
    kernels_csv = out / "kernel_details.csv"
    if kernels_csv.exists() and (out / "trace_view.json").exists() and \
            tables_first.listening() and not mindspore_cpu.is_cpu_profile(rank_dir):
        # the listener has the machine to itself before the rest is read: sharing the
        # interpreter lock with the trace's decoding made it about twice as slow
        _hand_over(facts, kernels_csv, raw, mem_parts, ns, files, notes)
    # the trace's JSON is decoded on a second thread while the CSV files are read here:
    # Arrow reads a CSV outside the interpreter lock, so the two overlap on two cores
    pending = _start_trace(out, read)
    if kernels_csv.exists():
        raw["kernels"] = drop_repeated(
            read("kernel_details.csv", ("kernels",), _kernels, ns), notes)
    else:
        notes.append("kernels: kernel_details.csv not found")

    trace = None
    if pending is not None:
        trace = pending.result()
        ns["trace"] = pa.array(trace.x["ts_ns"].to_numpy()[
            trace.x["ts_ns"].to_numpy() != trace_tables.NA_NS])
        notes.extend(f"trace_view.json: {n}" for n in trace.notes)
    else:
        notes.append("ops: trace_view.json not found")
    return _assemble(facts, raw, mem_parts, ns, files, notes, trace)


def _hand_over(facts: _RankFacts, kernels_csv: Path, raw: dict[str, Any],
               mem_parts: dict[str, pd.DataFrame], ns: dict[str, pa.Array],
               files: dict[str, list[str]], notes: list[str]) -> None:
    """Hand the listener (:func:`perfkit.io.preview.tables_first.offer`) the rank's tables read so
    far with the job's columns of ``kernel_details.csv`` (:func:`_with_job_columns`);
    nothing where that read fails (the full read, which follows, says why)."""
    try:
        made = _with_job_columns(facts, kernels_csv, raw, mem_parts, ns, files, notes)
    except Exception:  # noqa: BLE001 - the full read, which follows, says what is wrong
        return
    tables_first.offer(lambda: _assemble(*made, None, handed_over=True))


def _with_job_columns(facts: _RankFacts, kernels_csv: Path, raw: dict[str, Any],
                      mem_parts: dict[str, pd.DataFrame], ns: dict[str, pa.Array],
                      files: dict[str, list[str]], notes: list[str]) -> tuple[Any, ...]:
    """Copies of the tables read so far (:func:`perfkit.io.ascend.facts._copies`) with the
    job's columns of ``kernel_details.csv`` (:data:`perfkit.io.ascend.csv.JOB_COLUMNS`: 12
    of its 46 columns, read in 0.5 s instead of 1.2 s on the benchmark rank):
    :func:`_assemble`'s arguments but the trace; what the read raises gets out. The one
    place both the load's hand-over and :func:`read_tables_first` read them."""
    raw, mem_parts, ns, files, notes = _copies(raw, mem_parts, ns, files, notes)
    with collecting_notes() as read_notes:
        raw["kernels"] = drop_repeated(_kernels(kernels_csv, ns, JOB_COLUMNS), notes)
    files["kernels"] = [str(kernels_csv)]
    notes.extend(n for n in read_notes if n not in notes)
    return facts, raw, mem_parts, ns, files, notes


@with_notes
def read_tables_first(path: Path) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """One rank's tables as its load hands them over (:mod:`perfkit.io.preview.tables_first`),
    read directly: the small files and the job's columns of ``kernel_details.csv``, by
    :func:`parse`'s own code (:func:`_read_small`, :func:`_with_job_columns`,
    :func:`_assemble`), without ``trace_view.json`` (not read at all).

    Parameters
    ----------
    path : Path
        The rank folder, as for :func:`parse`.

    Returns
    -------
    (ProfileMeta, dict of DataFrame)
        Every table but ``ops``; a note says the trace is still to be read.

    Raises
    ------
    ProfileError
        A file that cannot be read (naming it), no ``kernel_details.csv``, or a MindSpore
        CPU profile (no device tasks to read the job from).
    """
    facts, raw, mem_parts, ns, files, notes, _ = _read_small(path)
    kernels_csv = facts.out / "kernel_details.csv"
    if not kernels_csv.is_file() or mindspore_cpu.is_cpu_profile(facts.rank_dir):
        raise ProfileError(facts.out, "no kernel_details.csv of device tasks to read the "
                           "job from ahead of the trace")
    with file_boundary(kernels_csv, "kernel_details.csv"):
        made = _with_job_columns(facts, kernels_csv, raw, mem_parts, ns, files, notes)
    return _assemble(*made, None, handed_over=True)


def _read_small(path: Path) -> tuple[Any, ...]:
    """:func:`parse`'s first stage, also :func:`read_tables_first`'s: the rank's folders
    and side files (:class:`perfkit.io.ascend.facts._RankFacts`) and its small files, as
    ``(facts, raw, mem_parts, ns, files, notes, read)`` (``read``: how the rest is read,
    each file's table noted in ``files`` and an error naming the file)."""
    rank_dir = rank_dir_of(path)
    out = rank_dir / OUTPUT_DIR
    notes: list[str] = []
    if not out.is_dir() and is_bare_output(path):
        out = path
        notes.append(f"a folder of Ascend export files without its rank folder ({OUTPUT_DIR}/ "
                     "inside *_ascend_pt / *_ascend_ms, whose profiler_info_{rank}.json and "
                     "profiler_metadata.json give the rank, profiler level and communication "
                     "groups); the files present are read")
    elif not out.is_dir():
        raise ProfileError(rank_dir, f"no {OUTPUT_DIR}/ folder: the raw profiler data was not "
                           "analysed yet; run `torch_npu.profiler.profiler.analyse(<folder>)` "
                           "(torch_npu) or `mindspore.profiler.profiler.analyse(<folder>)` "
                           "(MindSpore) on it; expected the Ascend text export")
    info: dict[str, Any] = {}
    infos = _info_files(rank_dir)
    if infos:
        data = read_json(infos[0], "profiler_info JSON of the Ascend profiler")
        if not isinstance(data, dict):
            raise ProfileError(infos[0], "expected a JSON object (profiler_info)")
        info = data
    else:
        notes.append("profiler_info*.json not found: profiler level unknown")
    metadata: dict[str, Any] = {}
    md_file = rank_dir / "profiler_metadata.json"
    if md_file.exists():
        md = read_json(md_file, "profiler_metadata JSON")
        metadata = md if isinstance(md, dict) else {}
        if not isinstance(md, dict):
            notes.append(f"profiler_metadata.json: expected a JSON object, found "
                         f"{_json_kind(md)}: ignored (communication groups and environment "
                         "unknown)")
    framework = _framework(rank_dir, info)
    rank = read_rank_id(rank_dir)
    groups = _groups(metadata, notes)
    metadata_notes(metadata, notes)
    level = _level(info)

    ns: dict[str, pa.Array] = {}
    raw: dict[str, Any] = {}
    files: dict[str, list[str]] = {}

    def read(name: str, tables: tuple[str, ...], reader: Any, *args: Any) -> Any:
        f = out / name
        for t in tables:
            files.setdefault(t, []).append(str(f))
        with file_boundary(f, name):
            return reader(f, *args)

    # the small files first: the tables handed over early (below) hold them
    if (out / "step_trace_time.csv").exists():
        raw["steps"] = read("step_trace_time.csv", ("steps",), _steps)
        if raw["steps"].empty:  # the profiler writes a row per step: said, not guessed at
            notes.append("steps: step_trace_time.csv has its header and no row: the steps "
                         "are derived from the device tasks")
    else:
        notes.append("steps: step_trace_time.csv not found")
    if (out / "communication.json").exists():
        raw["comm_ops"], raw["comm_bandwidth"] = read(
            "communication.json", ("comm_ops", "comm_bandwidth"), _communication, ns)
        raw["comm_ops"] = _name_groups(raw["comm_ops"], groups)
    else:
        notes.append(f"comm_ops/comm_bandwidth: {ASCEND_NO_COMM_JSON}; {_level_said(level)})")
    if (out / "communication_matrix.json").exists():
        raw["comm_matrix"] = read("communication_matrix.json", ("comm_matrix",), _matrix, rank,
                                  groups, notes)
    else:
        notes.append("comm_matrix: communication_matrix.json not found "
                     f"(written from profiler level Level1 on; {_level_said(level)})")
    mem_parts: dict[str, pd.DataFrame] = {}
    if (out / "memory_record.csv").exists():
        mem_parts["memory"] = read("memory_record.csv", ("memory",), memory_record, ns,
                                   framework)
    if (out / "npu_module_mem.csv").exists():
        mem_parts["module_mem"] = read("npu_module_mem.csv", ("memory",), npu_module_mem, ns)
    if not mem_parts:
        notes.append("memory: memory_record.csv / npu_module_mem.csv not found "
                     "(written when profile_memory=True)")
    if (out / "operator_memory.csv").exists():
        raw["op_memory"] = read("operator_memory.csv", ("op_memory",), operator_memory, ns)
    else:
        notes.append("op_memory: operator_memory.csv not found (written when profile_memory=True)")
    facts = _RankFacts(out, rank_dir, infos, info, metadata, framework, rank, groups, level)
    return facts, raw, mem_parts, ns, files, notes, read


def _assemble(facts: _RankFacts, raw: dict[str, Any], mem_parts: dict[str, pd.DataFrame],
              ns: dict[str, pa.Array], files: dict[str, list[str]], notes: list[str],
              trace: Any, handed_over: bool = False
              ) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """:func:`parse`'s last stage: the tables read (``raw``, ``mem_parts``; ``ns`` their
    timestamps) put on the rank's origin, with what the trace gives (``trace`` None:
    without it), as ``(meta, tables)``; ``handed_over``: the tables handed over before the
    trace (:mod:`perfkit.io.preview.tables_first`), which say so in a note."""
    out, rank_dir, infos, info, metadata = (facts.out, facts.rank_dir, facts.infos,
                                            facts.info, facts.metadata)
    framework, rank, groups, level = facts.framework, facts.rank, facts.groups, facts.level
    if handed_over:
        notes.append("ops: trace_view.json still being read (the tables handed over before "
                     "it, perfkit.io.preview.tables_first)")
    for key, (name, why) in other_run_files(ns).items():
        del ns[key]
        mem_parts.pop(key, None)
        if key == "op_memory":
            del raw["op_memory"]
        for t in ("memory", "op_memory"):
            files[t] = [f for f in files.get(t, []) if Path(f).name != name]
        notes.append(f"{'op_memory' if key == 'op_memory' else 'memory'}: {name} left out: "
                     f"{why}")
    origin = plausible_origin(*ns.values())
    tables: dict[str, pd.DataFrame] = {}
    if "kernels" in raw:
        tables["kernels"] = _finish_times(raw["kernels"], origin)
    if "steps" in raw:
        tables["steps"] = raw["steps"]
    if "comm_ops" in raw:
        tables["comm_ops"] = _finish_times(raw["comm_ops"], origin)
        tables["comm_bandwidth"] = raw["comm_bandwidth"]
    if "comm_matrix" in raw:
        tables["comm_matrix"] = raw["comm_matrix"]
    if mem_parts:
        tables["memory"] = _finish_times(pd.concat(list(mem_parts.values()),
                                                   ignore_index=True), origin)
    if "op_memory" in raw:
        tables["op_memory"] = _finish_times(raw["op_memory"], origin)
    if trace is not None:
        with file_boundary(out / "trace_view.json", "trace_view.json"):
            derived = ascend_trace.from_ascend_trace(trace, origin,
                                                     kernels="kernels" not in tables,
                                                     steps="steps" not in tables)
        tables["ops"] = derived["ops"]
        if "kernels" not in tables and len(derived["kernels"]):
            tables["kernels"] = derived["kernels"]
            files["kernels"] = files["ops"]
            notes.append("kernels: taken from trace_view.json (no kernel_details.csv): "
                         "no shapes, dtypes or wait times")
        if "steps" not in tables and len(derived["steps"]):
            tables["steps"] = derived["steps"]
            files["steps"] = files["ops"]
            notes.append("steps: computed from the Overlap Analysis tracks of trace_view.json, "
                         "the preparing time from each ProfilerStep's start; bubble and stage "
                         "unknown")
        if "kernels" in tables and "step" in tables["kernels"] and \
                tables["kernels"]["step"].isna().all() and len(derived["step_spans"]):
            trace_tables.assign_steps(tables["kernels"], derived["step_spans"], origin)
            notes.append("kernels.step: no Step Id column; assigned from host ProfilerStep spans")
    if "kernels" in tables and "step" not in tables["kernels"]:
        notes.append("kernels.step: kernel_details.csv has no Step Id column (no schedule)")
    if "steps" in tables:
        mark_recorded(tables["steps"], tables.get("kernels"), notes)
    else:  # the steps known only from their tasks: an excerpt of them is not a step
        excerpt = mark_excerpt(tables.get("kernels"), notes)
        if excerpt is not None:
            tables["steps"] = excerpt
            files["steps"] = files.get("kernels", [])
    device_type = "npu"
    if mindspore_cpu.is_cpu_profile(rank_dir):
        # the Ascend files are missing by nature, not lost: say what a CPU profile is instead
        device_type = "cpu"
        notes[:] = [n for n in notes if not n.startswith(_DEVICE_FILE_NOTES)]
        extra_tables, cpu_notes = mindspore_cpu.cpu_tables(
            rank_dir, tables.get("ops", pd.DataFrame()), origin)
        tables.update(extra_tables)
        notes.extend(cpu_notes)
    if not tables:
        raise ProfileError(out, "no readable profiler file; expected kernel_details.csv, "
                           "step_trace_time.csv, trace_view.json or communication.json")
    meta = ProfileMeta(
        source_format="ascend_text", framework=framework, rank=rank,
        world_size=_world_size(groups), device_type=device_type, profiler_level=level,
        groups=groups, origin_ns=origin, path=str(rank_dir), notes=notes,
        extra={"profiler_info": info, "metadata_keys": sorted(metadata),
               "env": {str(k): str(v) for k, v in
                       _dict(metadata.get("ENV_VARIABLES")).items()},
               "table_files": {k: v for k, v in files.items() if k in tables},
               **_simulated_scheme(metadata), **WORLD_FROM_GROUPS},
    )
    if rank is None:  # one note (sources.load_rank adds the rank it assigns to it)
        notes.append("rank: not in the files (no profiler_info_{rank}.json)" if not infos else
                     "rank: not in profiler_info*.json (neither its name nor a rank_id)")
    return meta, tables


_DEVICE_FILE_NOTES = ("kernels: kernel_details.csv not found", "steps: step_trace_time.csv",
                      "comm_ops/comm_bandwidth:", "comm_matrix:", "memory:", "op_memory:")
"""Notes about Ascend device files that a CPU profile never has (replaced by one note)."""


def _finish_times(frame: pd.DataFrame, origin: int | None) -> pd.DataFrame:
    """Turn the ``*__ns`` helper columns into ``*_us`` relative to ``origin``."""
    for col in [c for c in frame.columns if c.endswith("__ns")]:
        frame[col[:-4] + "_us"] = rel_us(pa.array(frame[col], type=pa.int64(),
                                                  from_pandas=True), origin)
        del frame[col]
    return frame


def _start_trace(out: Path, read: Any) -> Future[Any] | None:
    """``trace_view.json`` of ``out`` read (``read``, :func:`read_chrome_trace`) on a
    thread of its own, in a copy of this context (the notes and the file in an error go
    where they would): its future, whose result raises what the read raised; None when
    the rank has no trace."""
    if not (out / "trace_view.json").exists():
        return None
    done: Future[Any] = Future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            done.set_result(context.run(
                read, "trace_view.json", ("ops",), read_chrome_trace,
                "trace_view.json (Chrome trace of the Ascend profiler)", TRACE_COLUMNS))
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            done.set_exception(exc)

    threading.Thread(target=run, name="perfkit-trace-view", daemon=True).start()
    return done



def read_step_trace(path: Path) -> pd.DataFrame:
    """The ``steps`` table of one ``step_trace_time.csv`` (what :func:`parse` reads; the
    dashboard's first figures come from it alone, :mod:`perfkit.io.preview.steps`)."""
    return _steps(path)



@with_notes
def parse_trace_view(path: Path) -> tuple[ProfileMeta, dict[str, pd.DataFrame]]:
    """Read a standalone ``trace_view.json`` (torch_npu, or MindSpore >= 2.4).

    ``ts``/``dur`` may be numbers or strings. Kernels come from the "Ascend Hardware"
    process, ops from the host (CPU) processes, steps from the "Overlap Analysis" tracks.
    """
    trace = read_chrome_trace(path, "trace_view.json (Chrome trace of the Ascend profiler)",
                              TRACE_COLUMNS)
    ts = trace.x["ts_ns"].to_numpy() if len(trace.x) else np.zeros(0, dtype=np.int64)
    ts = ts[ts != trace_tables.NA_NS]
    if not len(ts):
        raise ProfileError(path, "no complete events (ph 'X') with a timestamp; expected "
                           "the Chrome trace of an Ascend profiler")
    origin = int(ts.min())  # the trace's timestamps are checked already (clean_events)
    derived = ascend_trace.from_ascend_trace(trace, origin)
    notes = ["loaded from trace_view.json alone: kernels without shapes/dtypes/wait, "
             "steps from the Overlap Analysis tracks (no bubble or stage), "
             "no communication, memory tables", *trace.notes]
    rank_dir = path.parent.parent if path.parent.name == OUTPUT_DIR else path.parent
    rank = read_rank_id(rank_dir) if rank_dir.is_dir() else None
    info: dict[str, Any] = {}
    infos = _info_files(rank_dir)
    if infos:
        try:
            data = read_json(infos[0], "profiler_info JSON")
            info = data if isinstance(data, dict) else {}
        except ProfileError:
            info = {}
    framework = _framework(rank_dir, info)
    kernels = derived["kernels"]
    if len(derived["step_spans"]):
        trace_tables.assign_steps(kernels, derived["step_spans"], origin)
    meta = ProfileMeta(
        source_format="trace_view", framework=framework, rank=rank, device_type="npu",
        profiler_level=_level(info), origin_ns=origin, path=str(path), notes=notes,
        extra={"events": trace.n_events,
               "table_files": {"kernels": str(path), "ops": str(path), "steps": str(path)}})
    return meta, {"kernels": kernels, "ops": derived["ops"], "steps": derived["steps"]}
