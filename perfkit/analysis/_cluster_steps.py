"""A lazy cluster's ranks seen under the cluster's rule for tasks of no step.

An eager cluster leaves a task of no step out of the figures per step where any task of
the cluster has a step (:func:`~._util.in_steps` over the whole table): a rank whose
tasks have no step at all is then left out entirely. A lazy (Dask) cluster's analyses run
rank by rank (table partitions, :meth:`~perfkit.io.engines.dask.DaskCluster.map_ranks`),
where one rank alone would keep them. :func:`in_cluster_steps` works out once whether the
cluster has a step (:func:`~._util.steps_anywhere`) and marks every rank's tasks with it
(:func:`~._util.with_steps_elsewhere`), so that each rank decides as the cluster does;
:func:`per_rank_in_steps` runs an analysis rank by rank so, a rank with no task in a step
adding none of its own notes (it is no part of the eager figures either); nor does a rank
every task of which :func:`~.recorded.recorded_profile` left out (its steps were recorded
only in part), unless every rank's were.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import pandas as pd

from ..profile import Profile
from ._frames import OUT_OF_SCOPE, is_lazy, is_lazy_frame, per_rank
from ._util import no_step_note, step_rows, steps_anywhere, table, with_steps_elsewhere
from .recorded import recorded_mask

__all__ = ["in_cluster_steps", "per_rank_in_steps"]

#: The clusters :func:`in_cluster_steps` gave: already seen under the cluster's rule.
_MARKED: weakref.WeakSet[Any] = weakref.WeakSet()


def in_cluster_steps(profile: Any) -> Any:
    """``profile`` whose ranks leave out their tasks of no step as the whole cluster does.

    Parameters
    ----------
    profile : Profile or Cluster
        A lazy (Dask) cluster is viewed rank by rank
        (:meth:`~perfkit.io.engines.dask.DaskCluster.viewed`) where some rank's tasks have
        a step; anything else (an eager profile or cluster, which decide over their whole
        table already, or a lazy cluster with no step anywhere) is returned as it is.

    Returns
    -------
    Profile or Cluster
        The same tasks in every table; only which of them are in a step's scope changes.
    """
    viewed = getattr(profile, "viewed", None)
    if not is_lazy(profile) or viewed is None or is_lazy_frame(profile) or profile in _MARKED:
        return profile
    if not steps_anywhere(table(profile, "kernels")):
        return profile
    out = viewed(_marked_rank)
    _MARKED.add(out)
    return out


def _marked_rank(profile: Profile) -> Profile:
    """One rank of a lazy cluster where some rank's tasks have a step, its tasks marked so
    (:func:`~perfkit.analysis._util.with_steps_elsewhere`); nothing is read until a table
    is asked for."""
    def tables(name: str) -> pd.DataFrame:
        frame = table(profile, name)
        return with_steps_elsewhere(frame, True) if name == "kernels" else frame

    return Profile(profile.meta, tables)


def per_rank_in_steps(profile: Any, func: Callable[..., pd.DataFrame], *args: Any,
                      noted: bool = False, **kwargs: Any) -> pd.DataFrame:
    """:func:`~._frames.per_rank` of ``func`` over the ranks of :func:`in_cluster_steps`.

    A rank none of whose tasks has a step, where another rank's have, is wholly out of
    scope: ``func``'s notes about it (no device task, no input shapes) are not the
    cluster's, and are dropped; with ``noted`` (an analysis that notes the tasks of no step
    it leaves out, put together by :func:`~._util.ranks_noted_no_step`) the rank's note of
    its tasks of no step is kept in their place. An eager profile is passed to ``func`` as
    it is.
    """
    if not is_lazy(profile):
        return func(profile, *args, **kwargs)
    return per_rank(in_cluster_steps(profile), _rank_in_steps, func, noted, args, kwargs)


def _rank_in_steps(profile: Profile, func: Callable[..., pd.DataFrame], noted: bool,
                   args: tuple[Any, ...], kwargs: dict[str, Any]) -> pd.DataFrame:
    """``func`` of one rank (:func:`per_rank_in_steps`), without its notes when none of
    its tasks is in a step's scope, and marked :data:`~._frames.OUT_OF_SCOPE` when its
    steps' tasks were all left out as recorded only in part
    (:func:`~.recorded.recorded_profile`)."""
    out = func(profile, *args, **kwargs)
    kernels = table(profile, "kernels")
    if kernels.empty and _cut_steps(table(profile, "steps")):
        # no task left to the figures: its notes ("no device tasks", "no input shapes")
        # are not the cluster's, whose other ranks the eager analysis reads alone
        out.attrs[OUT_OF_SCOPE] = True
        return out
    stepped = step_rows(kernels)
    if stepped is None or stepped.any():
        return out
    note = no_step_note(kernels) if noted else ""
    out.attrs["notes"] = [note] if note else []
    return out


def _cut_steps(steps: pd.DataFrame) -> bool:
    """Whether a ``steps`` table marks some step's device tasks as recorded only in part
    (:func:`~.recorded.recorded_mask`)."""
    mask = recorded_mask(steps)
    return mask is not None and not bool(mask.all())
