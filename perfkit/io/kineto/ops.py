"""The ``ops`` table of a Kineto trace: host operators, their self and device time, shapes.

:func:`_ops` makes one row per host operator and annotation, with its self time
(:func:`~perfkit.io.kineto.nesting.self_times`) and the device time it launched;
:func:`shapes_text` and :func:`list_text` write the operators' ``Input Dims``,
``Input type`` and ``Concrete Inputs`` in the Ascend notation (``"4,64;;64"``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import numeric, per_distinct, str_array, text
from ..chrome.tables import NA_NS, rel, step_index
from .launches import _device_time
from .nesting import _thread_codes, self_times

__all__ = ["shapes_text", "list_text"]


def _ops(runtime: pd.DataFrame, cpu: pd.DataFrame, dev: pd.DataFrame, spans: pd.DataFrame,
         origin: int | None) -> pd.DataFrame:
    """The ``ops`` table: one row per host operator or annotation of ``cpu``."""
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
        "cat": pd.array(cpu["kind"].to_numpy(dtype=object), dtype=TEXT),
        "self_us": self_times(np.where(ts == NA_NS, np.iinfo(np.int64).max, ts), end,
                              thread_code, cpu["dur_us"].to_numpy(np.float64)),
    })
    if "input_dims" in cpu.columns:
        # text columns the schema does not list keep the "str" dtype (NaN when missing)
        out["input_shapes"] = str_array(shapes_text(cpu["input_dims"]))
        out["input_dtypes"] = str_array(list_text(cpu["input_type"])) \
            if "input_type" in cpu.columns else pd.NA
        if "concrete_inputs" in cpu.columns:
            out["concrete_inputs"] = str_array(list_text(cpu["concrete_inputs"]))
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
    t = dims.astype(TEXT).str.replace(r"\s+", "", regex=True)
    t = t.str.replace(r"^\[|\]$", "", regex=True)          # the outer list
    t = t.str.replace(r"\],\[", ";", regex=True)            # between inputs
    return t.str.replace(r"^\[|\]$", "", regex=True)       # first and last input


def _list_text(values: pd.Series) -> pd.Series:
    t = values.astype(TEXT).str.strip()
    t = t.str.replace(r'^\[\s*"?|"?\s*\]$', "", regex=True)
    return t.str.replace(r'"\s*,\s*"', ";", regex=True)
