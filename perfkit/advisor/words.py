"""How findings are worded: numbers for people, and the profiled framework's own terms."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..format import bytes_text, plural, time_text

__all__ = ["FRAMEWORKS", "PYTORCH_ACCELERATED", "framework_of", "say", "rocm_terms",
           "DEVICE_TERMS", "fmt_time", "fmt_bytes", "pct", "kernel_names", "clipped"]

#: Frameworks the advice is worded for: MindSpore, torch_npu, PyTorch on NVIDIA GPUs
#: (CUDA), on AMD GPUs (ROCm) and on CPUs only (gloo), and Ascend when the framework is
#: not known.
FRAMEWORKS = ("mindspore", "torch_npu", "pytorch_gpu", "pytorch_rocm", "pytorch_cpu",
              "ascend")
#: The frameworks with an accelerator (every one but ``pytorch_cpu``).
PYTORCH_ACCELERATED = tuple(f for f in FRAMEWORKS if f != "pytorch_cpu")

#: Words that only make sense with an accelerator: no advice to a CPU-only run has them.
DEVICE_TERMS = re.compile(r"CUDA|cuda|NVLink|NCCL|RCCL|nvidia|cudnn|cuDNN|DALI|Apex|"
                          r"pin_memory|GPU|Transformer Engine|XID|npu|NPU|HCCS|RoCE|hccn|"
                          r"Ascend|HIP|ROCm|xGMI")

_ROCM_TERMS = (
    (r"CUDA graphs", "HIP graphs (torch.cuda.graphs on ROCm)"),
    (r"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"),
    (r"CUDA_LAUNCH_BLOCKING", "HIP_LAUNCH_BLOCKING"),
    (r"nvidia-smi -q and the XID errors", "rocm-smi and the amdgpu messages of dmesg"),
    (r"nvidia-smi nvlink -e", "rocm-smi --showtopo"),
    (r"an NVLink domain", "an Infinity Fabric (xGMI) domain"),
    (r"NVLink", "Infinity Fabric (xGMI)"),
    (r"\bNCCL\b(?!_)", "RCCL"),  # RCCL keeps NCCL's environment variables (NCCL_DEBUG)
    (r"cudnn\.deterministic=False", "torch.backends.cudnn.deterministic=False (MIOpen)"),
    (r"GPU decoding \(DALI\)", "GPU decoding (rocAL)"),
    (r"tensor cores", "matrix cores"),  # AMD's name for its MFMA units
)


def rocm_terms(text: str) -> str:
    """NVIDIA advice in ROCm's terms (HIP, RCCL, Infinity Fabric, rocm-smi)."""
    for pattern, repl in _ROCM_TERMS:
        text = re.sub(pattern, repl, text)
    return text


def fmt_time(us: float) -> str:
    """A duration in the unit that fits, 3 significant digits (``1.23 ms``): the one time
    formatter of every view (:func:`perfkit.format.time_text`); ``n/a`` when not finite."""
    if not np.isfinite(us):
        return "n/a"
    return time_text(us)


def fmt_bytes(size: float) -> str:
    """A size in the binary unit that fits (``136 MiB``, ``7.52 GiB``; never
    ``0.1 GiB``): :func:`perfkit.format.bytes_text`; ``n/a`` when not finite."""
    if not np.isfinite(size):
        return "n/a"
    return bytes_text(size)


def pct(x: float) -> str:
    """A share as a percentage with one decimal (``12.5 %``), ``n/a`` when not finite."""
    return f"{100.0 * x:.1f} %" if np.isfinite(x) else "n/a"


def framework_of(profile: Any) -> str:
    """One of :data:`FRAMEWORKS` (``"ascend"`` when not known).

    From ``meta.framework`` (``mindspore`` / ``pytorch``), ``meta.device_type``
    (``npu`` / ``gpu`` / ``cpu``), ``meta.source_format`` (Kineto traces are PyTorch) and
    the GPU vendor a Kineto trace records (``meta.extra["vendor"]``: ``amd`` is ROCm).
    """
    metas = [getattr(profile, "meta", None)]
    if hasattr(profile, "ranks"):
        metas += [getattr(p, "meta", None) for p in list(profile)[:1]]
    fw = dev = fmt = vendor = ""
    for m in metas:
        if m is None:
            continue
        fw = fw or str(getattr(m, "framework", "") or "").lower()
        dev = dev or str(getattr(m, "device_type", "") or "").lower()
        fmt = fmt or str(getattr(m, "source_format", "") or "").lower()
        extra = getattr(m, "extra", None) or {}
        vendor = vendor or str(extra.get("vendor") or "").lower()
    if fw == "mindspore" or fmt.startswith("mindspore"):
        return "mindspore"
    if (fmt == "kineto" or fw == "pytorch") and dev == "cpu":
        return "pytorch_cpu"
    if dev == "gpu" or fmt == "kineto":
        return "pytorch_rocm" if vendor == "amd" else "pytorch_gpu"
    if fw == "pytorch":
        return "torch_npu"
    return "ascend"


def say(fw: str, texts: dict[str, str]) -> str:
    """The text for framework ``fw`` (``"ascend"`` falls back to MindSpore + torch_npu).

    ``texts`` maps a framework of :data:`FRAMEWORKS` (or ``"any"``, the fallback) to the
    advice in its terms. ROCm without a text of its own gets the CUDA text in ROCm's
    terms (:func:`rocm_terms`); a CPU-only run without one gets the PyTorch (then the
    ``"any"``) text only if it names no accelerator (:data:`DEVICE_TERMS`), else nothing.
    """
    if fw in texts:
        return texts[fw]
    if fw == "pytorch_rocm" and "pytorch_gpu" in texts:
        return rocm_terms(texts["pytorch_gpu"])
    if fw == "pytorch_cpu":
        for key in ("pytorch_gpu", "any"):
            text = texts.get(key)
            if text is not None and not DEVICE_TERMS.search(text):
                return text
        return ""
    if fw == "ascend" and "torch_npu" in texts and "mindspore" in texts:
        return f"MindSpore: {texts['mindspore']} torch_npu: {texts['torch_npu']}"
    return texts.get("any", next(iter(texts.values())))


def kernel_names(joined: str) -> str:
    """Names joined by ``", "`` (``tiny_kernels``' ``top_names``), each shortened for a
    sentence (:func:`perfkit.analysis.timeline.short_label`: a C++ kernel signature of
    hundreds of characters becomes its function name); repeats are said once.

    The text is split only at the commas outside brackets, so a template argument list
    (``kernel<4, float>``) stays one name.
    """
    from ..analysis.timeline.labels import short_label, split_top_level

    labels = [short_label(n.strip(), max_len=48) for n in split_top_level(str(joined))
              if n.strip()]
    return ", ".join(dict.fromkeys(labels))


def clipped(text: str, limit: int = 160, sep: str = " > ", noun: str = "") -> str:
    """``text`` of at most about ``limit`` characters, cut between two of its parts
    (separated by ``sep``) and saying how many were left out: ``"a > b > … and 9 more"``
    (``"… and 9 more kernels"`` with ``noun="kernel"``); a first part longer than ``limit``
    is cut with an ellipsis. Never a name cut off in the middle without a mark."""
    text = str(text)
    if len(text) <= limit:
        return text
    parts = text.split(sep)
    kept: list[str] = []
    for part in parts:
        if len(sep.join([*kept, part])) > limit:
            break
        kept.append(part)
    if not kept:
        return text[: max(1, limit - 1)].rstrip() + "…"
    left = len(parts) - len(kept)
    return f"{sep.join(kept)}{sep}… and {left} more" + (f" {plural(left, noun)}" if noun
                                                          else "")
