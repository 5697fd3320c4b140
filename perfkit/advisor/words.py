"""How findings are worded: numbers for people, and the profiled framework's own terms."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["FRAMEWORKS", "framework_of", "say", "fmt_time", "pct"]

#: Frameworks the advice is worded for.
FRAMEWORKS = ("mindspore", "torch_npu", "pytorch_gpu", "ascend")


def fmt_time(us: float) -> str:
    """A duration in the unit that fits, 3 significant digits (``1.23 ms``)."""
    if not np.isfinite(us):
        return "n/a"
    a = abs(us)
    value, unit = (us / 1e6, "s") if a >= 1e6 else (us / 1e3, "ms") if a >= 1e3 else (us, "µs")
    digits = max(0, 2 - int(math.floor(math.log10(abs(value))))) if value else 0
    return f"{value:.{digits}f} {unit}"


def pct(x: float) -> str:
    """A share as a percentage with one decimal (``12.5 %``), ``n/a`` when not finite."""
    return f"{100.0 * x:.1f} %" if np.isfinite(x) else "n/a"


def framework_of(profile: Any) -> str:
    """``"mindspore"``, ``"torch_npu"``, ``"pytorch_gpu"`` or ``"ascend"`` (not known).

    From ``meta.framework`` (``mindspore`` / ``pytorch``), ``meta.device_type``
    (``npu`` / ``gpu``) and ``meta.source_format`` (Kineto traces are PyTorch).
    """
    metas = [getattr(profile, "meta", None)]
    if hasattr(profile, "ranks"):
        metas += [getattr(p, "meta", None) for p in list(profile)[:1]]
    fw = dev = fmt = ""
    for m in metas:
        if m is None:
            continue
        fw = fw or str(getattr(m, "framework", "") or "").lower()
        dev = dev or str(getattr(m, "device_type", "") or "").lower()
        fmt = fmt or str(getattr(m, "source_format", "") or "").lower()
    if fw == "mindspore" or fmt.startswith("mindspore"):
        return "mindspore"
    if dev == "gpu" or fmt == "kineto":
        return "pytorch_gpu"
    if fw == "pytorch":
        return "torch_npu"
    return "ascend"


def say(fw: str, texts: dict[str, str]) -> str:
    """The text for framework ``fw`` (``"ascend"`` falls back to MindSpore + torch_npu).

    ``texts`` maps a framework of :data:`FRAMEWORKS` (or ``"any"``, the fallback) to the
    advice in its terms.
    """
    if fw in texts:
        return texts[fw]
    if fw == "ascend" and "torch_npu" in texts and "mindspore" in texts:
        return f"MindSpore: {texts['mindspore']} torch_npu: {texts['torch_npu']}"
    return texts.get("any", next(iter(texts.values())))
