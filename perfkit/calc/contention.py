"""Compute slowed by the communication that runs under it (:func:`overlap_contention`).

A collective that overlaps compute is not free: on a GPU, NCCL's and RCCL's kernels occupy
streaming multiprocessors (compute units) and share the memory bandwidth, so the GEMMs and
attention kernels that run beside them go slower. Lee et al. measured it on four GPUs
(A100, H100, MI250, MI210) training GPT and Llama models with overlapped communication:
the compute that overlaps communication is **18.9 % slower on average** (40.0 % at most)
than the same compute with no communication beside it (S. Lee, J. Oh, J. Kim, S. Go,
J. Park, D. Mahajan, "Characterizing Compute-Communication Overlap in GPU-Accelerated
Distributed Deep Learning: Performance and Power Implications", arXiv:2507.03114, 2025,
abstract).

The step model (:func:`perfkit.calc.timing.step_times`) therefore charges, for every
collective (or share of one) it hides under compute, ``share × hidden seconds`` to that
collective's part: the compute beside it runs ``1 + share`` times as long for as long as
the hidden traffic lasts. ``share`` is ``Rates.overlap_contention``; None takes
:func:`overlap_contention` of the device.

On Ascend the collectives are driven by HCCL's own engines and no comparable measurement
is published: 0 there until one is (a profile's calibration still fits what the step
shows). The default is a published average over four devices and two model families,
not a per-device figure: set the share where you have measured your own.
"""

from __future__ import annotations

__all__ = ["GPU_OVERLAP_CONTENTION", "overlap_contention", "contention_share"]

#: Average slowdown of compute that overlaps communication on A100, H100, MI250 and MI210
#: (Lee et al. 2025, arXiv:2507.03114, abstract: 18.9 % on average, 40.0 % at most).
GPU_OVERLAP_CONTENTION = 0.189


def overlap_contention(hardware_name: str | None) -> float:
    """The default share by which compute slows while communication overlaps it on
    ``hardware_name``: :data:`GPU_OVERLAP_CONTENTION` on a GPU, 0 on an Ascend NPU (no
    published measurement; see the module docstring)."""
    name = (hardware_name or "").lower()
    if "ascend" in name or name.startswith("910"):
        return 0.0
    return GPU_OVERLAP_CONTENTION


def contention_share(share: float | None, hardware_name: str | None) -> float:
    """``share`` where set (``Rates.overlap_contention``), else the device's default
    (:func:`overlap_contention`)."""
    return float(share) if share is not None else overlap_contention(hardware_name)
