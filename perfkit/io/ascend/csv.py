"""The two CSV files of an Ascend text export: ``kernel_details.csv`` and
``step_trace_time.csv``.

The one job of this module: read them (with :func:`perfkit.io._common.read_csv`, accepting
the header variants of every torch_npu / MindSpore release in reference/formats.md) into
the ``kernels`` table (:func:`_kernels`: canonical columns, PMU columns by :func:`snake`,
start times kept as exact ns in ``start__ns``) and the ``steps`` table (:func:`_steps`).
:mod:`perfkit.io.ascend.text` calls them and puts the times on the rank's origin.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._text_dtype import TEXT, text_series
from ...errors import ProfileError
from .._common import find_col, int64_series, note, read_csv, to_float, to_ns
from ..canonical.categories import category

__all__ = ["snake", "JOB_COLUMNS"]

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
#: The columns of the ``kernels`` table (with the start) that the job is read from
#: (:func:`perfkit.infer_job`: shapes, dtypes, names, steps, streams, durations): all a
#: rank's tables handed over before the rest hold (:mod:`perfkit.io.preview.tables_first`).
#: tests/test_tables_first.py checks that the job read from them is the whole table's.
JOB_COLUMNS = ("step", "name", "type", "core", "stream", "dur_us", "wait_us", "input_shapes",
               "input_dtypes", "output_shapes", "output_dtypes")
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



def _kernels(path: Path, ns: dict[str, pa.Array],
             columns: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The ``kernels`` table of ``kernel_details.csv`` (its start times, exact ns, put in
    ``ns["kernels"]``); ``columns``: only these canonical columns (:data:`JOB_COLUMNS`) and
    the start, else every column."""
    only = None if columns is None else \
        [*_START, *(alt for c in columns for alt in _KERNEL_COLS[c])]
    table = read_csv(path, "kernel_details.csv (device tasks of the Ascend profiler)",
                     required=[("Name", "Op Name"), _START, ("Duration(us)", "Task Duration(us)")],
                     text_cols=[*_START, "Input Shapes", "Output Shapes", "Input Data Types",
                                "Output Data Types", "Name", "Type", "Device_id", "Context ID"],
                     key_cols=_KERNEL_KEYS, columns=only)
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
            s = text_series(col)
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
        frame["name"] = pd.Series(pd.NA, index=range(n), dtype=TEXT)
    no_core = n and "core" not in frame and (columns is None or "core" in columns)
    for c in ("type", "core"):
        if c not in frame:
            frame[c] = pd.Series(pd.NA, index=range(n), dtype=TEXT)
    frame["category"] = category(frame["core"], frame["type"], frame["name"])
    if no_core:  # the core (AI_CORE, AI_CPU, HCCL, ...) sorts most tasks: said, not guessed
        other = int(frame["category"].eq("other").sum())
        note(f"kernels: {path.name} has no Accelerator Core column: each task's core (AI "
             f"Core, AI CPU, communication) is unknown, so tasks are sorted by name and "
             f"type alone ({other:,} of {n:,} as 'other')")
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
