"""The micro-batches per step from the pipeline's sends, where no operator shape gives them.

A pipeline's first stage sends each micro-batch's activations to the next stage once per
model chunk and its gradients back once per chunk but the first: m·(2·vpp − 1) sends per
step (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters", section 2.2; :func:`perfkit.job.layout.read_vpp` reads vpp from the same
count when m is known). With no interleaved schedule recorded (vpp 1) the count is m
itself. A legacy MindSpore cluster (``hccl_raw_{rank}.csv``) records the sends and
receives but no operator shapes: MindInsight's ``cluster_propose`` sample has 4
``Send-op…`` per step on ranks 0 and 1 (stage 0 of pp 2), so m = 4, not the 2 (pp, the
fewest a pipeline runs) the schedule's bubble was otherwise computed with.
"""

from __future__ import annotations

from typing import Any

from ..io.canonical.comm_words import comm_words_of
from .layout import first_stage_sends
from .recorded_steps import over_recorded

__all__ = ["read_micro_batches", "first_stage_of"]


def first_stage_of(stage_of: dict[int, int], pp: int, world: int | None) -> dict[int, int]:
    """``stage_of`` where the groups gave it, else the ranks of ``world / pp`` consecutive
    ranks per stage (the Megatron / MindSpore default order, as
    :func:`perfkit.analysis.cluster.stage_of_ranks` takes it from a ``parallel``)."""
    if stage_of or not world or pp <= 1 or world % pp:
        return dict(stage_of)
    per = world // pp
    return {r: r // per for r in range(world)}


def read_micro_batches(profile: Any, put: Any, pp: int, world: int | None,
                       stage_of: dict[int, int]) -> bool:
    """Put ``num_micro_batches`` from the first stage's pipeline sends per step (vpp 1).

    The sends per step are the most frequent count over the first stage's (rank, step)
    pairs, among the steps recorded in full (:func:`perfkit.job.layout.first_stage_sends`).

    Returns
    -------
    bool
        Whether it was read (nothing is put otherwise): pp > 1, a first stage known or
        ``world / pp`` consecutive ranks, and at least pp sends per step counted on it
        (a pipeline runs at least pp micro-batches, :class:`perfkit.ParallelConfig`'s
        rule; fewer are not its micro-batches: ``ascend/msinsight-cluster-output``'s
        first stage records 1 send per step).
    """
    if pp <= 1:
        return False
    stages = first_stage_of(stage_of, pp, world)
    if not stages:
        return False
    sends, marks, _ = first_stage_sends(profile, stages)
    if sends.empty:
        return False
    per = int(sends["sends"].mode().iloc[0])
    if per < pp:  # fewer sends than stages: not a pipeline's count (a rank's few p2p ops)
        return False
    first = sorted(r for r, s in stages.items() if s == 0)
    put("num_micro_batches", per,
        f"{comm_words_of(profile).source}: {per} pipeline sends per step on the first "
        f"stage (ranks {', '.join(map(str, first))}){over_recorded(marks)} = m·(2·vpp − 1) "
        "with vpp 1 (no interleaved schedule recorded: m·3 sends with vpp 2 would read as "
        "3·m micro-batches)")
    return True
