"""The profiled device as a hardware preset, for the roofline's peaks."""

from __future__ import annotations

from typing import Any

from ...specs import Hardware

__all__ = ["infer_hardware"]

_GPU_NAMES = (("h200", "h200"), ("h100", "h100"), ("h800", "h100"), ("a100", "a100"),
              ("a800", "a100"))


def infer_hardware(profile: Any) -> tuple[Hardware | None, str]:
    """The profiled device as a :class:`perfkit.Hardware` preset, and how it was known.

    Ascend NPUs (``meta.device_type == "npu"``) are taken as the ``ascend-910b`` preset
    (the text exports do not name the SKU); GPUs by the model name Kineto records in
    ``deviceProperties`` (A100 / A800, H100 / H800, H200). Anything else: ``(None, why)``.
    """
    meta = getattr(profile, "meta", None)
    members = list(profile) if hasattr(profile, "ranks") else [profile]
    metas = [meta] + [getattr(p, "meta", None) for p in members[:1]]
    for m in metas:
        if m is None:
            continue
        if str(getattr(m, "device_type", "")).lower() == "npu":
            return Hardware.preset("ascend-910b"), ("Ascend NPU profile: the ascend-910b "
                                                    "preset (the export does not name the "
                                                    "SKU; pass hardware= for yours)")
        for dev in (getattr(m, "extra", None) or {}).get("devices", []) or []:
            low = str(dev).lower()
            for pat, preset in _GPU_NAMES:
                if pat in low:
                    return Hardware.preset(preset), f"device {dev!r} in the trace"
    return None, ("the profile does not say which device ran it (no GPU model in the "
                  "trace): pass hardware=perfkit.Hardware.preset(...) for the roofline")

