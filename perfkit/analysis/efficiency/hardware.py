"""The profiled device as a hardware preset: the one reading the roofline and the job share.

:func:`read_device` reads the device names a profile records (Kineto
``deviceProperties[].name`` in ``meta.extra["devices"]``, an Ascend SoC name where a loader
records one) and matches them with :func:`perfkit.specs.hardware_presets.preset_for_device`.
A named device without a preset is said by its name, never as "no GPU model": it gets no
roofline rather than another device's. An Ascend NPU whose chip is not named is the
generic ``ascend-910b`` preset (its task types ``AI_VECTOR_CORE`` / ``MIX_AIC`` exist from the
910B generation on); a CPU-only run has no accelerator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...calc.attention_occupancy import multiprocessors
from ...format import bytes_text
from ...specs import Hardware
from ...specs.hardware_presets import preset_for_device
from .._frames import distinct, table_columns
from .._util import distinct_values

__all__ = ["DeviceReading", "read_device", "infer_hardware", "device_names", "recorded_memory",
           "recorded_multiprocessors",
           "MEMORY_TOLERANCE"]

#: How far the memory a trace records may differ from its preset's before the recorded
#: one wins: vendors quote "80 GB" for 80 GiB (7.4 % more) and the driver keeps a few
#: hundred MiB back, so a 10 % difference is the same device, a larger one another SKU
#: (a GH200's 96 GB against the H200's 141 GB).
MEMORY_TOLERANCE = 0.10

#: Ascend task types of the 910B generation (Atlas A2) and later.
_A2_CORES = frozenset({"AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"})


@dataclass(frozen=True)
class DeviceReading:
    """What a profile says about its device.

    Attributes
    ----------
    hardware : Hardware or None
        The preset, or None (no accelerator, or a device without a preset).
    why : str
        A sentence: what was read and which preset it gave, or why there is none.
    assumed : bool
        True when the preset is a default the profile does not confirm (an Ascend NPU
        whose generation the profile does not show).
    names : tuple of str
        The device names the profile records (empty when it names none).
    """

    hardware: Hardware | None
    why: str
    assumed: bool = False
    names: tuple[str, ...] = ()


def _metas(profile: Any) -> list[Any]:
    metas = [getattr(profile, "meta", None)]
    metas += [getattr(p, "meta", None) for p in getattr(profile, "profiles", None) or []]
    return [m for m in metas if m is not None]


def device_names(profile: Any) -> list[str]:
    """Distinct device names the profile (or any rank of a cluster) records, in order."""
    seen: dict[str, None] = {}
    for m in _metas(profile):
        for name in (getattr(m, "extra", None) or {}).get("devices") or []:
            text = str(name).strip()
            if text:
                seen.setdefault(text, None)
    return list(seen)


def _facts(profile: Any, name: str) -> dict[str, Any]:
    """What the profile (or its first rank naming it) records of device ``name``
    (``meta.extra["device_facts"]``: memory_bytes, sm_count ...); empty when nothing."""
    for m in _metas(profile):
        for fact in (getattr(m, "extra", None) or {}).get("device_facts") or []:
            if isinstance(fact, dict) and str(fact.get("name", "")).strip() == name:
                return fact
    return {}


def recorded_memory(hardware: Hardware, fact: dict[str, Any]) -> tuple[Hardware, str]:
    """The preset with the device memory the trace records, where they disagree.

    ``fact["memory_bytes"]`` (Kineto's ``deviceProperties[].totalGlobalMem``) replaces
    ``hardware.memory_bytes`` when it differs by more than :data:`MEMORY_TOLERANCE` of it;
    the second value is the clause that says so (empty when the preset is kept).
    """
    mem = fact.get("memory_bytes")
    if not isinstance(mem, (int, float)) or mem <= 0 or hardware.memory_bytes <= 0:
        return hardware, ""
    if abs(mem - hardware.memory_bytes) <= MEMORY_TOLERANCE * hardware.memory_bytes:
        return hardware, ""
    return hardware.replace(memory_bytes=float(mem)), (
        f"; the trace records {bytes_text(mem)} of device memory (deviceProperties "
        f"totalGlobalMem) against the preset's {bytes_text(hardware.memory_bytes)}: the "
        "recorded memory is used")


def recorded_multiprocessors(hardware: Hardware, fact: dict[str, Any]
                             ) -> tuple[Hardware, str]:
    """The preset with the multiprocessor count the trace records.

    ``fact["sm_count"]`` (Kineto's ``deviceProperties[].numSms``) becomes
    ``hardware.multiprocessors``, on which a fused attention call's occupancy is priced
    (:mod:`perfkit.calc.attention_occupancy`), where it differs from the datasheet's
    count for the preset (an H100 PCIe has 114 SMs, the ``"h100"`` preset's SXM 132) or
    the datasheet has none; the second value is the clause that says so. A count equal
    to the datasheet's leaves the preset as it is (equal to ``Hardware.preset(name)``).
    """
    sms = fact.get("sm_count")
    if isinstance(sms, bool) or not isinstance(sms, (int, float)) or sms < 1 \
            or sms != int(sms):
        return hardware, ""
    sms = int(sms)
    sheet = multiprocessors(hardware.name)
    if sheet == sms:
        return hardware, ""
    said = (
        f"; the trace records {sms} SMs (deviceProperties numSms)"
        + (f" against the datasheet's {sheet} for {hardware.name}" if sheet else "")
        + ": attention's occupancy is priced on the recorded count")
    return hardware.replace(multiprocessors=sms), said


def _device_type(profile: Any) -> str:
    for m in _metas(profile):
        kind = str(getattr(m, "device_type", "") or "").lower()
        if kind:
            return kind
    return ""


def _ascend_cores(profile: Any) -> list[str]:
    """The A2-generation task types of the first rank's device tasks."""
    first = (getattr(profile, "profiles", None) or [profile])[0]
    if "core" not in table_columns(first, "kernels"):
        return []
    try:
        kernels = first.kernels
        # a table in memory: its distinct values (hashed by Arrow, not as a frame's rows)
        values = distinct_values(kernels, "core") if isinstance(kernels, pd.DataFrame) else \
            distinct(kernels, ["core"])["core"]
        cores = set(pd.Series(values, dtype=object).dropna().astype(str))
    except Exception:  # noqa: BLE001 - the generation is then not read
        return []
    return sorted(cores & _A2_CORES)


def read_device(profile: Any) -> DeviceReading:
    """The profiled device as a :class:`perfkit.Hardware` preset, and how it was known."""
    names = device_names(profile)
    kind = _device_type(profile)
    fmt = str(getattr(getattr(profile, "meta", None), "source_format", "") or "profile")
    matched = [(n, preset_for_device(n)) for n in names]
    found = [(n, p) for n, p in matched if p is not None]
    label = "NPU" if kind == "npu" else "GPU" if kind == "gpu" else "device"
    if found:
        name, preset = found[0]
        others = sorted({p for _, p in found} - {preset})
        why = f"the profile names the {label} {name!r}: the {preset} preset"
        if others:
            why += f" (ranks also name {', '.join(others)}; {preset} is used)"
        if preset == "ascend-910b":  # "Ascend910B", as torch_npu's NPU_INFO writes it
            why += (" (the name gives the generation, not the chip model: set yours, e.g. "
                    "ascend-910b2, for its exact peak)")
        fact = _facts(profile, name)
        hardware, said = recorded_memory(Hardware.preset(preset), fact)
        hardware, said_sms = recorded_multiprocessors(hardware, fact)
        return DeviceReading(hardware, why + said + said_sms, False, tuple(names))
    if names:
        listed = ", ".join(repr(n) for n in names)
        return DeviceReading(None, f"the profile names the {label} {listed}, for which "
                                   "perfkit has no preset: no roofline (pass hardware="
                                   "perfkit.Hardware(...) with its peaks)", False, tuple(names))
    if kind == "npu":
        a2 = _ascend_cores(profile)
        if a2:
            return DeviceReading(
                Hardware.preset("ascend-910b"),
                f"an Ascend NPU ({fmt}) whose tasks run on {', '.join(a2)}: the 910B "
                "generation (Atlas A2) or later; the chip model (SKU) is not recorded, the "
                "ascend-910b preset is used (set yours, e.g. ascend-910b2, for its exact peak)")
        return DeviceReading(Hardware.preset("ascend-910b"),
                             f"an Ascend NPU ({fmt}) whose chip (SKU) and generation the "
                             "profile does not show: the ascend-910b preset is assumed", True)
    if kind == "gpu":
        return DeviceReading(None, "a GPU trace without deviceProperties: the GPU is not "
                                   "named; pass hardware=perfkit.Hardware.preset(...) for "
                                   "the roofline")
    if kind == "cpu":
        return DeviceReading(None, "a CPU-only run: no accelerator, so no peak to compare "
                                   "with (pass hardware=perfkit.Hardware(...) with your "
                                   "CPU's peaks for a roofline)")
    return DeviceReading(None, "the profile does not record the device type: pass "
                               "hardware=perfkit.Hardware.preset(...) for the roofline")


def infer_hardware(profile: Any) -> tuple[Hardware | None, str]:
    """The profiled device as a :class:`perfkit.Hardware` preset, and how it was known.

    A GPU by the name Kineto records in ``deviceProperties`` (every preset of
    :data:`perfkit.specs.hardware_presets.HARDWARE_PRESETS` lists the names it matches);
    an Ascend NPU by its SoC name when recorded, else the ``ascend-910b`` preset. A named
    device without a preset gives ``(None, why)`` naming it (see :func:`read_device`).
    """
    reading = read_device(profile)
    return reading.hardware, reading.why
