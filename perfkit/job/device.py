"""The hardware a profile ran on (the job's field, from the one device reading), the
framework that ran on it, and the static-memory scheme a simulated profile was made with.

The reading itself — device names matched to presets, an Ascend NPU's generation, a CPU
run — is :func:`perfkit.analysis.efficiency.hardware.read_device`, which the roofline of
operator efficiency uses too, so the job and the operators table never name different
devices.
"""

from __future__ import annotations

from typing import Any

from ..analysis.efficiency.hardware import read_device
from ..calc.memory import STATIC_SCHEME_NAMES, STATIC_SCHEMES, framework_static_scheme
from ..calc.precision import full_precision, parameter_bytes
from .fields import FieldValue

__all__ = ["read_hardware", "read_framework", "read_static_scheme", "scheme_reason",
           "FRAMEWORK", "STATIC_SCHEME"]

#: Where :func:`read_framework` puts what it read (in :attr:`perfkit.Job.observed`).
FRAMEWORK = "framework"
#: Where :func:`read_static_scheme` puts what it read (in :attr:`perfkit.Job.observed`).
STATIC_SCHEME = "static_scheme"


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


def read_static_scheme(profile: Any, out: dict[str, Any]) -> None:
    """Put :data:`STATIC_SCHEME` where the profile records how its memory was counted: a
    profile written by :func:`perfkit.simulate.simulate` keeps the scheme of its settings
    (``meta.extra["simulated_static_scheme"]``, of the profile or of its first rank), so
    the figures count static memory as its memory records were made, whatever the
    framework its files imitate. Nothing for a real profile: its framework decides
    (:func:`perfkit.calc.memory.framework_static_scheme`)."""
    metas = [getattr(profile, "meta", None)]
    metas += [getattr(p, "meta", None) for p in list(getattr(profile, "profiles", ()))[:1]]
    for meta in metas:
        scheme = (getattr(meta, "extra", None) or {}).get("simulated_static_scheme")
        if scheme in STATIC_SCHEMES:
            out[STATIC_SCHEME] = FieldValue(
                scheme, "profile", "the profile is a perfkit simulation, and its memory "
                                   f"records were made with the {STATIC_SCHEME_NAMES[scheme]}")
            return


def scheme_reason(framework: str | None, dtype: str | None = None,
                  gradient_bytes: float | None = None) -> str:
    """Why a job of ``framework`` counts static memory with
    :func:`~perfkit.calc.memory.framework_static_scheme`'s scheme, in words, with the bytes
    per parameter a run of ``dtype`` whose reduction moves ``gradient_bytes`` keeps
    (:func:`perfkit.calc.precision.parameter_bytes`)."""
    if framework_static_scheme(framework) == "megatron":
        per = parameter_bytes("megatron", dtype, gradient_bytes)
        sixteen = dtype if dtype in ("fp16", "bf16") else "bf16"
        if full_precision(dtype):
            kept = "an fp32 run keeps fp32 weights and gradients and no second copy"
        elif per.gradient == 4:
            kept = "fp32 gradients and an fp32 main copy of the weights"
        else:
            name = sixteen if per.gradient == 2 else f"{per.gradient:g}-byte"
            kept = (f"{name} gradients, which its optimizer copies to fp32, and an fp32 "
                    "main copy of the weights")
        return ("PyTorch's convention (Megatron-LM, and MindSpeed with torch_npu on Ascend): "
                f"{kept}, {per.total:g} bytes per parameter before the distributed "
                f"optimizer shards its {per.optimizer:g}")
    if framework:
        return ("MindSpore's convention: 16-bit weights and fp32 Adam moments, no fp32 main "
                "copy, 10 bytes per parameter before optimizer parallel shards them")
    return ("the framework is not known: MindSpore's convention assumed (10 bytes per "
            "parameter, no fp32 main copy)")
