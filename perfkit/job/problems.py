"""Where a job disagrees with the profile it was inferred from.

A config or the user may describe another job than the one profiled — the full 40-layer
model of an 8-layer test run, another batch, another split. :meth:`perfkit.job.Job.problems`
lists each disagreement as a sentence; :mod:`perfkit.guards` puts them in front of any
figure that cannot be right.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..format import counted
from ..specs import ParallelConfig
from .fields import FieldValue, field_label, same, value_text

__all__ = ["disagreements"]


def disagreements(values: Mapping[str, FieldValue], observed: Mapping[str, tuple[Any, str]],
                  parallel: ParallelConfig, world_size: int | None,
                  global_batch_size: int | None) -> list[str]:
    """Each field a config or the user set to another value than the profile shows, and
    the layout's world size and global batch against the job's, one sentence each.

    Parameters
    ----------
    values : mapping
        The value used for every field.
    observed : mapping
        What the profile showed, ``{field: (value, detail)}``.
    parallel : ParallelConfig
        The job's layout.
    world_size, global_batch_size : int or None
        The job's ranks and sequences per step.
    """
    out = []
    for name, (seen, _detail) in observed.items():
        if seen is None or name not in values:
            continue
        used = values[name]
        if used.source not in ("user", "config") or used.value is None:
            continue
        if same(used.value, seen):
            continue
        if name == "num_layers":
            per = observed.get("layers_per_stage", (None, ""))[0]
            extra = f" ({'+'.join(map(str, per))} per stage)" if per and len(per) > 1 \
                else f" ({seen} per stage)" if per else ""
            out.append(f"the job has {counted(used.value, 'layer')} ({used.source}) but the "
                       f"profile shows {seen}{extra}")
        else:
            out.append(f"the job has {field_label(name)} {value_text(used.value)} "
                       f"({used.source}) but the profile shows {value_text(seen)}")
    p = parallel
    if world_size and p.world_size != world_size:
        out.append(f"dp × tp × pp = {p.dp} × {p.tp} × {p.pp} = {p.world_size} but the "
                   f"job has {counted(world_size, 'rank')} ({values['world_size'].source})")
    gbs = global_batch_size
    if gbs is not None and gbs != p.global_batch_size:
        out.append(f"the global batch is {gbs} ({values['global_batch_size'].source})"
                   f" but dp × micro-batch × micro-batches = {p.dp} × "
                   f"{p.micro_batch_size} × {p.num_micro_batches} = "
                   f"{p.global_batch_size}")
    return out
