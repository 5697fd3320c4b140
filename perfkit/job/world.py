"""The world size as the profile and its job say it together: one fact, not "unknown"
beside a job layout of 8 devices."""

from __future__ import annotations

from typing import Any

from ..format import counted

__all__ = ["world_size_fact"]


def world_size_fact(meta: Any, job: Any = None) -> str:
    """The world size fact of ``perfkit info`` and the Overview's "What was opened": the
    profile's own (:meth:`perfkit.profile.ProfileMeta.world_size_text`), or, where the
    profiler records none, the devices of the job's layout, said as the job's
    (``"not recorded by the profiler; the job counts 8 devices in its layout
    [default]"``, with the source of its data-parallel size)."""
    text = meta.world_size_text()
    devices = getattr(job, "world_size", None) if job is not None else None
    if text == "unknown" and devices:
        return (f"not recorded by the profiler; the job counts "
                f"{counted(int(devices), 'device')} in its layout [{job.source('dp')}]")
    return text
