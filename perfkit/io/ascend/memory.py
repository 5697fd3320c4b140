"""The memory files of an Ascend text export: their readers, and which belong to another run.

``memory_record.csv`` (framework and CANN components' memory over time),
``npu_module_mem.csv`` (CANN modules' reserved memory) and ``operator_memory.csv`` (each
operator's allocations) become the ``memory`` and ``op_memory`` tables of
:func:`perfkit.io.ascend.text.parse`; :func:`other_run_files` tells which of them were copied
in from another run, so that the loader leaves them out with a note.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..._text_dtype import TEXT
from .._common import find_col, int64_series, read_csv, to_float, to_ns
from ..canonical.validate import WINDOW_NS

__all__ = ["memory_record", "npu_module_mem", "operator_memory", "other_run_files"]

_MIB = 1024.0 * 1024.0
_KIB = 1024.0


def memory_record(path: Path, ns: dict[str, pa.Array], framework: str | None) -> pd.DataFrame:
    """``memory_record.csv``: allocated, reserved and active bytes per component over time
    (torch_npu writes MB as KiB/1024, MindSpore as KiB/1000); its times go to
    ``ns["memory"]``."""
    table = read_csv(path, "memory_record.csv (memory of the Ascend profiler)",
                     required=[("Component",), ("Timestamp(us)",)],
                     text_cols=["Timestamp(us)", "Component", "Device Type", "Stream Ptr"])
    n = table.num_rows
    # torch_npu: MB = KiB/1024 (MiB); MindSpore: MB = KiB/1000
    mb = _MIB if framework != "mindspore" else 1000.0 * _KIB
    h = table.column_names
    ts = to_ns(table.column("Timestamp(us)"), n, label=f"{path.name} Timestamp(us)")
    ns["memory"] = ts
    frame = pd.DataFrame({
        "component": pd.Series(table.column("Component").to_pandas(), dtype=TEXT),
        "ts__ns": int64_series(ts),
        "allocated_bytes": to_float(_col(table, h, "Total Allocated(MB)"), n) * mb,
        "reserved_bytes": to_float(_col(table, h, "Total Reserved(MB)"), n) * mb,
        "active_bytes": to_float(_col(table, h, "Total Active(MB)"), n) * mb,
        "device": pd.Series(_col(table, h, "Device Type").to_pandas()
                            if "Device Type" in h else [pd.NA] * n, dtype=TEXT),
        "source": pd.Series(["memory_record"] * n, dtype=TEXT),
    })
    return frame


def _col(table: pa.Table, header: list[str], *names: str) -> pa.ChunkedArray | None:
    src = find_col(header, *names)
    return None if src is None else table.column(src)


def npu_module_mem(path: Path, ns: dict[str, pa.Array]) -> pd.DataFrame:
    """``npu_module_mem.csv``: each CANN module's reserved bytes over time (KB or MB by the
    header; -1, only releases seen, as NaN); its times go to ``ns["module_mem"]``."""
    table = read_csv(path, "npu_module_mem.csv (CANN module memory)",
                     required=[("Component",), ("Timestamp(us)",)],
                     text_cols=["Timestamp(us)", "Component", "Device"])
    n = table.num_rows
    h = table.column_names
    if find_col(h, "Total Reserved(KB)"):
        reserved = to_float(_col(table, h, "Total Reserved(KB)"), n) * _KIB
    else:
        reserved = to_float(_col(table, h, "Total Reserved(MB)"), n) * _MIB
    reserved = np.where(reserved < 0, np.nan, reserved)  # -1: only releases were seen
    ts = to_ns(table.column("Timestamp(us)"), n, label=f"{path.name} Timestamp(us)")
    ns["module_mem"] = ts
    return pd.DataFrame({
        "component": pd.Series(table.column("Component").to_pandas(), dtype=TEXT),
        "ts__ns": int64_series(ts),
        "reserved_bytes": reserved,
        "device": pd.Series(_col(table, h, "Device").to_pandas()
                            if "Device" in h else [pd.NA] * n, dtype=TEXT),
        "source": pd.Series(["npu_module_mem"] * n, dtype=TEXT),
    })


def operator_memory(path: Path, ns: dict[str, pa.Array]) -> pd.DataFrame:
    """``operator_memory.csv``: each allocation's operator, size, allocation and release
    times and durations; its allocation times go to ``ns["op_memory"]``."""
    times = ["Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
             "Duration(us)", "Active Duration(us)"]
    table = read_csv(path, "operator_memory.csv (allocations of the Ascend profiler)",
                     required=[("Name",), ("Size(KB)",), ("Allocation Time(us)",)],
                     text_cols=[*times, "Name", "Device Type", "Stream Ptr"])
    n = table.num_rows
    h = table.column_names
    alloc = to_ns(table.column("Allocation Time(us)"), n,
                  label=f"{path.name} Allocation Time(us)")
    release = to_ns(_col(table, h, "Release Time(us)"), n,
                    label=f"{path.name} Release Time(us)")
    ns["op_memory"] = alloc
    return pd.DataFrame({
        "name": pd.Series(table.column("Name").to_pandas(), dtype=TEXT),
        "size_bytes": to_float(table.column("Size(KB)"), n) * _KIB,
        "alloc__ns": int64_series(alloc),
        "release__ns": int64_series(release),
        "duration_us": to_float(_col(table, h, "Duration(us)"), n,
                                label=f"{path.name} Duration(us)"),
        "active_duration_us": to_float(_col(table, h, "Active Duration(us)"), n),
        "device": pd.Series(_col(table, h, "Device Type").to_pandas()
                            if "Device Type" in h else [pd.NA] * n, dtype=TEXT),
    })


#: The memory files :func:`other_run_files` checks (key of ``ns``: file name).
_MEMORY_FILES = {"memory": "memory_record.csv", "module_mem": "npu_module_mem.csv",
                 "op_memory": "operator_memory.csv"}
#: The device's own record, the times a memory file of the run falls among.
_ANCHORS = ("kernels", "comm", "trace")


def other_run_files(ns: dict[str, pa.Array]) -> dict[str, tuple[str, str]]:
    """The memory files of another run: ``{key of ns: (file name, why in words)}``.

    A memory file of the run holds samples taken while its device tasks ran. One none of
    whose timestamps lies within :data:`~perfkit.io.canonical.validate.WINDOW_NS` (7 days) of the
    median of the device's tasks (kernel_details.csv, communication.json, trace_view.json)
    was copied in from another run: ``ascend/msinsight-pt-gpt3-old``'s rank 0 holds an
    npu_module_mem.csv of 2024-08-26 beside tasks of 2023-09-19 (its profiler_info_0.json
    ends the collection at 2023-09-19 09:22:59 UTC). Its rows would otherwise be kept with
    no time and their sizes counted among the run's peaks. A file with no readable
    timestamp, or a profile with no device task, is not judged.
    """
    anchors = [_valid_ns(ns[k]) for k in _ANCHORS if k in ns]
    anchors = [a for a in anchors if len(a)]
    if not anchors:
        return {}
    mid = float(np.median(np.concatenate(anchors)))
    out = {}
    for key, name in _MEMORY_FILES.items():
        ts = _valid_ns(ns.get(key))
        if not len(ts) or bool(np.any(np.abs(ts.astype(np.float64) - mid) <= WINDOW_NS)):
            continue
        days = abs(float(np.median(ts)) - mid) / 86_400e9
        out[key] = (name, f"its timestamps ({_day(ts.min())} to {_day(ts.max())}) are "
                          f"{days:,.0f} days from the device tasks' ({_day(mid)}): a file of "
                          "another run, not mixed in")
    return out


def _valid_ns(values: pa.Array | None) -> np.ndarray:
    """The readable, non-negative int64 ns of ``values`` (none for None)."""
    if values is None:
        return np.zeros(0, np.int64)
    arr = pc.drop_null(values).to_numpy(zero_copy_only=False).astype(np.int64)
    return arr[arr >= 0]


def _day(ns_value: float) -> str:
    """The UTC date of a timestamp in ns: ``"2024-08-26"``."""
    return str(np.datetime64(int(ns_value), "ns").astype("datetime64[D]"))
