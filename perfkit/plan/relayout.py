"""Another layout of a profiled run: its :class:`~perfkit.ParallelConfig` with some knobs
changed and the others following (``perfkit plan``, the ``predict_layout`` tool of
``perfkit mcp``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, ParallelConfigError, check_positive_int
from ..specs import ParallelConfig

__all__ = ["relayout", "layout_text", "per_device_text"]

#: The knobs that are whole numbers >= 1, checked before the others follow from them.
_COUNTS = ("dp", "tp", "pp", "vpp", "cp", "ep", "micro_batch_size", "num_micro_batches",
           "optimizer_shard")


def relayout(base: ParallelConfig, options: Mapping[str, Any],
             global_batch_size: int | None = None) -> ParallelConfig:
    """The :class:`~perfkit.ParallelConfig` to predict: ``base`` (the run's) with
    ``options`` (ParallelConfig fields; None keeps the run's).

    Without ``dp``, a changed tp·pp·cp keeps the device count where it divides it;
    without ``optimizer_shard``, a shard over all of dp follows dp, and one that no longer
    divides dp becomes 1; without ``num_micro_batches``, the micro-batches keep
    ``global_batch_size``: ``m = B / (dp · micro_batch_size)`` where it divides (the
    definition of :attr:`perfkit.ParallelConfig.global_batch_size`). A run's per-stage
    ``recompute_layers`` (MindFormers ``recompute: [1, 0]``) is dropped when ``recompute``
    changes (the new policy covers every layer) and, when ``pp`` changes, spread over the
    new stages as many in all (:func:`_spread`).

    Raises
    ------
    ParallelConfigError
        The layout breaks a rule of :class:`~perfkit.ParallelConfig`, a count given in
        ``options`` is not a whole number >= 1 (named as given, before dp or the
        micro-batches are worked out from it), or ``global_batch_size`` does not split
        over dp × micro-batch without ``num_micro_batches`` (saying which knob moved).
    """
    changes = {k: v for k, v in options.items() if v is not None}
    for name in _COUNTS:
        if name in changes:
            try:
                changes[name] = check_positive_int(name, changes[name])
            except InvalidArgumentError as exc:
                raise ParallelConfigError(exc.parameter, exc.rule, exc.value) from None
    if "dp" not in changes:
        inner = (changes.get("tp", base.tp) * changes.get("pp", base.pp)
                 * changes.get("cp", base.cp))
        if inner != base.tp * base.pp * base.cp and base.world_size % inner == 0:
            changes["dp"] = base.world_size // inner
    dp = changes.get("dp", base.dp)
    if "optimizer_shard" not in changes and dp != base.dp:
        shard = base.optimizer_shard
        changes["optimizer_shard"] = dp if shard == base.dp else (shard if dp % shard == 0
                                                                   else 1)
    mbs = changes.get("micro_batch_size", base.micro_batch_size)
    if "num_micro_batches" not in changes and global_batch_size:
        if global_batch_size % (dp * mbs):
            raise _unsplit(base, options, dp, mbs, global_batch_size)
        changes["num_micro_batches"] = global_batch_size // (dp * mbs)
    if changes.get("tp", base.tp) == 1 and "sequence_parallel" not in changes:
        changes["sequence_parallel"] = False
    if "recompute_layers" not in changes:
        if "recompute" in changes and changes["recompute"] != base.recompute:
            changes["recompute_layers"] = None  # the new policy on every layer
        elif isinstance(base.recompute_layers, tuple) and changes.get("pp", base.pp) != base.pp:
            changes["recompute_layers"] = _spread(base.recompute_layers, changes["pp"])
    return dataclasses.replace(base, **changes)


def _unsplit(base: ParallelConfig, options: Mapping[str, Any], dp: int, mbs: int,
             global_batch_size: int) -> ParallelConfigError:
    """The run's global batch does not split over ``dp`` × ``mbs``: which knob moved
    (dp following the device count, or the micro-batch given) and what to give instead."""
    moved = []
    if options.get("dp") is None and dp != base.dp:
        moved.append(f"dp became {dp} to keep the run's {base.world_size} devices")
    if options.get("micro_batch_size") is not None:
        moved.append(f"micro-batch {mbs} as given")
    why = f" ({'; '.join(moved)})" if moved else ""
    return ParallelConfigError(
        "global_batch_size", f"the run's global batch of {global_batch_size} sequences "
        f"does not split over dp {dp} × micro-batch {mbs}{why}: set the data-parallel "
        "size or the micro-batch size so that it does, or the number of micro-batches (a "
        "new global batch)")


def _spread(per_stage: tuple[int, ...], pp: int) -> tuple[int, ...]:
    """The run's fully recomputed layers, as many in all, over ``pp`` stages: evenly, the
    remainder on the first stages (in 1F1B they hold the most micro-batches in flight)."""
    base, extra = divmod(sum(per_stage), pp)
    return tuple(base + (1 if s < extra else 0) for s in range(pp))


def layout_text(layout: Mapping[str, Any]) -> str:
    """``dp 8 × tp 1 × pp 2 (vpp 2), micro-batch 2 × 4, recompute full``: a layout's
    fields (a :class:`~perfkit.ParallelConfig`'s, as a mapping: the ``predict`` answer's
    ``parallel``, or ``dataclasses.asdict``), as ``perfkit plan`` and the Planner's
    "Predict a layout" box write it."""
    p = layout
    return (f"dp {p['dp']} × tp {p['tp']} × pp {p['pp']}"
            + (f" (vpp {p['vpp']})" if p["vpp"] > 1 else "")
            + (f" × cp {p['cp']}" if p["cp"] > 1 else "")
            + f", micro-batch {p['micro_batch_size']} × {p['num_micro_batches']}, "
              f"recompute {p['recompute']}")


def per_device_text(tokens_per_second_per_device: float, devices: int) -> str:
    """``5,823 tokens/s per device on 16 devices``: what a layout on more (or fewer)
    devices than the run does per device, beside its step."""
    from ..format import counted

    return (f"{tokens_per_second_per_device:,.0f} tokens/s per device on "
            f"{counted(devices, 'device')}")
