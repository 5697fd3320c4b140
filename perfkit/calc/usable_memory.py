"""The device memory a plan may use: the device's memory less perfkit's reserve.

:func:`perfkit.plan.search`, :func:`perfkit.plan.predict` and
:func:`perfkit.calc.step.step_time` all default their memory limit to
``hardware.memory_bytes × (1 − memory_reserve)`` with ``memory_reserve`` =
:data:`MEMORY_RESERVE`: the share the framework's runtime, the communication library's
buffers and fragmentation take before the model's tensors (10 %: an Ascend 910B's 64 GiB
less 10 % is 57.6 GiB, beside the 57.2 GiB ``max_device_memory`` MindFormers' guides set).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError, check_fraction

__all__ = ["MEMORY_RESERVE", "usable_memory_bytes"]

#: The share of a device's memory a plan leaves free by default.
MEMORY_RESERVE = 0.1


def usable_memory_bytes(hardware: Any, memory_reserve: float = MEMORY_RESERVE) -> float:
    """``hardware.memory_bytes × (1 − memory_reserve)``: the default memory limit.

    Parameters
    ----------
    hardware : perfkit.Hardware
    memory_reserve : float
        Share of the device memory left free, in [0, 1).

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When ``hardware`` has no memory size or the reserve is out of range.
    """
    reserve = check_fraction("memory_reserve", memory_reserve)
    total = getattr(hardware, "memory_bytes", None)
    if not isinstance(total, (int, float)) or not total > 0:
        raise InvalidArgumentError("hardware", "must be a perfkit.Hardware with its memory "
                                   "size (memory_bytes)", type(hardware).__name__)
    return float(total) * (1.0 - reserve)
