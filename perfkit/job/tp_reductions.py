"""Tensor parallelism read from the all-reduces of an inference step.

A step with no backward pass (an inference or evaluation step, :func:`~perfkit.job.measured.
read_training_step`) reduces no gradients: its data-parallel replicas never communicate.
The all-reduces it does run inside its forward pass sum the partial outputs of
tensor-parallel layers (Megatron's and vLLM's row-parallel projections, a vocab-parallel
embedding, a tensor-parallel MoE): each takes an activation, ``(tokens, width)``, between
the layers' matrix products (:func:`perfkit.analysis.shapes.reductions.
activation_reductions`). So where the profile names no tp or dp group (Kineto's
``pg_config`` of a vLLM run calls every group ``undefined``), such all-reduces read tp =
the size of their group: the group their kernels record, or, where they record none (vLLM's
``symm_mem`` all-reduce kernels), the one size every group of more than one rank has. dp
is then world / (tp × pp × cp).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import layout as L
from ..analysis.recorded import recorded_steps_text
from ..analysis.shapes.qkv_layout import shape_text
from ..analysis.shapes.reductions import ActivationReductions, activation_reductions
from ..format import counted, listed
from .fields import FieldValue, Readings
from .measured import TRAINING_STEP, read_training_step
from .recorded_steps import none_recorded, over_recorded, recorded_steps_table, recorded_view

__all__ = ["TP_REDUCTIONS", "read_tp_from_reductions", "read_sequence_parallel"]

#: Where :func:`read_tp_from_reductions` keeps what it read (in
#: :attr:`perfkit.Job.observed`): the :class:`~perfkit.analysis.shapes.reductions.
#: ActivationReductions`.
TP_REDUCTIONS = "tp_reductions"


def read_tp_from_reductions(profile: Any, out: Readings, groups: pd.DataFrame) -> int | None:
    """Put ``tp`` and ``dp`` from the all-reduces of activations of a forward-only step;
    return tp (None where they do not show it, and nothing changes).

    Parameters
    ----------
    profile : Profile or Cluster
    out : Readings
        The layout read so far (:func:`~perfkit.job.layout.read_layout`): tp, pp, cp and
        the world size.
    groups : DataFrame
        :func:`perfkit.analysis.layout.communication_groups`.

    Notes
    -----
    Read only where every condition holds: no group is named tp or dp and tp is 1; the
    profile's PyTorch operators hold no backward operator; at least two all-reduces of
    activations (their input's leading dimensions are the tokens the forward matrix
    products take) start between two forward matrix products; their group's size ``n``
    is known (see the module) and ``n × pp × cp`` divides the world size. The host
    operators and collectives counted are those of the steps whose device tasks were
    recorded in full where the ``steps`` table marks some that were not
    (:mod:`~perfkit.job.recorded_steps`: a fragment of a step holds a fraction of its
    all-reduces); where it marks none as recorded in full, nothing is read, and tp's
    detail says why.
    """
    named = L.group_sizes(groups)
    if "tp" in named or "dp" in named or out["tp"].value != 1 or groups.empty:
        return None
    step: dict[str, Any] = {}
    read_training_step(profile, step)
    # False: no backward operator; None: none either, but no step was recorded in full
    if TRAINING_STEP not in step or step[TRAINING_STEP].value is True:
        return None
    marks = recorded_steps_table(profile)
    if none_recorded(marks):
        tp = out["tp"]
        out.put("tp", tp.value, f"{tp.detail}; the all-reduces of activations are not "
                                "counted for tp: no step's device tasks were recorded in full "
                                f"(device tasks recorded for {recorded_steps_text(marks)}), "
                                "and a fragment of a step holds a fraction of its all-reduces",
                tp.source)
        return None
    if step[TRAINING_STEP].value is not False:
        return None
    found = activation_reductions(recorded_view(profile, ("ops", "comm_ops")))
    if found is None or found.between < 2:
        return None
    size = _group_size(groups, found.groups)
    if size is None:
        return None
    tp, group_said = size
    pp, cp = int(out["pp"].value), int(out["cp"].value)
    world = int(out["world_size"].value or 0)
    if not world or world % (tp * pp * cp):
        return None
    said = _reductions_text(found, over_recorded(marks))
    out.put("tp", tp, f"{said}; {group_said}: tp {tp}")
    out[TP_REDUCTIONS] = FieldValue(found, "profile", said)
    parts = f"tp {tp} × pp {pp}" + (f" × cp {cp}" if cp > 1 else "")
    dp = world // (tp * pp * cp)
    out.put("dp", dp, f"world {world} / ({parts}) = {dp}: the step's all-reduces are "
                      "tensor-parallel, and a step without a backward pass has no "
                      "gradient reduction to show data parallelism")
    return tp


def read_sequence_parallel(out: Readings) -> None:
    """Put ``sequence_parallel`` False where tp was read from whole-activation all-reduces
    and nothing else said it: sequence parallelism replaces each of them by a
    reduce-scatter and an all-gather."""
    seen = out.get(TP_REDUCTIONS)
    if seen is None or out["sequence_parallel"].source != "default":
        return
    found = seen.value
    shapes = listed([shape_text(s) for s in found.shapes], "or")
    out.put("sequence_parallel", False,
            f"the tensor-parallel layers all-reduce whole activations ({shapes}, "
            f"{found.tokens} tokens): sequence parallelism would replace each all-reduce by a "
            "reduce-scatter and an all-gather")


def _reductions_text(found: ActivationReductions, over: str = "") -> str:
    """What the all-reduces show, in a sentence without its verdict (``over``: the steps
    they were counted over, :func:`~perfkit.job.recorded_steps.over_recorded`)."""
    shapes = listed([shape_text(s) for s in found.shapes], "or")
    ranks = listed(found.ranks)
    return (f"{found.count} of the {counted(found.all_reduces, 'all-reduce')} on rank"
            f"{'s' if len(found.ranks) != 1 else ''} {ranks}{over} take activations, {shapes}: "
            f"{found.tokens} rows, the tokens the forward matrix products take, "
            f"{found.between} of them between two of those products; the step has no "
            "backward pass, so they sum tensor-parallel layers' partial outputs, not "
            "gradients")


def _group_size(groups: pd.DataFrame, kernel_groups: tuple[str, ...]
                ) -> tuple[int, str] | None:
    """The size of the all-reduces' group and the words for it, or None where unknown:
    the group their kernels record, else the one size of every group of more than one
    rank."""
    source = str(groups["source"].iloc[0]).split(" (", 1)[0]
    sized = groups[groups["size"].notna()]
    if kernel_groups:
        mine = sized[sized["group"].astype(str).isin(kernel_groups)]
        sizes = sorted({int(n) for n in mine["size"]})
        if len(sizes) != 1 or sizes[0] < 2:
            return None
        n = sizes[0]
        return n, (f"their kernels run in process group {listed(kernel_groups)} of {n} "
                   f"ranks ({source})")
    big = sized[sized["size"].astype(int) > 1]
    sizes = sorted({int(n) for n in big["size"]})
    if len(sizes) != 1:
        return None
    n = sizes[0]
    return n, (f"their kernels record no process group, but every communication group of "
               f"more than one rank holds {n} ranks ({len(big)} of the "
               f"{counted(len(groups), 'group')} in {source})")
