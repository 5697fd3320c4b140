"""What a Kineto trace says of the run besides its events: vendor, groups, last end.

:func:`_vendor` tells NVIDIA from AMD by the trace header, the GPU names and the runtime
calls; :func:`_groups` reads ``distributedInfo.pg_config`` as ``meta.groups``;
:func:`_last_end` is the end of the last complete event (for telling runs apart).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

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
    rt = pd.Series(distinct, dtype="string").dropna()
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
