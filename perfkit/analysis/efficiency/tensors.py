"""An operator's recorded arguments: shapes, dtypes and scalar inputs, as the models read them.

Profilers write a call's arguments as text: ``Input Shapes`` ``"4,64;64,192;;"`` (one
field per argument, empty for a non-tensor), ``Input Data Types`` ``"DT_BF16;DT_BF16"``
(Ascend) or ``"c10::BFloat16;float"`` (PyTorch), and PyTorch's ``Concrete Inputs``
(``";;;0.;True"``: the scalar arguments). This module turns them into Python values; each
performance model knows which argument position means what for its operators.

Dtypes map to bytes per element and to the hardware's peak keys (``DT_BF16`` -> ``bf16``,
``FLOAT16`` / ``half`` -> ``fp16``, ``FLOAT`` / ``float`` -> ``fp32`` ...).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Tensor", "dtype_bytes", "peak_key", "parse_shapes", "split_args", "tensors",
           "ints"]

#: One tensor argument: (shape, bytes per element, dtype as recorded).
Tensor = tuple[tuple[int, ...], float, str]

_DTYPE_BYTES = {
    "bf16": 2, "bfloat16": 2, "c10::bfloat16": 2, "fp16": 2, "float16": 2, "half": 2,
    "c10::half": 2, "float": 4, "float32": 4, "fp32": 4, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "bool": 1, "unsigned char": 1, "signed char": 1, "char": 1,
    "int16": 2, "uint16": 2, "short": 2, "int32": 4, "uint32": 4, "int": 4,
    "int64": 8, "uint64": 8, "long": 8, "long int": 8, "complex64": 8, "complex128": 16,
    "hf32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1, "fp8": 1, "hifloat8": 1,
}
_PEAK_KEY = {"bf16": "bf16", "bfloat16": "bf16", "c10::bfloat16": "bf16", "fp16": "fp16",
             "float16": "fp16", "half": "fp16", "c10::half": "fp16", "float": "fp32",
             "float32": "fp32", "fp32": "fp32", "hf32": "fp32", "int8": "int8",
             "uint8": "int8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
             "c10::float8_e4m3fn": "fp8", "c10::float8_e5m2": "fp8", "fp8": "fp8",
             "hifloat8": "fp8"}


def _norm_dtype(name: Any) -> str:
    text = str(name).strip().strip('"').lower()
    return text[3:] if text.startswith("dt_") else text


def dtype_bytes(name: Any) -> float:
    """Bytes per element of a profiler dtype name (NaN for a non-tensor or unknown one).

    Accepts Ascend names (``DT_BF16``, ``FLOAT16``, ``FLOAT``, ``INT64``) and PyTorch's
    (``c10::BFloat16``, ``float``, ``long int``).
    """
    return float(_DTYPE_BYTES.get(_norm_dtype(name), np.nan))


def peak_key(name: Any) -> str | None:
    """The :attr:`perfkit.Hardware.peak_flops` key of a dtype (``None`` when unknown)."""
    return _PEAK_KEY.get(_norm_dtype(name))


def parse_shapes(text: Any) -> list[tuple[int, ...] | None]:
    """``"4,64;64,192;;"`` -> ``[(4, 64), (64, 192), None, None]`` (None: not a tensor).

    A scalar tensor is ``()``; a TensorList (``[...]``) or anything unreadable is None.
    """
    if text is None or (isinstance(text, float) and math.isnan(text)) or text is pd.NA:
        return []
    out: list[tuple[int, ...] | None] = []
    for part in str(text).strip().strip('"').split(";"):
        part = part.strip()
        if not part or "[" in part:
            out.append(None)
            continue
        try:
            out.append(tuple(int(x) for x in part.split(",") if x.strip() != ""))
        except ValueError:
            out.append(None)
    return out


def split_args(text: Any) -> list[str]:
    """``"a;b;;c"`` -> ``["a", "b", "", "c"]``: one field per argument (empty: missing)."""
    if text is None or text is pd.NA or (isinstance(text, float) and math.isnan(text)):
        return []
    return [x.strip() for x in str(text).strip().strip('"').split(";")]


def tensors(shapes: list[tuple[int, ...] | None], dtypes: list[str]) -> list[Tensor]:
    """(shape, bytes per element, dtype) of the tensor arguments, in order."""
    out = []
    for i, s in enumerate(shapes):
        if s is None:
            continue
        dt = dtypes[i] if i < len(dtypes) else ""
        b = dtype_bytes(dt)
        if not np.isfinite(b):
            continue
        out.append((s, b, dt))
    return out


def ints(text: str, n: int) -> list[int]:
    """``n`` whole numbers from a scalar argument (``"[1, 1]"``; one value stands for all).

    Raises ValueError when the text holds neither one nor ``n`` numbers.
    """
    vals = [int(x) for x in re.findall(r"-?\d+", text)]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise ValueError(text)
    return vals
