"""Which device a notebook's nominal figures are for (:func:`job_device`).

``04_communication`` took a device preset parameter, default ``"ascend-910b"``, and gave it
to the advisor as the profile's device: on the ResNet-50 V100 trace
(``shared/samples/wild/k_resnet50_nw0``) it reported "3 GEMM shapes under 35 % of their
roofline (ascend-910b)" and an element-wise saving of 6.47 ms where ``00_start_here``, on
the job's own V100, said 4.91 ms — two notebooks contradicting each other on one profile.
The device now is the profile's own unless the reader names a preset, and a sentence says
which. ``02_parallel_strategy`` planned on its default ``"ascend-910b"`` beside a GPU
profile, and searched the Ascend device's layouts with a calibration fitted on the GPU's
kernels; it now takes the profile's device too, and its former default only where the
profile names none (``fallback``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..calc.usable_memory import MEMORY_RESERVE, usable_memory_bytes
from ..errors import check_positive
from ..job import Job
from ..specs import Hardware

__all__ = ["JobDevice", "job_device", "MemoryLimit", "memory_limit"]


@dataclass(frozen=True)
class JobDevice:
    """The device a notebook computes nominal figures for, and why.

    Attributes
    ----------
    hardware : perfkit.Hardware or None
        None when the profile names no device and no preset was given.
    preset : str or None
        The preset of ``hardware`` (what a dropdown of presets starts from), None when it
        is not one.
    sentence : str
        Which device, and whose: the profile's, or the reader's preset (and then the
        profile's own device when it names a different one).
    """

    hardware: Hardware | None
    preset: str | None
    sentence: str


def job_device(job: Job, preset: str | None = None,
               fallback: str | None = None) -> JobDevice:
    """The device for ``job``'s nominal figures: ``preset`` when given, else the job's,
    else ``fallback`` when given.

    Parameters
    ----------
    job : perfkit.Job
        From :func:`perfkit.infer_job`; ``job.hardware`` is the device the profile names.
    preset : str, optional
        A :meth:`perfkit.Hardware.presets` name that wins over the profile's device.
    fallback : str, optional
        A :meth:`perfkit.Hardware.presets` name for a profile that names no device (a
        notebook that needs a device to compute anything); without it such a profile gets
        no device (``hardware`` None).

    Returns
    -------
    JobDevice

    Raises
    ------
    perfkit.errors.PerfkitError
        When ``preset`` or ``fallback`` is not a preset (the message lists them).
    """
    own = job.hardware
    if preset is not None:
        hardware = Hardware.preset(preset)
        sentence = f"Nominal figures for the preset {preset} (HARDWARE)"
        if own is not None and own.name != preset:
            sentence += f", not for the profile's own device, {own.name}"
        return JobDevice(hardware, preset, sentence + ".")
    if own is None and fallback is not None:
        return JobDevice(Hardware.preset(fallback), fallback,
                         f"The profile does not name its device: figures for the preset "
                         f"{fallback}, the default; set HARDWARE to a device preset to "
                         "choose another.")
    if own is None:
        return JobDevice(None, None, "The profile does not name its device: no nominal "
                         "bandwidth or roofline is shown; set HARDWARE to a device preset "
                         "to compare with one.")
    name = own.name if own.name in Hardware.presets() else None
    return JobDevice(own, name, f"Nominal figures for the profile's own device, {own.name}.")


@dataclass(frozen=True)
class MemoryLimit:
    """The memory per device a notebook plans with, and where it comes from.

    Attributes
    ----------
    bytes : float
        Usable bytes per device.
    sentence : str
        The limit and its source: the reader's figure, or the device's memory less
        perfkit's reserve.
    """

    bytes: float
    sentence: str


def memory_limit(hardware: Hardware, gib: float | None = None,
                 memory_reserve: float = MEMORY_RESERVE) -> MemoryLimit:
    """The memory limit per device for ``hardware``: ``gib`` GiB when given, else the
    device's memory less ``memory_reserve``, the limit :func:`perfkit.plan.search` and
    :func:`perfkit.plan.predict` (the Planner) take by default
    (:func:`perfkit.calc.usable_memory.usable_memory_bytes`).

    ``02_parallel_strategy`` kept ``MEMORY_LIMIT_GIB = 57.2`` (an Ascend 910B's
    ``max_device_memory``) when it planned on the profile's own GPU; its default is now
    this function's, for whichever device the notebook chose.

    Parameters
    ----------
    hardware : perfkit.Hardware
        The device planned on (:func:`job_device`'s).
    gib : float, optional
        The reader's limit in GiB (2**30 bytes), e.g. MindFormers' ``max_device_memory``.
    memory_reserve : float
        Share of the device's memory left free when ``gib`` is not given.

    Raises
    ------
    perfkit.errors.InvalidArgumentError
        When ``gib`` is not positive, or the reserve is out of [0, 1).
    """
    total = hardware.memory_bytes / 2**30
    if gib is None:
        usable = usable_memory_bytes(hardware, memory_reserve)
        return MemoryLimit(usable, f"Memory limit {usable / 2**30:.1f} GiB per device: the "
                                   f"{hardware.name}'s {total:.1f} GiB less perfkit's "
                                   f"{100 * memory_reserve:g} % reserve (set "
                                   "MEMORY_LIMIT_GIB to use another).")
    given = float(check_positive("gib", gib))
    over = " — more than the device has" if given > total else ""
    return MemoryLimit(given * 2**30, f"Memory limit {given:g} GiB per device "
                                      f"(MEMORY_LIMIT_GIB), of the {hardware.name}'s "
                                      f"{total:.1f} GiB{over}.")
