"""The hardware a profile ran on, from its device type and device names.

An Ascend NPU is the 910B preset (its task types ``AI_VECTOR_CORE`` / ``MIX_AIC`` exist from
the 910B generation on; the chip model is not recorded); a GPU by its name in Kineto's
``deviceProperties`` (A100, H100, H200); a CPU run has none.
"""

from __future__ import annotations

from typing import Any

from ..specs import Hardware

__all__ = ["read_hardware", "GPU_NAMES"]

#: (text in a GPU's name, preset): the first match names the preset.
GPU_NAMES = (("h200", "h200"), ("h100", "h100"), ("a100", "a100"))


def read_hardware(profile: Any, put: Any) -> None:
    """Put ``hardware``: the preset of the profiled device, or None and why."""
    meta = profile.meta
    device = meta.device_type
    if device == "npu":
        cores = set()
        try:
            k = profile.kernels
            if "core" in k.columns:
                from ..analysis._frames import distinct

                cores = set(distinct(k, ["core"])["core"].dropna().astype(str))
        except Exception:  # noqa: BLE001 - the hardware is then read without the cores
            cores = set()
        a2 = sorted(cores & {"AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"})
        if a2:
            put("hardware", Hardware.preset("ascend-910b"),
                f"an Ascend NPU ({meta.source_format}) whose tasks run on {', '.join(a2)}: "
                "the 910B generation (Atlas A2) or later; the chip model is not recorded, "
                "the ascend-910b preset is used (set yours for its exact peak)")
        else:
            put("hardware", Hardware.preset("ascend-910b"),
                f"an Ascend NPU ({meta.source_format}) whose generation the profile does "
                "not show: the ascend-910b preset is assumed", "default")
        return
    if device == "gpu":
        names = list(meta.extra.get("devices") or [])
        for p in getattr(profile, "profiles", []) or []:
            names += list(p.meta.extra.get("devices") or [])
        for name in names:
            low = str(name).lower()
            for key, preset in GPU_NAMES:
                if key in low:
                    put("hardware", Hardware.preset(preset),
                        f"deviceProperties names the GPU {name!r}: the {preset} preset")
                    return
        put("hardware", None, ("deviceProperties names " + ", ".join(sorted(set(names)))
                               + ": no preset for it") if names else
            "a GPU trace without deviceProperties: the device is not named")
        return
    if device == "cpu":
        put("hardware", None, "a CPU-only run: no accelerator, so no peak to compare with")
        return
    put("hardware", None, "the profile does not record the device type")
