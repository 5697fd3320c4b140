"""What every file of a simulated Ascend export shares: the headers of its CSV files
(torch_npu and MindSpore), the output folder's name, absolute timestamps from the simulated
epoch, the HCCL group hash and the CSV writer.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from ..io._common import hccl_group_hash
from ._engine import EPOCH_NS
from ._text import us_to_ns

__all__ = ["double_hash", "KERNEL_HEADER_PT", "STEP_HEADER_PT"]


OUT = "ASCEND_PROFILER_OUTPUT"
MODEL_ID = "4294967295"
PMU = ["aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio",
       "aic_scalar_time(us)", "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio",
       "aic_mte2_time(us)", "aic_mte2_ratio", "aic_fixpipe_time(us)", "aic_fixpipe_ratio",
       "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)",
       "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
       "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate",
       "cube_utilization(%)"]
_BASE = ["Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
         "Start Time(us)", "Duration(us)", "Wait Time(us)"]
_SHAPES = ["Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
           "Output Data Types", "Output Formats", "Context ID"]
KERNEL_HEADER_PT = ["Step Id", "Device_id", *_BASE, "Block Num", "Mix Block Num",
                    "HF32 Eligible", *_SHAPES]
KERNEL_HEADER_MS = ["Step ID", *_BASE, "Block Dim", "Mix Block Dim", "HF32 Eligible", *_SHAPES]
STEP_COLS = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
             "Communication", "Free", "Stage", "Bubble",
             "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
STEP_HEADER_PT = ["Device_id", *STEP_COLS]
MEM_HEADER_PT = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Stream Ptr", "Device Type"]
MEM_HEADER_MS = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                 "Total Active(MB)", "Device Type"]
OPMEM_HEADER = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)",
                "Active Release Time(us)", "Duration(us)", "Active Duration(us)",
                "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
                "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr",
                "Device Type"]
OPSTAT_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)",
                 "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
COMPUTE_STREAM = 2
APP_RUNTIME_BYTES = 2.4 * 2**30
LOCAL_GBPS = 420.0


def double_hash(text: str) -> int:
    """The 64-bit group hash HCCL writes after ``@`` (see ``perfkit.io._common``)."""
    return int(hccl_group_hash(text))


def _abs_ns(us: np.ndarray | float) -> np.ndarray:
    return EPOCH_NS + us_to_ns(np.atleast_1d(us))


def _abs_us_float(us: float) -> float:
    return round(EPOCH_NS / 1000.0 + us, 3)


def _fmt(x: float) -> str:
    return repr(float(x))


def _write_csv(path: Path, header: list[str], rows: list[list[Any]], newline: str) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)
