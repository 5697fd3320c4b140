"""Which fused attention kernel a GPU profile ran, read from its device kernels' names.

The step model prices the attention core on the published curve of one implementation
(:mod:`perfkit.calc.attention_rate`): at 8k tokens on an H100 FlashAttention-3's forward
runs about 1.8 times as fast as FlashAttention-2's. ``"auto"`` guesses the kernel from the
hardware alone (cuDNN's on Hopper, where PyTorch's ``scaled_dot_product_attention``
chooses it). A profile shows which kernel ran: the names its libraries give their
kernels, matched in this order (:data:`KERNEL_RULES`):

* ``"flash3"``: FlashAttention-3, the ``flash-attn`` package's Hopper kernels,
  ``cutlass::device_kernel<flash::FlashAttnFwdSm90<…>>`` and ``flash::FlashAttnBwd<…,
  cutlass::arch::Sm90, …>``;
* ``"cudnn"``: cuDNN's fused attention, ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop``
  and ``_bprop`` (what SDPA's cuDNN backend and Transformer Engine launch);
* ``"flash2"``: FlashAttention-2, ``flash::flash_fwd_kernel<…>`` of the ``flash-attn``
  package and ``pytorch_flash::flash_fwd_kernel<…>`` of SDPA's flash backend, with their
  ``flash_bwd_*`` and ``flash_fwd_splitkv_*`` kernels;
* ``"flash1"``: FlashAttention 1 (``flash-attn`` 1.x), ``fmha_fwd_loop_kernel`` and
  ``fmha_bwd_dq_dk_dv_loop_kernel`` (``fmha_fprop_*`` / ``fmha_dgrad_*`` before 1.0).

Anything else (Ascend's ``FlashAttentionScore``, xformers' ``fmha_cutlassF``, a Triton
kernel, whose generic names say nothing) reads as None: ``"auto"`` stays.
"""

from __future__ import annotations

import re
from typing import Any

from .._frames import is_lazy
from .._shared import shared_factorize
from .._util import table

__all__ = ["KERNEL_RULES", "read_attention_kernel"]

#: ``(implementation, pattern, what)``, tried in this order on the kernels' names.
KERNEL_RULES: tuple[tuple[str, str, str], ...] = (
    ("flash3", r"flash::FlashAttn\w*<.*Sm90|flash::FlashAttn\w*Sm90",
     "FlashAttention-3 kernels (flash::FlashAttn… for Sm90)"),
    ("cudnn", r"(?i)cudnn\w*sdpa",
     "cuDNN fused attention kernels (cudnn_…sdpa…)"),
    ("flash2", r"flash_(?:fwd|bwd)\w*kernel",
     "FlashAttention-2 kernels (flash_fwd_kernel / flash_bwd_…)"),
    ("flash1", r"\bfmha_(?:fwd|bwd|fprop|dgrad)_\w*kernel\b",
     "FlashAttention 1 kernels (fmha_fwd_… / fmha_bwd_…)"),
)


def read_attention_kernel(profile: Any) -> tuple[str | None, str]:
    """The attention implementation the profile's device kernels show, and what was read.

    Parameters
    ----------
    profile : Profile or Cluster
        A loaded profile (its ``kernels`` table: one row per device task).

    Returns
    -------
    (str or None, str)
        One of ``"flash3"``, ``"cudnn"``, ``"flash2"``, ``"flash1"`` (the first rule of
        :data:`KERNEL_RULES` some kernel matches) with the words saying which kernels,
        or None with why nothing was read.
    """
    if is_lazy(profile):
        return None, "the kernel names of a lazy cluster are not read for this"
    frame = table(profile, "kernels")
    if frame.empty or "name" not in frame.columns:
        return None, "no device kernels"
    # the distinct names, coded once (a profile repeats a few thousand names over a
    # million tasks): each rule then searches those, not the rows
    _codes, distinct = shared_factorize(frame["name"], use_na_sentinel=True)
    names = [str(n) for n in distinct]
    for implementation, pattern, what in KERNEL_RULES:
        search = re.compile(pattern).search
        if any(search(n) for n in names):
            return implementation, what
    return None, "no kernel of a known fused attention library (flash-attn, cuDNN)"
