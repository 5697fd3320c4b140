"""What a Kineto trace says of the run besides its events: vendor, groups, last end.

:func:`_vendor` tells NVIDIA from AMD by the trace header, the GPU names and the runtime
calls; :func:`_groups` reads ``distributedInfo.pg_config`` as ``meta.groups``;
:func:`_last_end` is the end of the last complete event (for telling runs apart).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..._text_dtype import TEXT
from .._common.distinct import codes
from ..chrome.decode import ChromeTrace
from ..chrome.tables import NA_NS

__all__: list[str] = []  # private to the Kineto reader


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
    rt = pd.Series(distinct, dtype=TEXT).dropna()
    if "roctracer_version" in h or "hip_runtime_version" in h or \
            re.search(r"\b(?:amd|instinct|radeon)\b|\bmi\d{3}", gpus) or \
            bool(rt.str.startswith("hip").any()):
        return "amd"
    if "cupti_version" in h or "cuda_runtime_version" in h or \
            re.search(r"nvidia|tesla|geforce|quadro|\b[ahbvlt]\d{2,3}\b", gpus) or \
            bool(rt.str.match(r"cu[A-Z]|cuda").any()):
        return "nvidia"
    return None


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


#: ``deviceProperties`` keys kept as device facts (Kineto's names -> perfkit's).
_FACTS = {"totalGlobalMem": "memory_bytes", "numSms": "sm_count",
          "multiProcessorCount": "sm_count", "clockRate": "clock_khz"}


def _device_facts(props: list[dict[str, object]]) -> list[dict[str, object]]:
    """What each GPU of ``deviceProperties`` records of itself: ``name``, ``memory_bytes``
    (``totalGlobalMem``), ``sm_count`` (``numSms``) and ``clock_khz`` (``clockRate``,
    which Kineto does not write today), where present and numeric."""
    out: list[dict[str, object]] = []
    for d in props:
        if not isinstance(d, dict) or not d.get("name"):
            continue
        fact: dict[str, object] = {"name": str(d["name"])}
        for key, col in _FACTS.items():
            v = d.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
                fact.setdefault(col, float(v))
        out.append(fact)
    return out
