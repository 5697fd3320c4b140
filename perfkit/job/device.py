"""The hardware a profile ran on (the job's field, from the one device reading) and the
framework that ran on it.

The reading itself — device names matched to presets, an Ascend NPU's generation, a CPU
run — is :func:`perfkit.analysis.efficiency.hardware.read_device`, which the roofline of
operator efficiency uses too, so the job and the operators table never name different
devices.
"""

from __future__ import annotations

from typing import Any

from ..analysis.efficiency.hardware import read_device
from .fields import FieldValue

__all__ = ["read_hardware", "read_framework", "FRAMEWORK"]

#: Where :func:`read_framework` puts what it read (in :attr:`perfkit.Job.observed`).
FRAMEWORK = "framework"


def read_hardware(profile: Any, put: Any) -> None:
    """Put ``hardware``: the preset of the profiled device, or None and why."""
    reading = read_device(profile)
    put("hardware", reading.hardware, reading.why, "default" if reading.assumed else "profile")


def read_framework(profile: Any, out: dict[str, Any]) -> None:
    """Put :data:`FRAMEWORK`: the framework the profile recorded (``profile.meta.framework``,
    lower case: ``"pytorch"``, ``"mindspore"``); nothing where the loader could not tell
    (a cluster of mixed frameworks, a cluster-analysis output)."""
    framework = getattr(getattr(profile, "meta", None), "framework", None)
    if framework:
        out[FRAMEWORK] = FieldValue(str(framework).lower(), "profile",
                                    f"the profile's framework ({framework})")
