"""Ascend text export of one rank: torch_npu ``*_ascend_pt`` and MindSpore ``*_ascend_ms``.

The rank folder holds ``profiler_info[_{rank}].json``, optionally ``profiler_metadata.json``,
and ``ASCEND_PROFILER_OUTPUT/`` with the analysed files. Which tables can be filled
depends on the profiler level (communication files only from Level1). Header variants of
every torch_npu / MindSpore release in reference/formats.md are accepted.

Sources per table: ``kernels`` kernel_details.csv; ``ops`` trace_view.json (host
``cpu_op`` events, device time through the ``async_npu`` flows); ``steps`` step_trace_time.csv;
``comm_ops`` / ``comm_bandwidth`` communication.json; ``comm_matrix`` communication_matrix.json;
``memory`` memory_record.csv + npu_module_mem.csv; ``op_memory`` operator_memory.csv.
``steps.tasks_recorded`` is False for a step whose tasks in kernel_details.csv cover less
than half its busy time in step_trace_time.csv (a file cut short,
:mod:`perfkit.io.ascend_recorded`).
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ProfileError, file_boundary
from ..profile import ProfileMeta
from . import ascend_trace, mindspore_cpu, trace_tables
from ._common import (
    counting_numbers,
    find_col,
    hccl_group_hash,
    int64_series,
    json_number,
    read_csv,
    read_json,
    rel_us,
    to_float,
    to_ns,
    with_notes,
)
from .ascend_memory import memory_record, npu_module_mem, operator_memory, other_run_files
from .ascend_recorded import mark_recorded
from .categories import category, is_total_op
from .chrome import read_chrome_trace
from .comm_words import ASCEND_NO_COMM_JSON
from .validate import plausible_origin

__all__ = ["OUTPUT_DIR", "TRACE_COLUMNS", "is_rank_dir", "is_bare_output", "rank_dir_of",
           "read_rank_id", "parse", "read_step_trace", "WORLD_FROM_GROUPS",
           "parse_trace_view", "category", "time_fields", "bandwidth_fields", "link_fields"]

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TRACE_COLUMNS = ("task_type",)
"""``args`` of trace_view.json events the tables use (the task type of device tasks)."""


def rank_dir_of(path: Path) -> Path:
    """The rank folder of ``path`` (the folder itself, or the parent of its output dir)."""
    return path.parent if path.name == OUTPUT_DIR else path


def is_rank_dir(path: Path) -> bool:
    """True when ``path`` is an Ascend text-export rank folder (or its output folder)."""
    rank_dir = rank_dir_of(path)
    out = rank_dir / OUTPUT_DIR
    if not out.is_dir():
        return False
    names = {p.name for p in out.iterdir()}
    known = {"kernel_details.csv", "step_trace_time.csv", "trace_view.json",
             "communication.json", "op_statistic.csv", "memory_record.csv",
             "operator_memory.csv", "npu_module_mem.csv", "communication_matrix.json"}
    return bool(names & known)


def is_bare_output(path: Path) -> bool:
    """A folder holding ``kernel_details.csv`` itself, outside any rank folder: a copied or
    renamed ``ASCEND_PROFILER_OUTPUT`` (or a lone ``kernel_details.csv``)."""
    return path.is_dir() and path.name != OUTPUT_DIR and \
        (path / "kernel_details.csv").is_file()


def _level_said(level: str | None) -> str:
    """This profile's profiler level, after a file written from a level on was not found."""
    return f"this profile's level is {level}" if level else "this profile's level is not known"


def _info_files(rank_dir: Path) -> list[Path]:
    return sorted(rank_dir.glob("profiler_info*.json"))


def read_rank_id(rank_dir: Path) -> int | None:
    """Rank from ``profiler_info_{rank}.json`` (file name, then ``rank_id`` key), else None."""
    for f in _info_files(rank_dir):
        m = re.fullmatch(r"profiler_info_(\d+)\.json", f.name)
        if m:
            return int(m.group(1))
    for f in _info_files(rank_dir):
        try:
            info = read_json(f, "profiler_info JSON")
        except ProfileError:
            continue
        rid = _rank_key(info)
        if rid is not None:
            return rid
    return None


def _rank_key(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    for cand in (info.get("rank_id"), (info.get("ms_profiler_info") or {}).get("rank_id")
                 if isinstance(info.get("ms_profiler_info"), dict) else None):
        if isinstance(cand, bool) or not isinstance(cand, (int, str)):
            continue  # a float, list or object is not a rank
        text = str(cand).strip()
        if text.isdigit() and len(text) < 10:
            return int(text)
    return None


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}`` (a field of the wrong type is ignored)."""
    return value if isinstance(value, dict) else {}


def _framework(rank_dir: Path, info: dict[str, Any]) -> str | None:
    name = rank_dir.name.lower()
    if name.endswith("_ascend_ms") or "ms_profiler_info" in info or "ms_version" in info:
        return "mindspore"
    if name.endswith("_ascend_pt") or "config" in info:
        return "pytorch"
    return None


def _level(info: dict[str, Any]) -> str | None:
    exp = _dict(_dict(info.get("config")).get("experimental_config"))
    level = exp.get("_profiler_level") or exp.get("profiler_level")
    if level is None:
        level = _dict(info.get("profiler_parameters")).get("profiler_level")
    if level is None or isinstance(level, (dict, list)):
        return None
    return str(level).replace("ProfilerLevel.", "")


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
        :func:`perfkit.io.validate.plausible_origin`); missing sources noted.

    Raises
    ------
    ProfileError
        A file that exists but cannot be read (naming it), or no known file at all.
    """
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

    # the trace's JSON is decoded on a second thread while the CSV files are read here:
    # Arrow reads a CSV outside the interpreter lock, so the two overlap on two cores
    pending = _start_trace(out, read)
    if (out / "kernel_details.csv").exists():
        raw["kernels"] = read("kernel_details.csv", ("kernels",), _kernels, ns)
    else:
        notes.append("kernels: kernel_details.csv not found")
    if (out / "step_trace_time.csv").exists():
        raw["steps"] = read("step_trace_time.csv", ("steps",), _steps)
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

    trace = None
    if pending is not None:
        trace = pending.result()
        ns["trace"] = pa.array(trace.x["ts_ns"].to_numpy()[
            trace.x["ts_ns"].to_numpy() != trace_tables.NA_NS])
        notes.extend(f"trace_view.json: {n}" for n in trace.notes)
    else:
        notes.append("ops: trace_view.json not found")

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


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words ("a list", "text", ...)."""
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    return {dict: "an object", list: "a list", str: "text", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def _simulated_scheme(metadata: dict[str, Any]) -> dict[str, str]:
    """``{"simulated_static_scheme": scheme}`` for a rank that :func:`perfkit.simulate.
    simulate` wrote (``perfkit_simulation.settings.static_scheme`` of its metadata: the
    static-memory scheme its memory records were made with), else nothing."""
    settings = _dict(_dict(metadata.get("perfkit_simulation")).get("settings"))
    scheme = settings.get("static_scheme")
    return {"simulated_static_scheme": scheme} if isinstance(scheme, str) and scheme else {}


def _groups(metadata: dict[str, Any], notes: list[str] | None = None) -> dict[str, Any]:
    """``parallel_group_info`` of ``profiler_metadata.json``: ``{group id: {group_name,
    group_rank, global_ranks}}``. Entries or ranks of the wrong type are left out, with a
    note in ``notes`` (the groups they would give are unknown, not guessed)."""
    info = metadata.get("parallel_group_info")
    bad: list[str] = []
    if info is not None and not isinstance(info, dict):
        bad.append(f"parallel_group_info is {_json_kind(info)}, not an object")
    groups: dict[str, Any] = {}
    for key, g in (info.items() if isinstance(info, dict) else ()):
        if not isinstance(g, dict):
            bad.append(f"group {key!s} is {_json_kind(g)}, not an object")
            continue
        ranks = g.get("global_ranks")
        good = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)
                and r >= 0] if isinstance(ranks, list) else []
        if ranks is not None and (not isinstance(ranks, list) or len(good) < len(ranks)):
            bad.append(f"group {key!s} global_ranks {str(ranks)[:40]} are not all whole "
                       "numbers >= 0")
            good = []
        groups[str(key)] = {"group_name": g.get("group_name"),
                            "group_rank": g.get("group_rank"), "global_ranks": good}
    if bad and notes is not None:
        notes.append("profiler_metadata.json parallel_group_info: " + "; ".join(bad[:3])
                     + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else "")
                     + ": left out (those groups' members unknown)")
    return groups


def _world_size(groups: dict[str, Any]) -> int | None:
    """The highest global rank of a rank's communication groups, plus one: at least the
    job's world size, which the export does not record (:data:`WORLD_FROM_GROUPS`)."""
    ranks = {r for g in groups.values() for r in g.get("global_ranks", [])}
    return max(ranks) + 1 if ranks else None


#: ``meta.extra`` of a rank whose ``world_size`` is :func:`_world_size`: a rank lists only
#: its own groups (rank 0 of dp 2 × pp 2 is in dp {0, 1} and pp {0, 2}: 3), so ranks of one
#: job may disagree on it, and it does not tell runs apart (:mod:`perfkit.io.runs`).
WORLD_FROM_GROUPS = {"world_size_from": "groups"}


def _finish_times(frame: pd.DataFrame, origin: int | None) -> pd.DataFrame:
    """Turn the ``*__ns`` helper columns into ``*_us`` relative to ``origin``."""
    for col in [c for c in frame.columns if c.endswith("__ns")]:
        frame[col[:-4] + "_us"] = rel_us(pa.array(frame[col], type=pa.int64(),
                                                  from_pandas=True), origin)
        del frame[col]
    return frame


_KERNEL_COLS = {
    "step": ("Step Id", "Step ID"),
    "name": ("Name", "Op Name"),
    "type": ("Type", "OP Type"),
    "core": ("Accelerator Core", "Task Type"),
    "stream": ("Stream ID", "Stream Id"),
    "dur_us": ("Duration(us)", "Task Duration(us)"),
    "wait_us": ("Wait Time(us)", "Task Wait Time(us)"),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
    "output_shapes": ("Output Shapes",),
    "device_id": ("Device_id",),
    "model_id": ("Model ID",),
    "task_id": ("Task ID",),
    "op_state": ("OP State",),
    "block_dim": ("Block Dim", "Block Num"),
    "mix_block_dim": ("Mix Block Dim", "Mix Block Num"),
    "hf32_eligible": ("HF32 Eligible",),
    "input_formats": ("Input Formats",),
    "output_dtypes": ("Output Data Types",),
    "output_formats": ("Output Formats",),
    "context_id": ("Context ID",),
}
_TEXT = {"name", "type", "core", "input_shapes", "input_dtypes", "output_shapes", "op_state",
         "hf32_eligible", "input_formats", "output_dtypes", "output_formats", "device_id",
         "context_id"}
_START = ("Start Time(us)", "Task Start Time(us)")
#: The columns the device task figures are built from: a last row without a newline is
#: dropped when one of them is its last column (a cut there reads as a shorter duration or
#: another name); after another column (a PMU counter) it is kept, that cell read as NA.
_KERNEL_KEYS = (*(c for alts in _KERNEL_COLS.values() for c in alts), *_START)


def snake(column: str) -> str:
    """PMU column name to a canonical one: ``aic_mac_time(us)`` -> ``aic_mac_time_us``."""
    s = column.strip()
    s = s.replace("(%)", "_pct").replace("(us)", "_us").replace("(GB/s)", "_gbps")
    s = s.replace("(MB)", "_mb").replace("(KB)", "_kb").replace("%", "_pct")
    s = re.sub(r"[^0-9A-Za-z]+", "_", s).strip("_").lower()
    return s


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


def _kernels(path: Path, ns: dict[str, pa.Array]) -> pd.DataFrame:
    table = read_csv(path, "kernel_details.csv (device tasks of the Ascend profiler)",
                     required=[("Name", "Op Name"), _START, ("Duration(us)", "Task Duration(us)")],
                     text_cols=[*_START, "Input Shapes", "Output Shapes", "Input Data Types",
                                "Output Data Types", "Name", "Type", "Device_id", "Context ID"],
                     key_cols=_KERNEL_KEYS)
    header = table.column_names
    n = table.num_rows
    used: set[str] = set()
    cols: dict[str, Any] = {}
    for canon, alts in _KERNEL_COLS.items():
        src = find_col(header, *alts)
        if src is None:
            continue
        used.add(src)
        col = table.column(src)
        if canon in _TEXT:
            s = pd.Series(col.to_pandas(), dtype="string")
            if canon in ("input_shapes", "output_shapes"):
                s = s.str.strip('"')
            cols[canon] = s
        else:
            cols[canon] = to_float(col, n, label=f"{path.name} {src}" if canon in (
                "dur_us", "wait_us", "step") else None)
    start_col = find_col(header, *_START)
    used.add(start_col)
    start_ns = to_ns(table.column(start_col), n, label=f"{path.name} {start_col}")
    bad = pc.sum(pc.is_null(start_ns)).as_py()
    if n and bad == n:
        raise ProfileError(path, "no row has a readable start time", field=start_col)
    ns["kernels"] = start_ns
    frame = pd.DataFrame(cols, copy=False)  # no block consolidation: a 1 M-row copy
    frame["start__ns"] = int64_series(start_ns)
    if "name" not in frame:
        frame["name"] = pd.Series(pd.NA, index=range(n), dtype="string")
    for c in ("type", "core"):
        if c not in frame:
            frame[c] = pd.Series(pd.NA, index=range(n), dtype="string")
    frame["category"] = category(frame["core"], frame["type"], frame["name"])
    for src in header:
        if src in used:
            continue
        frame[snake(src)] = to_float(table.column(src), n)
    return frame


_STEP_COLS = {
    "step": ("Step",),
    "computing_us": ("Computing",),
    "comm_not_overlapped_us": ("Communication(Not Overlapped)",),
    "overlapped_us": ("Overlapped",),
    "communication_us": ("Communication",),
    "free_us": ("Free",),
    "stage_us": ("Stage",),
    "bubble_us": ("Bubble",),
    "comm_not_overlapped_excl_receive_us": ("Communication(Not Overlapped and Exclude Receive)",),
    "preparing_us": ("Preparing",),
    "device_id": ("Device_id",),
}


def read_step_trace(path: Path) -> pd.DataFrame:
    """The ``steps`` table of one ``step_trace_time.csv`` (what :func:`parse` reads; the
    dashboard's first figures come from it alone, :mod:`perfkit.io.preview`)."""
    return _steps(path)


def _steps(path: Path) -> pd.DataFrame:
    table = read_csv(path, "step_trace_time.csv (per-step breakdown of the Ascend profiler)",
                     required=[("Step",), ("Computing",), ("Communication(Not Overlapped)",),
                               ("Free",)], text_cols=["Step"])
    n = table.num_rows
    cols: dict[str, Any] = {}
    for canon, alts in _STEP_COLS.items():
        src = find_col(table.column_names, *alts)
        if src is not None:
            cols[canon] = to_float(table.column(src), n, label=f"{path.name} {src}")
    frame = pd.DataFrame(cols)
    if "overlapped_us" not in frame and "communication_us" in frame:
        frame["overlapped_us"] = frame["communication_us"] - frame["comm_not_overlapped_us"]
    return frame


def _name_groups(frame: pd.DataFrame, groups: dict[str, Any]) -> pd.DataFrame:
    """Replace HCCL's hashed group ids (after ``@``) by the group names of the metadata.

    Communication keys carry ``hccl_group_hash(name)``; ``parallel_group_info`` is keyed by
    the name. Ids that match no known group are kept as they are.
    """
    if not len(frame) or "group" not in frame or not groups:
        return frame
    aliases = {hccl_group_hash(name): name for name in groups}
    frame["group"] = frame["group"].map(lambda g: aliases.get(g, g))
    return frame


def _split_key(key: str) -> tuple[str, str | None]:
    name, sep, group = key.rpartition("@")
    return (name, group) if sep else (key, None)


def _step_of(key: str) -> float:
    m = re.fullmatch(r"step(\d+)", key)
    return float(m.group(1)) if m else np.nan


def _hccl_entries(path: Path, data: dict[str, Any]
                  ) -> Iterator[tuple[str, float, str, str, dict[str, Any]]]:
    """Walk ``{step: {kind: {op@group: {...}}}}`` of a rank's HCCL JSON files.

    Yields ``(step_key, step, kind, key, entry)`` for every object entry but the step's
    ``Total Op Info`` summary (:func:`is_total_op`); a step whose value is not an object is
    an error naming it.
    """
    for step_key, kinds in data.items():
        if not isinstance(kinds, dict):
            raise ProfileError(path, "expected {'collective': {...}, 'p2p': {...}}",
                               field=str(step_key))
        step = _step_of(str(step_key))
        for kind, entries in kinds.items():
            if isinstance(entries, dict):
                for key, entry in entries.items():
                    if isinstance(entry, dict) and not is_total_op(key):
                        yield str(step_key), step, kind, str(key), entry


def _communication(path: Path, ns: dict[str, pa.Array]) -> tuple[pd.DataFrame, pd.DataFrame]:
    data = read_json(path, "communication.json (HCCL op times of the Ascend profiler)")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by step ('step50': {...})")
    ops: list[dict[str, Any]] = []
    bws: list[dict[str, Any]] = []
    with counting_numbers(path.name):
        _hccl_rows(path, data, ops, bws)
    frame = pd.DataFrame(ops)
    if len(frame):
        start_ns = to_ns(pa.array(frame.pop("start_text"), pa.string()), len(frame),
                         label=f"{path.name} Start Timestamp(us)")
        ns["comm"] = start_ns
        frame["start__ns"] = int64_series(start_ns)
    return frame, pd.DataFrame(bws)


def _hccl_rows(path: Path, data: dict[str, Any], ops: list[dict[str, Any]],
               bws: list[dict[str, Any]]) -> None:
    """The op rows (``ops``) and bandwidth rows (``bws``) of a rank's communication.json."""
    for step_key, step, kind, key, entry in _hccl_entries(path, data):
        t = entry.get("Communication Time Info")
        if not isinstance(t, dict):
            raise ProfileError(path, "expected a 'Communication Time Info' object",
                               field=f"{step_key}.{kind}.{key}")
        name, group = _split_key(key)
        ops.append({
            "step": step, "group": group, "name": name, "kind": kind,
            **time_fields(t),
            "wait_ratio": _num(t.get("Wait Time Ratio"), "Wait Time Ratio"),
            "sync_ratio": _num(t.get("Synchronization Time Ratio"),
                               "Synchronization Time Ratio"),
        })
        b = entry.get("Communication Bandwidth Info")
        if isinstance(b, dict):
            for transport, v in b.items():
                if isinstance(v, dict):
                    bws.append({
                        "step": step, "group": group, "name": name,
                        **bandwidth_fields(transport, v),
                        "large_packet_ratio": _num(v.get("Large Packet Ratio"),
                                                   "Large Packet Ratio"),
                    })


def _num(v: Any, field: str | None = None) -> float:
    """A JSON number (NaN when missing; a value that is not one is counted under
    ``field``, see :func:`~perfkit.io._common.counting_numbers`)."""
    return json_number(v, field)


def _ms(v: Any, field: str | None = None) -> float:
    return _num(v, field) * 1000.0


def time_fields(t: dict[str, Any]) -> dict[str, Any]:
    """Columns of one HCCL op's ``Communication Time Info`` (ms -> µs; start as text).

    Shared by ``communication.json`` and msprof-analyze's ``cluster_communication.json``.
    """
    start = t.get("Start Timestamp(us)")
    return {
        "start_text": None if start is None else repr(start) if isinstance(start, float)
        else str(start),
        **{col: _ms(t.get(key), key) for col, key in _TIME_KEYS},
    }


_TIME_KEYS = (("elapse_us", "Elapse Time(ms)"), ("transit_us", "Transit Time(ms)"),
              ("wait_us", "Wait Time(ms)"), ("sync_us", "Synchronization Time(ms)"),
              ("idle_us", "Idle Time(ms)"))


def bandwidth_fields(transport: object, v: dict[str, Any]) -> dict[str, Any]:
    """Columns of one transport entry of ``Communication Bandwidth Info``."""
    return {"transport": str(transport),
            "size_bytes": _num(v.get("Transit Size(MB)"), "Transit Size(MB)") * 1e6,
            "transit_us": _ms(v.get("Transit Time(ms)"), "Transit Time(ms)"),
            "bandwidth_gbps": _num(v.get("Bandwidth(GB/s)"), "Bandwidth(GB/s)")}


def link_fields(v: dict[str, Any]) -> dict[str, Any]:
    """Columns of one ``src-dst`` link of a communication matrix."""
    return {"transport": v.get("Transport Type"),
            "size_bytes": _num(v.get("Transit Size(MB)"), "Transit Size(MB)") * 1e6,
            "time_us": _ms(v.get("Transit Time(ms)"), "Transit Time(ms)"),
            "bandwidth_gbps": _num(v.get("Bandwidth(GB/s)"), "Bandwidth(GB/s)"),
            "op_name": v.get("Op Name")}


def _matrix(path: Path, rank: int | None, groups: dict[str, Any],
            notes: list[str]) -> pd.DataFrame:
    data = read_json(path, "communication_matrix.json (HCCL link matrix of the Ascend profiler)")
    if not isinstance(data, dict):
        raise ProfileError(path, "expected a JSON object keyed by step ('step50': {...})")
    rows: list[dict[str, Any]] = []
    with counting_numbers(path.name):
        for _, step, kind, key, links in _hccl_entries(path, data):
            name, group = _split_key(key)
            for link, v in links.items():
                if not isinstance(v, dict):
                    continue
                src, _, dst = str(link).partition("-")
                rows.append({
                    "step": step, "group": group, "name": name, "kind": kind,
                    "src_local": _num(src, "link (src-dst)"),
                    "dst_local": _num(dst, "link (src-dst)"), **link_fields(v),
                })
    frame = _name_groups(pd.DataFrame(rows), groups)
    if not len(frame):
        return frame
    mapped = 0
    src_g = np.full(len(frame), np.nan)
    dst_g = np.full(len(frame), np.nan)
    for gname, g in groups.items():
        ranks = g.get("global_ranks") or []
        sel = (frame["group"] == gname).to_numpy()
        if not sel.any() or not ranks:
            continue
        lut = np.array(ranks, dtype=float)
        for arr, col in ((src_g, "src_local"), (dst_g, "dst_local")):
            loc = frame.loc[sel, col].to_numpy()
            ok = (loc >= 0) & (loc < len(lut))
            vals = np.full(len(loc), np.nan)
            vals[ok] = lut[loc[ok].astype(int)]
            arr[sel] = vals
        mapped += int(sel.sum())
    frame["src_rank"] = src_g
    frame["dst_rank"] = dst_g
    if mapped < len(frame):
        notes.append("comm_matrix: link ranks are local to their communication group and "
                     "profiler_metadata.json has no parallel_group_info for "
                     f"{len(frame) - mapped} of {len(frame)} links; src_rank/dst_rank left NA "
                     "(src_local/dst_local kept)")
    return frame


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
