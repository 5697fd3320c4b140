"""The ``memory`` table of a Kineto trace: its ``[memory]`` instants.

A device's samples are the ``allocator`` component, the host allocator's the ``host``
component; a trace of PyTorch <= 1.9 (sizes only) gets the running sum as its allocated
bytes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from ...format import counted, plural
from ..chrome.decode import ChromeTrace
from ..chrome.tables import rel

__all__: list[str] = []  # private to the Kineto reader


def _memory(trace: ChromeTrace, origin: int | None, notes: list[str]) -> pd.DataFrame:
    """``[memory]`` instants: the device allocator (``allocator``) and the host (``host``)."""
    ins = trace.instants
    if not len(ins) or "bytes" not in ins:
        return pd.DataFrame()
    mem = ins[ins["name"].astype(TEXT).eq("[memory]").fillna(False).to_numpy(bool)]
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
        "component": pd.array(component, dtype=TEXT),
        "ts_us": rel(ts, origin),
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
        "alloc_delta_bytes": delta,
        "device": np.where(host, np.nan, dev_id),
    })
