"""The hardware a profile ran on: the job's field, from the one device reading.

The reading itself — device names matched to presets, an Ascend NPU's generation, a CPU
run — is :func:`perfkit.analysis.efficiency.hardware.read_device`, which the roofline of
operator efficiency uses too, so the job and the operators table never name different
devices.
"""

from __future__ import annotations

from typing import Any

from ..analysis.efficiency.hardware import read_device

__all__ = ["read_hardware"]


def read_hardware(profile: Any, put: Any) -> None:
    """Put ``hardware``: the preset of the profiled device, or None and why."""
    reading = read_device(profile)
    put("hardware", reading.hardware, reading.why, "default" if reading.assumed else "profile")
